"""Redis as the Spark engine's deduplication state (adapters/spark/batch/_redis_judge.py).

JSONL in and out (one file per micro-batch), a redis-server of the test's own; the
verdicts are held to the in-memory reference (tests/support/streams.py).
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

from adapters.redis import RedisStateStore
from adapters.spark import build_spark_engine
from app import StreamSpec, generate
from domain import Claim, Policies, RuleSet
from domain import duplicates as duplicate_codec
from tests.support.streams import reference

pytestmark = [pytest.mark.spark, pytest.mark.redis]


def write_batches(directory: Path, records: list[bytes], size: int) -> int:
    directory.mkdir()
    for n, start in enumerate(range(0, len(records), size)):
        path = directory / f"{n:04d}.jsonl"
        path.write_bytes(b"".join(r + b"\n" for r in records[start : start + size]))
        os.utime(path, (1_000_000 + n, 1_000_000 + n))
    return n + 1


def run(spark, root: Path, redis_url: str, **query) -> dict:
    engine = build_spark_engine(
        RuleSet(),
        Policies(),
        source=f"jsonl:{root / 'in'}?maxFilesPerTrigger=1",
        sink=str(root / "out"),
        dead_letters=str(root / "dlq"),
        checkpoint=str(root / "checkpoint"),
        state=redis_url,
        master="local[2]",
        spark=spark,
        duplicates=str(root / "dups"),
        **query,
    )
    return engine.run(available_now=True).as_dict()


def emitted(root: Path) -> Counter:
    return Counter(
        line.encode()
        for path in sorted((root / "out").glob("batch=*/part-*"))
        for line in path.read_text().splitlines()
        if line
    )


def repeated(root: Path) -> Counter:
    """(each reported duplicate's bytes, the bytes of the record its report names as the first copy)."""
    reports = [
        duplicate_codec.from_document(json.loads(line))
        for path in sorted((root / "dups").glob("batch=*/part-*"))
        for line in path.read_text().splitlines()
        if line
    ]
    lines = {}  # each input file's lines
    for r in reports:
        lines.setdefault(r.first.source, Path(r.first.source.removeprefix("file:")).read_bytes().splitlines())
    return Counter((r.record.value, lines[r.first.source][r.first.offset]) for r in reports)


@pytest.mark.guard  # counts script calls as well as verdicts: one round trip per partition's batch
def test_redis_state_gives_the_reference_verdicts_with_one_script_call_per_partition_batch(spark, tmp_path, own_redis):
    records, expected = generate(StreamSpec(uniques=3000, seed=21))
    batches = write_batches(tmp_path / "in", records, 1100)
    client = redis.Redis.from_url(own_redis.url)
    client.config_resetstat()
    counts = run(spark, tmp_path, own_redis.url)
    want = reference(records)
    assert emitted(tmp_path) == Counter(want.emitted)
    # each duplicate's report names the record whose emission it repeats, as Redis remembered it
    assert repeated(tmp_path) == Counter(want.repeats)
    assert {k: counts[k] for k in expected.as_accounting()} == expected.as_accounting()
    # the check-and-set ran per partition batch (2 partitions x micro-batches, a sweep and the claims each),
    # never per row
    script_calls = int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
    assert 0 < script_calls <= 2 * 2 * 2 * batches < len(records) / 100
    assert client.dbsize() > 2900  # one key per unique event of a ruled type, plus the watermarks


def test_a_replayed_micro_batch_gets_the_same_verdicts(spark, tmp_path, own_redis):
    records, _ = generate(StreamSpec(uniques=1500, seed=22))
    write_batches(tmp_path / "in", records, 800)
    run(spark, tmp_path, own_redis.url)
    # the driver died after the last batch was written and judged, before Spark committed it
    commits = tmp_path / "checkpoint" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    replay = run(spark, tmp_path, own_redis.url)
    assert replay["in"] > 0
    assert emitted(tmp_path) == Counter(reference(records).emitted)


def test_invalid_records_and_late_events_are_dead_lettered(spark, tmp_path, own_redis):
    records, expected = generate(StreamSpec(uniques=400, seed=23, late=3))
    write_batches(tmp_path / "in", records, 300)
    counts = run(spark, tmp_path, own_redis.url)
    letters = [
        json.loads(line)
        for path in sorted((tmp_path / "dlq").glob("batch=*/part-*"))
        for line in path.read_text().splitlines()
        if line
    ]
    assert Counter(d["reason"] for d in letters)["late"] == expected.late == counts["late"]
    assert len(letters) == expected.dead_lettered == counts["dead_lettered"]


def wait_on_redis_clock(client: redis.Redis, seconds: float) -> None:
    """Returns once Redis's clock, the one the sweeps read, is ``seconds`` past the call: every
    reader that claimed before it has been silent that long."""

    def now() -> float:
        whole, micro = client.time()
        return whole + micro / 1e6

    until = now() + seconds
    while now() <= until:
        time.sleep(0.05)


def test_the_jobs_idle_partition_timeout_is_how_long_a_silent_reader_holds_the_sweeps_back(spark, tmp_path, own_redis):
    """The setting reaches the stores the Spark engine's tasks open (RedisBatchJudge ->
    RedisPartitionClaims -> RedisStateStore): another reader's keys, kept until 220, are
    forgotten by the job's sweeps once every partition claimed from (the other reader's, and
    each input file the job read) has been silent for longer than the job's 1 s; by default a
    reader holds them back for 60 s, so they stay.

    Each step is a run of its own, waited apart on Redis's clock: within one run, Spark's
    micro-batches may follow each other by less than the 1 s (one did in CI), and the first
    batch's file, read before any watermark, would rightly hold the sweep back."""
    lagging = RedisStateStore(own_redis.url, key_prefix="dedup:")
    try:
        lagging.check_and_set_many([Claim(f"APP\x1fa{i}", 100, 30, 220, 100, f"t:0:{i}") for i in range(10)])
    finally:
        lagging.close()
    client = redis.Redis.from_url(own_redis.url)

    def kept() -> list[int]:
        return [i for i in range(10) if client.exists(f"dedup:APP\x1fa{i}")]

    assert kept() == list(range(10))
    t0 = 1_700_000_000
    (tmp_path / "in").mkdir()
    outputs = []
    for step, idle_partition_timeout in enumerate([1.0, None, 1.0]):  # None: the job's default
        path = tmp_path / "in" / f"{step:04d}.jsonl"
        path.write_bytes(
            b"".join(
                json.dumps({"id": f"e{n}", "uniqueValue": f"u{n}", "type": "APP", "timestamp": t0 + n}).encode() + b"\n"
                for n in range(20 * step, 20 * step + 20)
            )
        )
        os.utime(path, (1_000_000 + step, 1_000_000 + step))
        timeout = {} if idle_partition_timeout is None else {"idle_partition_timeout": idle_partition_timeout}
        outputs.append(run(spark, tmp_path, own_redis.url, **timeout)["out"])
        if step == 0:
            assert kept() == list(range(10))  # the job's first batch has no watermark to sweep to
        if step == 1:
            assert kept() == list(range(10))  # silent for over 1 s, under the default 60 s: held back
        if step < 2:
            wait_on_redis_clock(client, 1.2)
    assert outputs == [20, 20, 20]
    assert kept() == []
