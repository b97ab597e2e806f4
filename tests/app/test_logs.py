"""Log lines an operator can ship: one JSON object per line, secrets redacted as everywhere."""

import io
import json
import logging

from app import formatter
from domain import remember
from tests.app.test_cli import run_cli


def test_a_json_line_holds_time_level_logger_message_extras_and_no_secret():
    remember(["pw-in-a-log-line"])
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter("json"))
    log = logging.getLogger("test.json")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("batch %d to redis://u:pw-in-a-log-line@h:1/0", 7, extra={"batch_id": 7, "counts": {"in": 3}})
        try:
            raise ValueError("sasl.password=pw-in-a-log-line")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert {"time", "level", "logger", "message"} <= set(first)
    assert (first["level"], first["logger"], first["batch_id"], first["counts"]) == (
        "WARNING",
        "test.json",
        7,
        {"in": 3},
    )
    assert first["message"] == "batch 7 to redis://***@h:1/0"
    assert "ValueError" in second["exc_info"] and "pw-in-a-log-line" not in stream.getvalue()


def test_dedup_run_with_json_logs_writes_only_json_lines(tmp_path):
    records = [b'{"id":"1","uniqueValue":"u","type":"APP","timestamp":1700000000}', b"not json"]
    done = run_cli(
        "run",
        "--source",
        "-",
        "--sink",
        "-",
        "--dlq",
        f"file:{tmp_path / 'd.jsonl'}",
        env={"DEDUP_LOG_FORMAT": "json", "DEDUP_LOG_LEVEL": "INFO"},
        stdin=b"\n".join(records) + b"\n",
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.decode().splitlines()]
    summary = [line for line in lines if line["message"].startswith("done:")]
    assert summary and summary[0]["counts"]["in"] == 2 and summary[0]["counts"]["dead_lettered"] == 1
