"""The hostile table (tests/support/hostile.py) through all three engines and both state stores.

Each engine runs as ``dedup run`` does: the memory engine from a JSONL file, the kafka and
Spark engines from a three-partition topic keyed by ``uniqueValue``. None may crash; each
must emit exactly the honest records the domain core emits, dead-letter every bad record
once with its original bytes and reason, and balance its accounting.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from adapters.spark.runtime import connector_jars
from domain import dead_letters
from tests.support.hostile import ENV, ON_TIME_BUDGET, expected, hostile
from tests.support.kafka_io import create_topics, read_topic, unique
from tests.support.partitioned import produce_keyed, spread

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.redis]
PARTITIONS = 3


def run_memory(dedup, tmp_path, table, env) -> tuple[list[bytes], list]:
    source, out, dlq = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "dead.jsonl"
    source.write_bytes(b"".join(value + b"\n" for value, _ in table))
    dedup("--engine", "memory", "--source", f"file:{source}", "--sink", f"file:{out}", "--dlq", f"file:{dlq}", **env)
    letters = [dead_letters.from_document(json.loads(line)) for line in dlq.read_bytes().splitlines()]
    return out.read_bytes().splitlines(), letters


def run_on_kafka(dedup, bootstrap: str, engine: str, source_options: str, table, env) -> tuple[list[bytes], list]:
    topics = {role: unique(f"hostile-{engine}-{role}") for role in ("in", "out", "dlq")}
    produce_keyed(bootstrap, topics["in"], spread([value for value, _ in table], PARTITIONS))
    create_topics(bootstrap, topics["out"], topics["dlq"])
    uri = {role: f"kafka://{bootstrap}/{topic}" for role, topic in topics.items()}
    dedup("--engine", engine, "--source", uri["in"] + source_options, "--sink", uri["out"], "--dlq", uri["dlq"], **env)
    letters = [dead_letters.from_headers(m.value, m.key, m.raw_headers) for m in read_topic(bootstrap, topics["dlq"])]
    return [m.value for m in read_topic(bootstrap, topics["out"])], letters


@pytest.mark.parametrize("state", ["own", "redis"])  # own: the engine's default (in memory, or the checkpoint)
@pytest.mark.parametrize("engine", ["memory", "kafka", "spark"])
def test_no_hostile_record_stops_blinds_or_lets_a_duplicate_through(
    dedup, kafka_bootstrap, redis_url, tmp_path, engine, state
):
    if engine == "spark" and not connector_jars():
        pytest.skip("Spark's Kafka connector jars are not in .cache/jars/spark-kafka (scripts/bootstrap --services)")
    database = {"memory": 11, "kafka": 12, "spark": 13}[engine]  # each run its own, empty Redis database
    env = {**ENV} if state == "own" else {**ENV, "DEDUP_STATE": f"{redis_url.rsplit('/', 1)[0]}/{database}"}
    started, table = time.time(), hostile()
    if engine == "memory":
        emitted, letters = run_memory(dedup, tmp_path, table, env)
    elif engine == "kafka":
        emitted, letters = run_on_kafka(dedup, kafka_bootstrap, "kafka", "?group=hostile&stop_at_end=true", table, env)
    else:
        env |= {"DEDUP_SPARK__AVAILABLE_NOW": "true", "DEDUP_SPARK__CHECKPOINT": str(tmp_path / "checkpoint")}
        emitted, letters = run_on_kafka(dedup, kafka_bootstrap, "spark", "", table, env)

    assert time.time() - started < ON_TIME_BUDGET, "too slow to judge the clock-dated rows as on time"
    want_emitted, want_dead = expected(table)
    assert Counter(emitted) == Counter(value.rstrip(b"\r") if engine == "memory" else value for value in want_emitted)
    assert Counter(d.record.value for d in letters) == Counter(want_dead.keys())
    assert {d.record.value: d.reason for d in letters} == want_dead
