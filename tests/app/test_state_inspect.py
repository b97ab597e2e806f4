"""Saved in-memory snapshots and `dedup state inspect` on them."""

import json

from adapters.memory import SNAPSHOT_HEADER, InMemoryStateStore
from app import main
from domain import encode_key


def events(kind, count, start=1_700_000_000):
    return [
        json.dumps({"id": f"{kind}{i}", "uniqueValue": f"{kind}-{i}", "type": kind, "timestamp": start + i}).encode()
        for i in range(count)
    ]


def test_inspect_counts_what_a_run_wrote(tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(events("APP", 5) + events("WEB", 3) + events("APP", 2)))
    snapshot = tmp_path / "state.snapshot"
    assert (
        main(
            [
                "run",
                "--source",
                f"file:{source}",
                "--sink",
                f"file:{tmp_path / 'o'}",
                "--dlq",
                f"file:{tmp_path / 'd'}",
                "--state",
                f"memory:{snapshot}",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["state", "inspect", "--state", f"memory:{snapshot}", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["keys_per_rule"] == {"APP": 5, "WEB": 3}
    assert report["format_versions"] == {"v3": 8}
    assert report["oldest_expiry"] == 1_700_000_000 + 60
    assert report["newest_expiry"] == 1_700_000_002 + 1200
    assert report["size_bytes"] == snapshot.stat().st_size


def test_snapshot_keeps_dedup_memory_across_runs_and_reads_v1_values(tmp_path):
    snapshot = tmp_path / "state.snapshot"
    snapshot.write_text(SNAPSHOT_HEADER + "APP%1Fold\t1|1700000000,1700000060\n")
    store = InMemoryStateStore(snapshot)
    assert [e.time for e in store.entries("APP\x1fold", now=1_700_000_010)] == [1_700_000_000]
    store.close()
    assert "APP%1Fold\t3|1700000000,1700000060," in snapshot.read_text()


def test_an_older_snapshot_is_read_with_its_keys_in_the_current_spelling(tmp_path, capsys):
    snapshot = tmp_path / "state.snapshot"
    snapshot.write_text(
        SNAPSHOT_HEADER + "APP%1Fa%1Eb\t2|1700000000,1700000060,\n"  # a legacy key holding \x1e
        "APP%1Fa%1E0\t2|1700000000,1700000060,\n"
    )  # legacy "a\x1e0"
    store = InMemoryStateStore(snapshot)
    now = 1_700_000_010
    assert len(store.entries(encode_key("APP", ["a\x1eb"]), now)) == 1
    assert len(store.entries(encode_key("APP", ["a\x1e0"]), now)) == 1
    assert store.entries(encode_key("APP", ["a\x1e"]), now) == ()  # spelled "a\x1e0" now: not the legacy key's
    store.close()
    assert main(["state", "inspect", "--state", f"memory:{snapshot}", "--json"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)["samples"]["APP"]) == ["a\x1e0", "a\x1eb"]
