"""The `dedup` command as a user runs it: files, stdin/stdout, settings errors, the demo."""

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import main
from domain import dead_letters
from tests.support.scenarios import INVALID_RECORDS, SCENARIOS

DEDUP = [sys.executable, "-m", "app"]


def write_lines(path: Path, records: list[bytes]) -> None:
    path.write_bytes(b"".join(r + b"\n" for r in records))


def test_run_on_files_gives_the_scenario_semantics_and_a_summary(tmp_path):
    scenario = next(sc for sc in SCENARIOS if sc.name.startswith("window boundary"))
    records = scenario.records() + [raw for raw, _ in INVALID_RECORDS]
    write_lines(tmp_path / "in.jsonl", records)
    code = main(
        [
            "run",
            "--engine",
            "memory",
            "--source",
            f"file:{tmp_path / 'in.jsonl'}",
            "--sink",
            f"file:{tmp_path / 'out.jsonl'}",
            "--dlq",
            f"file:{tmp_path / 'dlq.jsonl'}",
            "--summary-json",
            str(tmp_path / "summary.json"),
        ]
    )
    assert code == 0
    emitted = [r for r, v in zip(records, scenario.expected()) if v == "emit"]
    assert (tmp_path / "out.jsonl").read_bytes().splitlines() == emitted
    dead = [dead_letters.from_document(json.loads(line)) for line in (tmp_path / "dlq.jsonl").read_text().splitlines()]
    assert [(d.reason, d.record.value) for d in dead] == [(code, raw) for raw, code in INVALID_RECORDS]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {k: summary[k] for k in ("in", "out", "duplicates", "dead_lettered")} == {
        "in": len(records),
        "out": 3,
        "duplicates": 2,
        "dead_lettered": len(INVALID_RECORDS),
    }


RECORDS_FOR_A_YOUNG_COLLECTION = 30_000  # new keys: about two objects each stay, so a collection comes


def test_a_run_keeps_what_lived_before_it_out_of_the_cycle_collector_and_gives_it_back(tmp_path):
    write_lines(
        tmp_path / "in.jsonl",
        [
            json.dumps({"id": str(i), "uniqueValue": f"u{i}", "type": "APP", "timestamp": 1_700_000_000}).encode()
            for i in range(RECORDS_FOR_A_YOUNG_COLLECTION)
        ],
    )
    frozen_in_collections = []
    gc.callbacks.append(lambda phase, info: frozen_in_collections.append(gc.get_freeze_count()))
    try:
        code = main(
            [
                "run",
                "--engine",
                "memory",
                "--source",
                f"file:{tmp_path / 'in.jsonl'}",
                "--sink",
                f"file:{tmp_path / 'out.jsonl'}",
                "--dlq",
                f"file:{tmp_path / 'dlq.jsonl'}",
            ]
        )
    finally:
        gc.callbacks.pop()
    assert code == 0 and len((tmp_path / "out.jsonl").read_bytes().splitlines()) == RECORDS_FOR_A_YOUNG_COLLECTION
    assert max(frozen_in_collections, default=0) > 10_000  # the modules and the wiring, at least
    assert gc.get_freeze_count() == 0


def run_cli(*args, env=None, stdin=b"", cwd=None):
    full_env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), **(env or {})}
    return subprocess.run([*DEDUP, *args], input=stdin, capture_output=True, env=full_env, cwd=cwd, timeout=60)


