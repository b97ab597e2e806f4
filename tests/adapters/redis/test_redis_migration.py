"""Upgrading a job on a Redis state: the old store as a read-only fallback, and the offline step.

A redis-server of the test's own (``own_redis``): DB 0 holds what the old job wrote (v1
values, WEB keyed by ``uniqueValue``), DB 1 is the new job's state (WEB keyed by
``uniqueValue`` + ``type``).
"""

from __future__ import annotations

import json
import logging

import pytest
import redis
import yaml

from adapters.redis import is_index
from app import main
from domain import Emission, decode, encode, encode_key, encode_v1, encode_v2, version_of

pytestmark = pytest.mark.redis

T = 1_700_000_000
PREFIX = "dedup:"


def state_keys(client) -> list[bytes]:
    """The state keys of a store under the default prefix, without its expiry index."""
    return [k for k in client.keys("*") if not is_index(PREFIX, k)]


def key(rule: str, *values: str) -> str:
    return PREFIX + encode_key(rule, values)


def event(id_, value, type_, t) -> str:
    return json.dumps({"id": id_, "uniqueValue": value, "type": type_, "timestamp": T + t})


@pytest.fixture
def dbs(own_redis):
    """(old URL, new URL, old client, new client)."""
    old_url, new_url = own_redis.url, own_redis.url.rsplit("/", 1)[0] + "/1"
    old, new = redis.Redis.from_url(old_url), redis.Redis.from_url(new_url)
    # what the old job left: v1 values (time, expiry), WEB keyed by uniqueValue only
    old.set(key("WEB", "w"), encode_v1((Emission(T, T + 1200),)), ex=3600)
    old.set(key("WEB", "x"), encode_v1((Emission(T + 10, T + 1210),)), ex=3600)
    old.set(key("APP", "a"), encode_v2((Emission(T, T + 60, "old:0:0"),)), ex=3600)
    yield old_url, new_url, old, new
    old.close()
    new.close()


@pytest.fixture
def v2_config(tmp_path):
    path = tmp_path / "v2.yaml"
    path.write_text(yaml.safe_dump({"rules": {"WEB": {"window": "10m", "key_fields": ["uniqueValue", "type"]}}}))
    return path


def run(tmp_path, config, state, lines, name="run") -> tuple[int, dict, list[str]]:
    source = tmp_path / f"{name}.jsonl"
    source.write_text("".join(line + "\n" for line in lines))
    out, summary = tmp_path / f"{name}-out.jsonl", tmp_path / f"{name}-summary.json"
    code = main(
        [
            "run",
            "--config",
            str(config),
            "--source",
            f"file:{source}",
            "--sink",
            f"file:{out}",
            "--dlq",
            f"file:{tmp_path / f'{name}-dlq.jsonl'}",
            "--state",
            state,
            "--summary-json",
            str(summary),
        ]
    )
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()] if out.exists() else []
    return code, json.loads(summary.read_text()) if summary.exists() else {}, ids


def test_new_job_consults_the_old_store_read_only_until_it_retires(tmp_path, dbs, caplog):
    old_url, new_url, old, new = dbs
    config = tmp_path / "migrating.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "rules": {"WEB": {"window": "10m", "key_fields": ["uniqueValue", "type"]}},
                "migration": {"state_from": old_url, "old_key_fields": {"WEB": ["uniqueValue"]}},
            }
        )
    )
    old_values = {k: old.get(k) for k in old.keys("*")}
    with caplog.at_level(logging.WARNING, logger="domain._migration"):
        code, counts, ids = run(
            tmp_path,
            config,
            new_url,
            [
                event("w2", "w", "WEB", 300),  # dup: the old job emitted w at T (old key layout, v1 value)
                event("a2", "a", "APP", 20),  # dup: the old job emitted a at T (APP key unchanged, v2 value)
                event("n1", "n", "WEB", 300),  # new: emitted, written to the new store in the new layout
                event("x2", "x", "WEB", 700),  # 690 s after x: emitted
                event("z1", "z", "WEB", 5000),  # the watermark passes the migration's start + retention
                event("w3", "w", "WEB", 5001),  # emitted: the old store is retired, no longer consulted
            ],
        )
    assert code == 0
    assert ids == ["n1", "x2", "z1", "w3"]
    assert (counts["in"], counts["out"], counts["duplicates"]) == (6, 4, 2)
    assert any("old state retired for rule WEB" in r.getMessage() for r in caplog.records)
    # new entries are written in the new layout and format only; the old store is untouched
    assert {k.decode() for k in state_keys(new)} == {key("WEB", v, "WEB") for v in ("n", "x", "z", "w")}
    assert all(version_of(new.get(k)) == 3 for k in state_keys(new))
    assert {k: old.get(k) for k in old.keys("*")} == old_values


def test_migrate_dry_run_reports_and_writes_nothing_then_migrates(tmp_path, dbs, v2_config, capsys):
    old_url, new_url, _old, new = dbs
    migrate = [
        "state",
        "migrate",
        "--from",
        old_url,
        "--to",
        new_url,
        "--config",
        str(v2_config),
        "--old-key-fields",
        "WEB=uniqueValue",
    ]
    assert main([*migrate, "--dry-run"]) == 0
    report = capsys.readouterr().out
    assert "would read 3 keys" in report and "v1: 2, v2: 1" in report
    assert "would copy rule WEB's 2 keys as v3 (uniqueValue -> uniqueValue,type)" in report
    assert new.dbsize() == 0

    assert main(migrate) == 0
    assert "wrote 3 keys" in capsys.readouterr().out
    assert [e.time for e in decode(new.get(key("WEB", "w", "WEB")))] == [T]
    assert 0 < new.ttl(key("WEB", "w", "WEB")) <= 3600

    # the new job, on the migrated store alone, still drops the old job's duplicates
    code, counts, ids = run(tmp_path, v2_config, new_url, [event("w2", "w", "WEB", 300), event("n1", "n", "WEB", 5)])
    assert (code, counts["duplicates"], ids) == (0, 1, ["n1"])


