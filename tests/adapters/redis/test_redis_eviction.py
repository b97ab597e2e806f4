"""A Redis that may evict the state is refused at start, unless a setting accepts it.

Any ``maxmemory-policy`` but ``noeviction`` can drop live
state under memory pressure and let duplicates through. Each test has a redis-server of
its own (the policy is the whole server's), set as managed services set it.
"""

from __future__ import annotations

import json
import logging

import pytest
import redis

from adapters.redis import RedisStateStore, refuse_eviction
from app import main
from deploy.local import services
from domain import IncompatibleState
from tests.support.fixtures import running

pytestmark = pytest.mark.redis

EVICTING = [
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
]
EVENTS = [
    {"id": "e1", "uniqueValue": "u", "type": "APP", "timestamp": 1_700_000_000},
    {"id": "e2", "uniqueValue": "u", "type": "APP", "timestamp": 1_700_000_005},
]


@pytest.fixture
def server(tmp_path):
    with running(services.RedisServer(tmp_path / "redis")) as started:
        yield started


def set_policy(url: str, policy: str) -> None:
    client = redis.Redis.from_url(url)
    client.config_set("maxmemory-policy", policy)
    client.close()


def run(tmp_path, state: str) -> int:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    return main(
        [
            "run",
            "--source",
            f"file:{source}",
            "--sink",
            f"file:{tmp_path / 'out.jsonl'}",
            "--dlq",
            f"file:{tmp_path / 'dlq.jsonl'}",
            "--state",
            state,
            "--no-progress",
        ]
    )


def test_volatile_lru_is_refused_with_one_line_naming_the_policy_and_the_setting(tmp_path, server, capsys):
    set_policy(server.url, "volatile-lru")
    assert run(tmp_path, server.url) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "maxmemory-policy volatile-lru" in err and "DEDUP_REDIS__ALLOW_EVICTION=true" in err
    assert not (tmp_path / "out.jsonl").exists()
    assert redis.Redis.from_url(server.url).dbsize() == 0  # refused before anything was written


def test_the_setting_accepts_an_evicting_policy_with_a_loud_warning(tmp_path, server, monkeypatch, caplog):
    set_policy(server.url, "volatile-lru")
    monkeypatch.setenv("DEDUP_REDIS__ALLOW_EVICTION", "true")
    with caplog.at_level(logging.WARNING, logger="adapters.redis._eviction"):
        assert run(tmp_path, server.url) == 0
    assert [json.loads(line)["id"] for line in (tmp_path / "out.jsonl").read_text().splitlines()] == ["e1"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "adapters.redis._eviction"]
    assert len(warnings) == 1 and "DUPLICATES MAY PASS" in warnings[0] and "volatile-lru" in warnings[0]


def test_noeviction_starts_without_a_warning(tmp_path, server, caplog):
    with caplog.at_level(logging.WARNING, logger="adapters.redis._eviction"):
        assert run(tmp_path, server.url) == 0
    assert not [r for r in caplog.records if r.name == "adapters.redis._eviction"]


@pytest.mark.parametrize("policy", EVICTING)
def test_every_policy_that_evicts_keys_with_a_ttl_is_refused(server, policy):
    set_policy(server.url, policy)
    store = RedisStateStore(server.url)
    try:
        with pytest.raises(IncompatibleState, match=f"maxmemory-policy {policy}:"):
            refuse_eviction(store, allowed=False)
        assert refuse_eviction(store, allowed=True) == policy
    finally:
        store.close()


def test_where_config_is_disabled_the_policy_is_read_from_info(tmp_path, capsys):
    # managed services rename or disable CONFIG; INFO memory still tells the policy
    renamed = services.RedisServer(
        tmp_path / "redis", extra_args=["--rename-command", "CONFIG", "", "--maxmemory-policy", "allkeys-lru"]
    )
    with running(renamed) as server:
        with pytest.raises(redis.ResponseError, match="unknown command"):
            redis.Redis.from_url(server.url).config_get("maxmemory-policy")
        assert run(tmp_path, server.url) == 2
    assert "maxmemory-policy allkeys-lru" in capsys.readouterr().err


def test_a_server_that_will_not_tell_its_policy_is_refused(tmp_path, capsys):
    silent = services.RedisServer(
        tmp_path / "redis", extra_args=["--rename-command", "CONFIG", "", "--rename-command", "INFO", ""]
    )
    with running(silent) as server:
        assert run(tmp_path, server.url) == 2
    err = capsys.readouterr().err
    assert "cannot tell whether redis at" in err and "DEDUP_REDIS__ALLOW_EVICTION=true" in err
    assert len(err.strip().splitlines()) == 1


def test_the_old_store_of_an_online_migration_is_checked_too(tmp_path, server, capsys):
    old_url, _new_url = server.url, server.url.rsplit("/", 1)[0] + "/1"
    set_policy(old_url, "volatile-ttl")
    config = tmp_path / "migrating.json"
    config.write_text(json.dumps({"migration": {"state_from": old_url}}))
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(EVENTS[0]) + "\n")
    code = main(
        [
            "run",
            "--config",
            str(config),
            "--source",
            f"file:{source}",
            "--sink",
            f"file:{tmp_path / 'o'}",
            "--dlq",
            f"file:{tmp_path / 'd'}",
            "--state",
            "memory",
            "--no-progress",
        ]
    )
    assert code == 2 and "maxmemory-policy volatile-ttl" in capsys.readouterr().err
