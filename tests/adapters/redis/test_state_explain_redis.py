"""``dedup state explain`` on a Redis state, as the kafka engine wrote it through a real server."""

from __future__ import annotations

import json
import uuid

import pytest

from adapters.redis import RedisStateStore
from app import main
from domain import Claim, encode_key

pytestmark = pytest.mark.redis

T = 1_700_000_000


def test_explain_reads_a_keys_emissions_from_redis_including_an_expired_one_and_an_invalidated_key(redis_url, capsys):
    value = f"u-{uuid.uuid4().hex[:8]}"
    store = RedisStateStore(redis_url)  # the prefix every engine's Redis state uses by default
    key, gone = encode_key("APP", [value]), encode_key("APP", [value + "-gone"])
    judged = store.check_and_set_many(
        [
            Claim(key, T, 30, T + 60, T, "orders:3:900"),
            Claim(key, T + 45, 30, T + 105, T + 45, "orders:0:12"),
            Claim(key, T + 50, 30, T + 110, T + 45, "orders:1:5"),
            Claim(gone, T, 30, T + 60, T, "orders:0:1"),
        ]
    )
    assert [j.granted for j in judged] == [True, True, False, True]
    assert store.invalidate(gone)
    store.close()

    assert (
        main(
            [
                "state",
                "explain",
                "--state",
                redis_url,
                "--rule",
                "APP",
                "--key",
                f"uniqueValue={value}",
                "--at",
                str(T + 61),
                "--json",
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out)
    assert got["store"].startswith("redis ") and got["at"] == T + 61
    assert [
        (e["time"], e["live"], e["position"]["topic"], e["position"]["partition"], e["position"]["offset"])
        for e in got["emissions"]
    ] == [(T, False, "orders", 3, 900), (T + 45, True, "orders", 0, 12)]
    assert (
        main(
            ["state", "explain", "--state", redis_url, "--rule", "APP", "--key", f"uniqueValue={value}-gone", "--json"]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["emissions"] == []