def test_a_copied_key_without_a_ttl_expires_in_the_target_as_event_time_passes_it(
    tmp_path, dbs, v2_config, capsys, monkeypatch
):
    old_url, new_url, old, new = dbs
    for name in ("WEB\x1fw", "WEB\x1fx", "APP\x1fa"):
        old.persist(PREFIX + name)  # as the store writes keys now: filed in its index, no TTL
    assert (
        main(
            [
                "state",
                "migrate",
                "--from",
                old_url,
                "--to",
                new_url,
                "--config",
                str(v2_config),
                "--old-key-fields",
                "WEB=uniqueValue",
            ]
        )
        == 0
    )
    assert "wrote 3 keys" in capsys.readouterr().out
    assert new.ttl(key("WEB", "w", "WEB")) == -1
    # a job on the target whose WEB watermark passes T+1210's retention forgets the copied keys: from its
    # second batch on (a batch sweeps up to the watermark it began with; the first began with none)
    monkeypatch.setenv("DEDUP_BATCH_SIZE", "1")
    code, _, ids = run(tmp_path, v2_config, new_url, [event(f"l{i}", f"l{i}", "WEB", 4000) for i in range(3)])
    assert (code, ids) == (0, ["l0", "l1", "l2"])
    assert {k.decode() for k in state_keys(new)} == {key("APP", "a")} | {key("WEB", f"l{i}", "WEB") for i in range(3)}


def test_inspect_reports_the_counts_of_a_redis_store(tmp_path, dbs, capsys):
    old_url, _, _old, _ = dbs
    assert main(["state", "inspect", "--state", old_url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["keys_per_rule"] == {"WEB": 2, "APP": 1}
    assert report["format_versions"] == {"v1": 2, "v2": 1}
    assert (report["oldest_expiry"], report["newest_expiry"]) == (T + 60, T + 1210)
    assert report["size_bytes"] > 0


def test_the_old_state_is_retired_from_its_own_newest_emission_not_the_new_jobs_first_event(tmp_path, own_redis):
    # APP alone (30 s window, 30 s lateness: retention 60 s). The old job emitted u at 1000; the
    # new job's first event is older (990), so counting from it would retire the old state at
    # 1050, while u@1000 is live until 1060: u@1025 (not late at 1050) would pass.
    old_url, new_url = own_redis.url, own_redis.url.rsplit("/", 1)[0] + "/1"
    old = redis.Redis.from_url(old_url)
    old.set(key("APP", "u"), encode((Emission(T + 1000, T + 1060, "old:0:41"),)), ex=3600)
    config = tmp_path / "migrating.yaml"
    config.write_text(yaml.safe_dump({"rules": {"WEB": {"enabled": False}}, "migration": {"state_from": old_url}}))
    code, counts, ids = run(
        tmp_path,
        config,
        new_url,
        [
            event("v", "v", "APP", 990),
            event("w", "w", "APP", 1050),
            event("u", "u", "APP", 1025),  # 25 s after the old job's u: a duplicate
            event("x", "x", "APP", 1060),  # the watermark reaches 1000 + 60: the old state retires
            event("u2", "u", "APP", 1061),  # u@1000 has expired: emitted, from the new store alone
        ],
    )
    assert code == 0
    assert ids == ["v", "w", "x", "u2"]
    assert (counts["duplicates"], counts["dead_lettered"]) == (1, 0)
    old.close()


LEGACY = PREFIX + "APP\x1fa\x1eb"  # what an older version wrote for uniqueValue "a\x1eb"
AMBIGUOUS = PREFIX + "APP\x1fa\x1fb"  # "a\x1fb", or a value "a" and one more field "b": cannot be told


@pytest.mark.parametrize("in_place", [False, True], ids=["into-another-db", "in-place"])
def test_migrate_respells_older_keys_and_leaves_ambiguous_ones_to_expire(tmp_path, own_redis, capsys, in_place):
    old_url = own_redis.url
    new_url = old_url if in_place else old_url.rsplit("/", 1)[0] + "/1"
    old, new = redis.Redis.from_url(old_url), redis.Redis.from_url(new_url)
    for raw in (LEGACY, AMBIGUOUS):
        old.set(raw, encode_v2((Emission(T, T + 60, "old:0:0"),)), ex=3600)
    config = tmp_path / "app.yaml"
    config.write_text(yaml.safe_dump({"rules": {"WEB": {"enabled": False}}}))

    assert main(["state", "migrate", "--from", old_url, "--to", new_url, "--config", str(config)]) == 0
    report = capsys.readouterr().out
    assert "leave rule APP's 1 older-format keys whose values held the separator" in report
    respelled = key("APP", "a\x1eb")
    assert respelled.encode() == b"dedup:APP\x1fa\x1e0b"
    assert version_of(new.get(respelled)) == 3 and 0 < new.ttl(respelled) <= 3600
    assert old.get(AMBIGUOUS) is not None and (in_place or new.get(AMBIGUOUS) is None)  # not moved: it expires
    assert (old.get(LEGACY) is None) is in_place  # in place the old spelling is gone

    # the new job finds the respelled key: the repeat of "a\x1eb" is a duplicate
    code, counts, ids = run(tmp_path, config, new_url, [event("a2", "a\x1eb", "APP", 20), event("b", "b", "APP", 21)])
    assert (code, counts["duplicates"], ids) == (0, 1, ["b"])
    old.close()
    new.close()
