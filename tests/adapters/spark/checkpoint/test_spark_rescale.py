"""Rescaling the state: a checkpoint's state partitions are fixed at its first start; another
number is refused at start (Spark would silently keep the old one), and ``dedup state migrate``
moves the job to any number while keeping its dedup memory."""

from __future__ import annotations

import json
import os
import re

import pytest
import redis

from adapters.spark.checkpoint import Checkpoint, read_manifest
from app import main
from domain import IncompatibleState
from tests.adapters.spark.conftest import FileRun

pytestmark = pytest.mark.spark

T = 1_700_000_000


def event(id_: str, key: str, type_: str, t: int) -> str:
    return json.dumps({"id": id_, "uniqueValue": key, "type": type_, "timestamp": T + t})


def emitted_since(run: FileRun, output: str, seen: set[str]) -> list[str]:
    ids = {
        json.loads(line)["id"]
        for path in (run.dir / output).glob("batch=*/part-*")
        for line in path.read_text().splitlines()
        if line
    }
    return sorted(ids - seen)


def test_a_job_moves_from_2_to_8_state_partitions_with_its_dedup_memory(files, monkeypatch, capsys):
    old, new = str(files.dir / "two"), str(files.dir / "eight")
    first = [event(f"a{i}", f"k{i}", "WEB" if i % 2 else "APP", i % 20) for i in range(40)]
    files.add(*first)
    counts = files.engine(checkpoint=old, shuffle_partitions=2).run(available_now=True).as_dict()
    assert counts["out"] == 40
    assert read_manifest(Checkpoint.at(old).ours).operators["window-dedup"]["partitions"] == 2

    with pytest.raises(IncompatibleState) as refused:
        files.engine(checkpoint=old, shuffle_partitions=8).run(available_now=True)
    message = str(refused.value)
    assert "spark.shuffle_partitions (the state's partitions) changed from 2 to 8" in message
    assert f"dedup state migrate --from spark:{old} --to spark:{old}-migrated" in message

    for name in [k for k in os.environ if k.startswith("DEDUP_")]:
        monkeypatch.delenv(name)
    assert main(["state", "migrate", "--from", f"spark:{old}", "--to", f"spark:{new}"]) == 0
    kept = dict(re.findall(r"keep rule (\w+)'s key \(uniqueValue\): (\d+) live old keys", capsys.readouterr().out))
    assert kept == {"APP": "20", "WEB": "20"}

    # copies of every first-run event (inside their windows) and new events, in one micro-batch
    files.add(
        *[event(f"dup{i}", f"k{i}", "WEB" if i % 2 else "APP", 20 + i % 5) for i in range(40)],
        *[event(f"n{i}", f"new{i}", "APP", 25) for i in range(10)],
    )
    seen = {f"a{i}" for i in range(40)}
    counts = files.engine(checkpoint=new, shuffle_partitions=8).run(available_now=True).as_dict()
    assert emitted_since(files, "out", seen) == sorted(f"n{i}" for i in range(10))
    assert (counts["out"], counts["duplicates"]) == (10, 40)
    assert read_manifest(Checkpoint.at(new).ours).operators["window-dedup"]["partitions"] == 8
    assert Checkpoint.at(new).recorded_conf()["spark.sql.shuffle.partitions"] == "8"
    state = files.dir / "eight" / "state" / "0"
    assert sorted(int(p.name) for p in state.iterdir() if p.name.isdigit()) == list(range(8))


@pytest.mark.redis
def test_with_redis_state_another_number_of_partitions_is_accepted_and_the_memory_kept(files, redis_url):
    """The state is in Redis and the judge partitions each micro-batch itself: nothing to migrate."""
    state = f"{redis_url.rsplit('/', 1)[0]}/7"
    redis.Redis.from_url(state).flushdb()
    files.add(*[event(f"a{i}", f"k{i}", "APP", i % 20) for i in range(20)])
    assert files.engine(shuffle_partitions=2, state=state).run(available_now=True).as_dict()["out"] == 20
    files.add(*[event(f"dup{i}", f"k{i}", "APP", 20 + i % 5) for i in range(20)], event("n1", "new", "APP", 25))
    counts = files.engine(shuffle_partitions=8, state=state).run(available_now=True).as_dict()
    assert (counts["out"], counts["duplicates"]) == (1, 20)
    assert emitted_since(files, "out", {f"a{i}" for i in range(20)}) == ["n1"]