def test_stdin_to_stdout(tmp_path):
    records = SCENARIOS[0].records()
    done = run_cli(
        "run",
        "--source",
        "-",
        "--sink",
        "-",
        "--dlq",
        f"file:{tmp_path / 'dlq.jsonl'}",
        stdin=b"\n".join(records) + b"\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [records[0], records[2]]
    assert b"in=3, out=2, duplicates=1, dead_lettered=0" in done.stderr


@pytest.mark.parametrize(
    "env, args, message",
    [
        ({"DEDUP_RULES__WEB__WINDOW": "-5"}, [], "invalid setting rules.WEB.window (DEDUP_RULES__WEB__WINDOW)"),
        ({"DEDUP_BATCH_SIZE": "0"}, [], "invalid setting batch_size (DEDUP_BATCH_SIZE)"),
        ({"DEDUP_POLICIES__TRANSIENT": "retry(attempts=2)"}, [], "invalid setting policies.transient"),
        ({}, ["--state", "postgres://x"], "invalid setting state"),
        ({}, ["--source", "kafka://127.0.0.1:1/t"], "invalid setting source"),
        ({"DEDUP_RULES__MOBILE__KEY_FIELDS": "id"}, [], "rules.MOBILE.window (DEDUP_RULES__MOBILE__WINDOW): required"),
        (
            {"DEDUP_KAFKA__DELIVERY": "exactly-once"},
            [
                "--engine",
                "kafka",
                "--source",
                "kafka://127.0.0.1:1/in",
                "--sink",
                "kafka://127.0.0.1:1/out",
                "--dlq",
                "kafka://127.0.0.1:1/dead",
            ],
            "invalid setting kafka.delivery (DEDUP_KAFKA__DELIVERY)",
        ),
        (
            {},
            [
                "--engine",
                "kafka",
                "--source",
                "kafka://127.0.0.1:1/in",
                "--sink",
                "kafka://127.0.0.1:1/out",
                "--dlq",
                "",
            ],
            "--dlq kafka://HOST:PORT/TOPIC is required",
        ),
    ],
)
def test_bad_settings_stop_with_one_line_naming_the_setting(tmp_path, env, args, message):
    done = run_cli("run", "--engine", "memory", "--sink", "-", "--dlq", f"file:{tmp_path / 'd'}", *args, env=env)
    err = done.stderr.decode()
    assert done.returncode == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_config_file_sets_rules_and_env_overrides_it(tmp_path):
    config = tmp_path / "dedup.yaml"
    config.write_text("rules:\n  APP:\n    window: 2m\nbatch_size: 7\n")
    records = [
        b'{"id":"1","uniqueValue":"a","type":"APP","timestamp":100}',
        b'{"id":"2","uniqueValue":"a","type":"APP","timestamp":200}',
    ]
    done = run_cli(
        "run", "--config", str(config), "--sink", "-", "--dlq", f"file:{tmp_path / 'd'}", stdin=b"\n".join(records)
    )
    assert done.stdout.splitlines() == [records[0]]
    done = run_cli(
        "run",
        "--config",
        str(config),
        "--sink",
        "-",
        "--dlq",
        f"file:{tmp_path / 'd'}",
        env={"DEDUP_RULES__APP__WINDOW": "30"},
        stdin=b"\n".join(records),
    )
    assert done.stdout.splitlines() == records


def test_bad_config_file_is_one_line(tmp_path):
    config = tmp_path / "dedup.yaml"
    config.write_text("rules: [unclosed\n")
    done = run_cli("run", "--config", str(config))
    assert done.returncode == 2 and done.stderr.decode().startswith("dedup: config file")


def test_demo_reports_counts_matching_the_generated_stream(tmp_path):
    done = run_cli("demo", "--engine", "memory", "--events", "3000", "--out", str(tmp_path / "demo"))
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert "dedup demo: OK" in err and "MISMATCH" not in err
    out_lines = (tmp_path / "demo" / "output.jsonl").read_text().splitlines()
    assert len({json.loads(line)["id"] for line in out_lines}) == len(out_lines) > 2000


def test_invalidate_notification_lets_a_failed_event_pass_again(tmp_path, capsys):
    first = b'{"id":"1","uniqueValue":"a","type":"WEB","timestamp":100}'
    resent = b'{"id":"2","uniqueValue":"a","type":"WEB","timestamp":160}'
    (tmp_path / "in.jsonl").write_bytes(first + b"\n" + resent + b"\n")
    notes = tmp_path / "notes.jsonl"
    notes.write_text(
        json.dumps({"notification": "INVALIDATE", "exception": "downstream failed", "event": json.loads(first)})
        + "\nnot a notification\n"
    )
    snapshot = tmp_path / "state.snapshot"
    args = [
        "run",
        "--sink",
        f"file:{tmp_path / 'out.jsonl'}",
        "--dlq",
        f"file:{tmp_path / 'd'}",
        "--state",
        f"memory:{snapshot}",
        "--batch-size",
        "1",
    ]
    # without the notification the re-sent event is a duplicate
    assert main([*args, "--source", f"file:{tmp_path / 'in.jsonl'}"]) == 0
    assert (tmp_path / "out.jsonl").read_bytes().splitlines() == [first]
    # the notification removes the key from the saved state; the re-sent event passes
    (tmp_path / "again.jsonl").write_bytes(resent + b"\n")
    assert (
        main(
            [
                *args,
                "--source",
                f"file:{tmp_path / 'again.jsonl'}",
                "--notifications",
                f"file:{notes}",
                "--summary-json",
                str(tmp_path / "s.json"),
            ]
        )
        == 0
    )
    assert (tmp_path / "out.jsonl").read_bytes().splitlines() == [first, resent]
    assert "invalidations=1, rejected_notifications=1)" in capsys.readouterr().err
    summary = json.loads((tmp_path / "s.json").read_text())
    assert (summary["invalidations"], summary["rejected_notifications"]) == (1, 1)


def test_a_last_notification_without_its_newline_is_applied_when_a_bounded_run_ends(tmp_path):
    first = b'{"id":"1","uniqueValue":"a","type":"WEB","timestamp":100}'
    resent = b'{"id":"2","uniqueValue":"a","type":"WEB","timestamp":160}'
    (tmp_path / "in.jsonl").write_bytes(first + b"\n")
    (tmp_path / "again.jsonl").write_bytes(resent + b"\n")
    notes = tmp_path / "notes.jsonl"
    notes.write_text(json.dumps({"notification": "INVALIDATE", "exception": "lost", "event": json.loads(first)}))
    args = [
        "run",
        "--sink",
        f"file:{tmp_path / 'out.jsonl'}",
        "--dlq",
        f"file:{tmp_path / 'd'}",
        "--state",
        f"memory:{tmp_path / 'state.snapshot'}",
        "--summary-json",
        str(tmp_path / "s.json"),
    ]
    assert main([*args, "--source", f"file:{tmp_path / 'in.jsonl'}", "--notifications", f"file:{notes}"]) == 0
    assert json.loads((tmp_path / "s.json").read_text())["invalidations"] == 1
    # the key was forgotten before the snapshot was saved: the re-sent event passes
    assert main([*args, "--source", f"file:{tmp_path / 'again.jsonl'}"]) == 0
    assert (tmp_path / "out.jsonl").read_bytes().splitlines() == [first, resent]


def app_event(id_: str, value: str, t: int) -> bytes:
    return json.dumps({"id": id_, "uniqueValue": value, "type": "APP", "timestamp": 1_700_000_000 + t}).encode()


def test_stdin_read_again_by_a_new_run_is_new_input_so_its_events_are_duplicates_of_the_first_runs(tmp_path):
    # stdin cannot replay: the same bytes piped into a second run (state kept in a snapshot) are
    # not the first run's records read again, so the events it emitted are duplicates now
    stream = [app_event("a1", "a", 0), app_event("b1", "b", 1), app_event("a2", "a", 5)]
    args = [
        "run",
        "--source",
        "-",
        "--sink",
        "-",
        "--dlq",
        f"file:{tmp_path / 'dlq.jsonl'}",
        "--state",
        f"memory:{tmp_path / 'state.snapshot'}",
    ]
    first = run_cli(*args, stdin=b"\n".join(stream) + b"\n")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [stream[0], stream[1]]
    new = [app_event("c1", "c", 6), app_event("a3", "a", 7)]  # a new event, and a genuine duplicate of a1
    second = run_cli(*args, stdin=b"\n".join(stream + new) + b"\n")
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines() == [new[0]]
    assert b"in=5, out=1, duplicates=4, dead_lettered=0" in second.stderr


def test_a_file_read_again_is_replayed_line_by_line_and_a_changed_line_is_new_input(tmp_path):
    # a file has no acknowledged position: every run reads it from the start, and a line with the
    # same bytes at the same place is the same record (a replay: its first verdict again), so a
    # run after a crash loses nothing. Another record at that line is new input.
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    args = [
        "run",
        "--source",
        f"file:{source}",
        "--sink",
        f"file:{out}",
        "--dlq",
        f"file:{tmp_path / 'dlq.jsonl'}",
        "--state",
        f"memory:{tmp_path / 'state.snapshot'}",
        "--no-progress",
    ]
    write_lines(source, [app_event("a1", "a", 0), app_event("b1", "b", 1), app_event("a2", "a", 5)])
    assert main(args) == 0
    assert main(args) == 0  # the same file again: the same verdicts
    emitted = [app_event("a1", "a", 0), app_event("b1", "b", 1)]
    assert out.read_bytes().splitlines() == emitted * 2
    # the file replaced: line 2 now holds another event of key b at the same time (another id)
    write_lines(source, [app_event("a1", "a", 0), app_event("b9", "b", 1)])
    assert main(args) == 0
    assert out.read_bytes().splitlines() == emitted * 2 + [emitted[0]]
    # the same records under another path are new input: duplicates of what was emitted
    (tmp_path / "copy.jsonl").write_bytes(source.read_bytes())
    assert main([*args[:2], f"file:{tmp_path / 'copy.jsonl'}", *args[3:]]) == 0
    assert out.read_bytes().splitlines() == emitted * 2 + [emitted[0]]


def test_every_option_of_every_command_says_what_it_is_for():
    from app import build_parser, options

    every = list(options(build_parser()))
    assert len(every) > 30
    silent = [f"{command} {option.option_strings[-1]}" for command, option in every if not option.help]
    assert silent == []


def _readme_keys(after: str) -> set[str]:
    """The backticked names in the parenthesis that follows ``after`` in README.md."""
    import re

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    listed = text[text.index(after) :].split("(", 1)[1].split(")", 1)[0]
    return set(re.findall(r"`([a-z_]+)`", listed))


def test_the_readme_names_every_key_of_the_summary_and_of_the_expected_counts(tmp_path):
    records, expected = tmp_path / "in.jsonl", tmp_path / "expected.json"
    summary = tmp_path / "summary.json"
    assert main(["generate", "--events", "30", "--out", str(records), "--expected-json", str(expected)]) == 0
    assert (
        main(
            [
                "run",
                "--source",
                f"file:{records}",
                "--sink",
                f"file:{tmp_path / 'out.jsonl'}",
                "--dlq",
                f"file:{tmp_path / 'dlq.jsonl'}",
                "--summary-json",
                str(summary),
                "--no-progress",
            ]
        )
        == 0
    )
    assert _readme_keys("writes the same counts as JSON") == set(json.loads(summary.read_text()))
    assert _readme_keys("report the counts in `expected.json`") == set(json.loads(expected.read_text()))


@pytest.mark.parametrize("bad", [["--source", "file:{tmp}/missing.jsonl"], ["--dlq", "kafka://127.0.0.1:9/dead"]])
def test_a_run_refused_at_start_creates_no_output_file(tmp_path, bad):
    (tmp_path / "in.jsonl").write_text("")
    args = {
        "--source": f"file:{tmp_path}/in.jsonl",
        "--sink": f"file:{tmp_path}/out.jsonl",
        "--dlq": f"file:{tmp_path}/dlq.jsonl",
        "--duplicates": f"file:{tmp_path}/dups.jsonl",
    }
    args[bad[0]] = bad[1].format(tmp=tmp_path)
    assert main(["run", "--no-progress", *(part for pair in args.items() for part in pair)]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_version_prints_the_version_pyproject_declares(capsys):
    import tomllib

    declared = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]["version"]
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"dedup {declared}"
    root = Path(__file__).resolve().parents[2]
    assert f"Version {declared}," in (root / "README.md").read_text()
    assert f"## {declared} " in (root / "CHANGELOG.md").read_text()
