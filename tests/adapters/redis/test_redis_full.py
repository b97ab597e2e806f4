"""A Redis that reaches ``maxmemory`` under ``noeviction``: a clear refusal, nothing half-applied,
nothing lost, and the sweep of expired keys making room by itself.

Each test has a redis-server of its own (``maxmemory`` is the whole server's).
"""

from __future__ import annotations

import json

import pytest
import redis

from adapters.redis import RedisStateStore
from app import main
from deploy.local import services
from domain import Claim, StateUnavailable
from tests.support.fixtures import running

pytestmark = pytest.mark.redis

T = 1_700_000_000
WINDOW, RETENTION = 30, 60


def claims(prefix: str, count: int, t: int, now: int, source: str = "in") -> list[Claim]:
    """``count`` claims on keys ``prefix0…``, their owners positions of ``source``."""
    return [
        Claim(f"APP\x1f{prefix}{i}", t, WINDOW, t + RETENTION, now, f"{source}:0:{prefix}{i}") for i in range(count)
    ]


@pytest.fixture
def server(tmp_path):
    with running(services.RedisServer(tmp_path / "redis")) as started:
        yield started


@pytest.fixture
def raw(server):
    client = redis.Redis.from_url(server.url)
    yield client
    client.close()


def fill_up(raw, room: int = 1024 * 1024) -> None:
    """Let the server hold what it holds now and ``room`` bytes more (1 MiB: a chunk of claims in
    its buffers, not 20,000 more keys; less than nothing: it is over its limit already)."""
    raw.config_set("maxmemory", int(raw.info("memory")["used_memory"]) + room)


def test_a_full_redis_refuses_claims_it_cannot_hold_and_the_retry_after_room_is_made_loses_nothing(server, raw):
    store = RedisStateStore(server.url)
    assert all(j.granted for j in store.check_and_set_many(claims("old", 20_000, T, T)))
    fill_up(raw)
    more = claims("new", 20_000, T + 1, T)  # nothing has expired: the sweep cannot make room
    with pytest.raises(StateUnavailable, match=r"is full .*maxmemory reached under noeviction"):
        store.check_and_set_many(more)
    applied = store.key_count()
    assert 20_000 <= applied < 40_000  # whole chunks were applied before the refusal, none after
    raw.config_set("maxmemory", 0)
    assert all(j.granted for j in store.check_and_set_many(more))  # replayed claims granted again, by owner
    assert store.key_count() == 40_000
    assert not any(j.granted for j in store.check_and_set_many(claims("new", 20_000, T + 2, T, source="again")))
    store.close()


def test_on_a_full_redis_the_sweep_of_expired_keys_makes_room_for_the_batch(server, raw):
    store = RedisStateStore(server.url)
    store.check_and_set_many(claims("old", 40_000, T, T))
    fill_up(raw, room=-256 * 1024)
    with pytest.raises(StateUnavailable, match="is full"):
        store.check_and_set_many(claims("new", 100, T + 1, T))  # nothing due: no room made
    later = T + 10 * RETENTION  # every old key's retention has passed: the sweeps' budget, 2 per claim, takes them all
    assert all(j.granted for j in store.check_and_set_many(claims("new", 20_000, later, later)))
    assert store.key_count() == 20_000
    store.close()


def test_the_job_stops_on_a_full_redis_with_one_line_that_says_so(tmp_path, server, raw, monkeypatch, capsys):
    source = tmp_path / "in.jsonl"
    source.write_text(
        "".join(
            json.dumps({"id": f"e{i}", "uniqueValue": f"u{i}", "type": "APP", "timestamp": T}) + "\n"
            for i in range(5000)
        )
    )
    raw.config_set("maxmemory", int(raw.info("memory")["used_memory"]) + 1024)
    monkeypatch.setenv("DEDUP_POLICIES__TRANSIENT", "retry(attempts=2,delay=0.1)>fail")
    code = main(
        [
            "run",
            "--source",
            f"file:{source}",
            "--sink",
            f"file:{tmp_path / 'out.jsonl'}",
            "--dlq",
            f"file:{tmp_path / 'dlq.jsonl'}",
            "--state",
            server.url,
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert code != 0
    assert "is full (maxmemory reached under noeviction)" in err and "password" not in err
    assert not (tmp_path / "dlq.jsonl").exists() or (tmp_path / "dlq.jsonl").read_text() == ""
