"""Every operator mistake ends in one line on stderr naming the setting or resource, exit 2.

The cases are the ones an operator was seen to hit: wrong policies and restart options,
ports that are not ports, a directory for a snapshot, absurd or not-a-number durations,
misspelt variables and config keys, misspelt URI schemes, a bare path, a metrics port in use.
"""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from tests.app.test_cli import DEDUP, run_cli

MEMORY = ["run", "--engine", "memory", "--source", "-", "--sink", "-"]
KAFKA = ["run", "--engine", "kafka", "--source", "kafka://127.0.0.1:1/in", "--dlq", "kafka://127.0.0.1:1/dead"]


def one_line_error(done, *named: str) -> str:
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("dedup") and "Traceback" not in err
    for name in named:
        assert name in err, (name, err)
    return err


@pytest.mark.parametrize(
    "env, args, named",
    [
        ({"DEDUP_POLICIES__BUG": "retry>dead-letter"}, [], ["policies.bug", "DEDUP_POLICIES__BUG", "attempts"]),
        ({"DEDUP_POLICIES__BUG": "retry(attempts=3,factor=-1)>dead-letter"}, [], ["policies.bug", "factor"]),
        (
            {"DEDUP_POLICIES__TRANSIENT": "retry(attempts=3,delay=nan)>fail"},
            [],
            ["policies.transient", "delay", "finite"],
        ),
        ({"DEDUP_SPARK__RESTART": "exponential-delay(attempts=3,factor=-1)"}, [], ["spark.restart", "factor"]),
        ({"DEDUP_SPARK__RESTART": "fixed-delay(delay=inf)"}, [], ["spark.restart", "delay"]),
        (
            {"DEDUP_SPARK__STATE_PROVIDER": "hdfs-backed"},
            [],
            ["spark.state_provider", "rocksdb", "dedup state migrate"],
        ),
        ({"DEDUP_SPARK__STATE_PROVIDER": "memory"}, [], ["spark.state_provider", "rocksdb"]),
        ({}, ["--state", "redis://:pw@h:notaport/0"], ["setting state", "port"]),
        ({}, ["--state", "redis://:pw@h:99999/0"], ["setting state", "port"]),
        ({}, ["--state", "redis://h:6379/zero"], ["setting state", "database"]),
        ({"DEDUP_RULES__APP__WINDOW": "99999999999999999999d"}, [], ["rules.APP.window", "at most 3650d"]),
        ({"DEDUP_RULES__APP__MAX_AHEAD": "1e999"}, [], ["rules.APP.max_ahead"]),
        ({"DEDUP_IDLE_PARTITION_TIMEOUT": "nan"}, [], ["idle_partition_timeout", "finite"]),
        ({"DEDUP_RULE__APP__WINDOW": "5s"}, [], ["DEDUP_RULE__APP__WINDOW", "did you mean DEDUP_RULES__APP__WINDOW?"]),
        ({"DEDUP_BATCHSIZE": "5"}, [], ["DEDUP_BATCHSIZE", "did you mean DEDUP_BATCH_SIZE?"]),
        ({"DEDUP_KAFKA__DELIVERYY": "exactly-once"}, [], ["did you mean DEDUP_KAFKA__DELIVERY?"]),
        ({"DEDUP_RULES__APP__WINDW": "5"}, [], ["did you mean DEDUP_RULES__APP__WINDOW?"]),
        ({}, ["--sink", "out.jsonl"], ["setting sink", "file:out.jsonl"]),
        ({}, ["--sink", "FILE:out.jsonl"], ["setting sink", "lower case"]),
        ({}, ["--dlq", "kafak://127.0.0.1:1/d"], ["setting dlq", "did you mean kafka://?"]),
        ({}, ["--sink", "kafka://127.0.0.1:1/x"], ["setting sink", "memory engine", "--engine kafka or spark"]),
        ({}, ["--state", "REDIS://127.0.0.1:1/0"], ["setting state", "lower case"]),
        ({}, ["--state", "postgres://x"], ["setting state", "memory"]),
        ({}, ["--sink", "kafka://127.0.0.1:port/x"], ["setting sink", "HOST:PORT"]),
        ({"DEDUP_POLICIES__BUG": "retry(attempts=99999999999999999999)>fail"}, [], ["policies.bug", "attempts"]),
        ({"DEDUP_POLICIES__BUG": "retry(attempts=3,delay=1,max_delay=0.5)>fail"}, [], ["policies.bug", "max_delay"]),
        ({"DEDUP_SPARK__RESTART": "failure-rate(failures=3,interval=0,delay=1)"}, [], ["spark.restart", "interval"]),
        ({"DEDUP_SPARK__TRIGGER": "abc"}, [], ["spark.trigger"]),
        ({"DEDUP_SPARK__SOURCE_TASKS": "0"}, [], ["spark.source_tasks"]),
        ({"DEDUP_MIGRATION__OLD_KEY_FIELDS": '{"APP": []}'}, [], ["migration.old_key_fields.APP"]),
        ({}, ["--source", "file:/nonexistent-dir/in.jsonl"], ["/nonexistent-dir/in.jsonl", "No such file"]),
        ({}, ["--notifications", "file:/"], ["notifications /", "directory"]),
        ({}, ["--bogus"], ["--bogus", "dedup --help"]),
        # issue 31: each of these was a traceback, or a message naming the wrong setting
        ({}, ["--source", "file:missing.jsonl"], ["setting source (DEDUP_SOURCE)", "missing.jsonl"]),
        ({}, ["--source", "file:"], ["setting source", "names nothing after the scheme", "file:PATH"]),
        ({"DEDUP_POLL_TIMEOUT": "inf"}, [], ["poll_timeout"]),
        ({"DEDUP_POLL_TIMEOUT": "1e300"}, [], ["poll_timeout"]),
        ({}, ["--state", "redis://127.0.0.1:1/0?foo=bar"], ["setting state", "no parameter 'foo'"]),
        ({}, ["--state", "redis://127.0.0.1:1/0?ssl_cert_reqs=none"], ["setting state", "'ssl_cert_reqs'"]),
        ({}, ["--summary-json", "/nonexistent-dir/s.json"], ["--summary-json", "/nonexistent-dir"]),
        ({}, ["--summary-json", "/"], ["--summary-json", "is a directory"]),
        ({"DEDUP_METRICS_HOST": "no.such.host.invalid"}, ["--metrics-port", "0"], ["setting metrics_host"]),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(tmp_path, env, args, named):
    one_line_error(run_cli(*MEMORY, "--dlq", f"file:{tmp_path / 'd'}", *args, env=env), *named)


def test_a_snapshot_path_that_is_a_directory_or_in_no_directory_is_refused(tmp_path):
    one_line_error(run_cli(*MEMORY, "--state", f"memory:{tmp_path}"), "setting state", "is a directory")
    one_line_error(
        run_cli(*MEMORY, "--state", f"memory:{tmp_path / 'no' / 's.json'}"), "setting state", "does not exist"
    )


@pytest.mark.parametrize(
    "text, named",
    [
        ("rule:\n  APP:\n    window: 5\n", ["unknown setting rule", "did you mean rules?"]),
        ("rules:\n  APP:\n    windw: 5\n", ["unknown setting rules.APP.windw", "did you mean rules.APP.window?"]),
        ("spark:\n  checkpoin: /x\n", ["did you mean spark.checkpoint?"]),
        ("policies:\n  bug: 'retry>dead-letter'\n", ["policies.bug"]),
        ("rules:\n  APP: {window: 5m}\n  APP: {window: 30s}\n", ["the key 'APP' is given twice"]),
        ("a: &a [x, x, x]\nb: [*a, *a, *a]\n", ["aliases"]),
        ("rules:\n  APP: {window: 30s, key_fields: ['']}\n", ["rules.APP.key_fields", "not empty"]),
    ],
)
def test_a_bad_config_file_key_or_value_is_one_line_naming_it(tmp_path, text, named):
    (tmp_path / "dedup.yaml").write_text(text)
    one_line_error(run_cli(*MEMORY, "--config", str(tmp_path / "dedup.yaml")), *named)


def test_the_kafka_engine_refuses_a_misspelt_uri_as_a_usage_error(tmp_path):
    one_line_error(run_cli(*KAFKA, "--sink", "kafak://127.0.0.1:1/x"), "setting sink", "did you mean kafka://?")
    one_line_error(run_cli(*KAFKA, "--sink", "kafka:/127.0.0.1:1/x"), "setting sink")


def test_a_metrics_port_in_use_is_one_line_naming_the_port(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli(*MEMORY, "--dlq", f"file:{tmp_path / 'd'}", "--metrics-port", str(port))
    one_line_error(done, "metrics_port", f"127.0.0.1:{port}")


def test_a_closed_stdin_is_one_line_naming_the_source(tmp_path):
    done = subprocess.run(
        [*DEDUP, *MEMORY, "--dlq", f"file:{tmp_path / 'd'}"],
        capture_output=True,
        timeout=60,
        preexec_fn=lambda: os.close(0),
    )  # the program starts with no file descriptor 0
    one_line_error(done, "setting source", "stdin is closed")


def test_variables_of_the_test_tools_and_the_config_path_are_not_settings(tmp_path):
    done = run_cli(*MEMORY, "--dlq", f"file:{tmp_path / 'd'}", env={"DEDUP_TEST_ANYTHING": "x"})
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "args, named",
    [
        (["state", "inspect", "--state", "memory:/"], ["no snapshot at /", "directory"]),
        (["state", "inspect"], ["--state"]),
        (["generate", "--out", "/proc/no/such"], ["--out", "/proc/no/such"]),
        (["generate", "--out", "kafak://127.0.0.1:1/t"], ["--out", "did you mean kafka://?"]),
        (["generate", "--events", "-5", "--out", "x.jsonl"], ["--events", "at least 1"]),
        (["generate", "--dup-ratio", "2", "--out", "x.jsonl"], ["--dup-ratio"]),
        (["demo", "--events", "0"], ["--events"]),
    ],
)
def test_a_bad_argument_of_the_other_commands_is_one_line(tmp_path, args, named):
    err = one_line_error(run_cli(*args, cwd=tmp_path), *named)
    assert not list(tmp_path.iterdir()), err  # nothing was written


EVENT = b'{"id":"1","uniqueValue":"u1","type":"APP","timestamp":1700000000}\n'


def test_a_snapshot_in_use_by_another_run_is_refused_before_any_work(tmp_path):
    from adapters.memory import InMemoryStateStore

    snapshot = tmp_path / "state.snapshot"
    running = InMemoryStateStore(snapshot=snapshot)  # another run holds it
    try:
        done = run_cli(*MEMORY, "--state", f"memory:{snapshot}", stdin=EVENT)
        assert "in use by another run" in one_line_error(done, "setting state", str(snapshot))
        assert done.stdout == b""  # nothing judged
    finally:
        running.close()
    assert run_cli(*MEMORY, "--state", f"memory:{snapshot}", stdin=EVENT).returncode == 0  # free again


@pytest.mark.parametrize(
    "content, whole",
    [
        (b"\x1f\x8b\x08\x00gzip", True),
        (b"# streamdedup state snapshot\nAPP%1Fk\tnot a value\n", False),
        (b"# streamdedup state snapshot\nAPP%1Fk\t\xff\xfe\n", True),
        (b'{"foreign": 1}\n', True),
        (b"", True),
    ],
    ids=["gzip", "corrupt value", "not utf-8", "foreign", "empty"],
)
def test_a_snapshot_that_cannot_be_read_is_one_line_to_run_and_to_inspect(tmp_path, content, whole):
    snapshot = tmp_path / "state.snapshot"
    snapshot.write_bytes(content)
    done = run_cli(*MEMORY, "--state", f"memory:{snapshot}", stdin=EVENT)
    assert "cannot be read" in one_line_error(done, "setting state", str(snapshot))
    assert done.stdout == b""
    inspected = run_cli("state", "inspect", "--state", f"memory:{snapshot}")
    if whole:
        assert "cannot be read" in one_line_error(inspected, "setting state")
    else:  # inspection reads what it can and counts the values it cannot
        assert inspected.returncode == 0 and b"unreadable: 1" in inspected.stdout


def test_a_snapshot_where_nothing_can_be_written_is_refused_before_any_work(tmp_path):
    done = run_cli(*MEMORY, "--state", "memory:/proc/streamdedup.snapshot", stdin=EVENT)
    one_line_error(done, "setting state", "cannot write beside the state snapshot")
    assert done.stdout == b""


@pytest.mark.parametrize(
    "args, named",
    [
        (["--sink", "file:{d}/out.jsonl", "--state", "memory:{d}/out.jsonl"], ["setting state", "sink"]),
        (["--sink", "file:{d}/out.jsonl", "--dlq", "file:{d}/./out.jsonl"], ["setting dlq", "sink"]),
        (["--sink", "-", "--dlq", "-"], ["setting dlq", "stdout", "sink"]),
        (["--source", "file:{d}/in.jsonl", "--sink", "file:{d}/in.jsonl"], ["setting sink", "source"]),
        (["--source", "-", "--notifications", "-"], ["setting notifications", "stdin", "source"]),
    ],
    ids=[
        "snapshot is the sink",
        "dead letters are the sink",
        "both on stdout",
        "the sink is the input",
        "both on stdin",
    ],
)
def test_two_settings_naming_one_file_are_refused_before_either_is_touched(tmp_path, args, named):
    (tmp_path / "in.jsonl").write_bytes(EVENT)
    (tmp_path / "out.jsonl").write_bytes(b"kept\n")
    full = ["run", "--engine", "memory", "--source", "-", "--sink", "-", *[a.format(d=tmp_path) for a in args]]
    done = run_cli(*full, stdin=EVENT)
    one_line_error(done, *named)
    assert (tmp_path / "out.jsonl").read_bytes() == b"kept\n" and (tmp_path / "in.jsonl").read_bytes() == EVENT
