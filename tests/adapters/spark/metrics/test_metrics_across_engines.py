"""The same stream through the memory, kafka and Spark engines gives the same metric series.

Each engine is built by the composition root as ``dedup run`` builds it, with its
``PrometheusMetrics``, and runs bounded: the memory engine over a JSONL file, the kafka and
Spark engines over a topic of three partitions keyed by ``uniqueValue``. Every ``dedup_*``
counter series (name and labels: per rule, per dead-letter reason) must hold the same value
in the three expositions, but for the Spark engine's own (its checkpoint writes, its failed
micro-batches), and the totals must be the generator's expected counts. The Spark engine's
checkpoint figures are checked against the files its state store wrote.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.metrics import CATALOG
from app import StreamSpec, container_for, generate, load_settings
from tests.support.kafka_io import create_topics, unique
from tests.support.partitioned import produce_keyed, spread

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
SPEC = StreamSpec(uniques=400, seed=11)
# the Spark engine's own counters (its checkpoint, its failed micro-batches), at 0 in the others
SPARK_OWN = {m.exported for m in CATALOG.values() if m.kind == "counter" and m.help.endswith("(spark engine)")}


def counters(metrics) -> dict[tuple[str, tuple], float]:
    """Every ``dedup_*`` counter, watermark and Kafka lag series of the exposition."""
    text = metrics.exposition().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if (s.name.startswith("dedup_") and s.name.endswith(("_total", "watermark_seconds")))
        or s.name == "dedup_kafka_lag"
    }


def run(**settings) -> dict[tuple[str, tuple], float]:
    container = container_for(load_settings(**settings))
    try:
        container.engine().run()
        return counters(container.metrics())
    finally:
        if settings["engine"] != "spark":  # the Spark engine's state is its checkpoint
            container.state_store().close()


def test_every_engine_exports_the_same_labelled_counts(kafka_bootstrap, tmp_path, monkeypatch):
    records, expected = generate(SPEC)
    (tmp_path / "in.jsonl").write_bytes(b"".join(r + b"\n" for r in records))
    memory = run(
        engine="memory",
        source=f"file:{tmp_path / 'in.jsonl'}",
        sink=f"file:{tmp_path / 'out.jsonl'}",
        dlq=f"file:{tmp_path / 'dlq.jsonl'}",
    )

    topics = {role: unique(f"metrics-{role}") for role in ("in", "k-out", "k-dlq", "s-out", "s-dlq")}
    produce_keyed(kafka_bootstrap, topics["in"], spread(records, 3))
    create_topics(kafka_bootstrap, *(topics[r] for r in ("k-out", "k-dlq", "s-out", "s-dlq")))
    broker = f"kafka://{kafka_bootstrap}"
    kafka = run(
        engine="kafka",
        source=f"{broker}/{topics['in']}?group=metrics&stop_at_end=true",
        sink=f"{broker}/{topics['k-out']}",
        dlq=f"{broker}/{topics['k-dlq']}",
    )
    monkeypatch.setenv("DEDUP_SPARK__CHECKPOINT", str(tmp_path / "checkpoint"))
    monkeypatch.setenv("DEDUP_SPARK__AVAILABLE_NOW", "true")
    monkeypatch.setenv("DEDUP_SPARK__LOG_FILE", str(tmp_path / "spark.log"))
    spark = run(
        engine="spark",
        source=f"{broker}/{topics['in']}",
        sink=f"{broker}/{topics['s-out']}",
        dlq=f"{broker}/{topics['s-dlq']}",
    )

    totals = {name.removeprefix("dedup_").removesuffix("_total"): 0.0 for name, _ in memory}
    for (name, _), value in memory.items():
        totals[name.removeprefix("dedup_").removesuffix("_total")] += value
    assert {k: int(totals[k]) for k in ("out", "duplicates", "dead_lettered", "late", "invalid")} == {
        "out": expected.out,
        "duplicates": expected.duplicates,
        "dead_lettered": expected.dead_lettered,
        "late": expected.late,
        "invalid": expected.invalid,
    }
    assert memory[("dedup_duplicates_total", (("rule", "APP"),))] > 0
    assert memory[("dedup_dead_lettered_total", (("reason", "late"),))] == expected.late
    assert memory[("dedup_out_total", (("rule", "none"),))] == expected.passed_through
    assert not [series for series in memory if ("rule", "unknown") in series[1] or ("reason", "unknown") in series[1]]
    # a file is one partition, a topic three: the watermarks (minimum over partitions) are the topic's
    marks = {series: value for series, value in kafka.items() if series[0] == "dedup_watermark_seconds"}
    assert sorted(labels for _, labels in marks) == [(("rule", "APP"),), (("rule", "WEB"),)]
    assert marks == {series: spark[series] for series in marks}
    # the kafka and Spark engines read the topic to its end: each of its partitions is 0 behind
    lags = {series: value for series, value in kafka.items() if series[0] == "dedup_kafka_lag"}
    assert lags == {("dedup_kafka_lag", (("partition", str(p)), ("topic", topics["in"]))): 0.0 for p in range(3)}
    assert lags == {series: value for series, value in spark.items() if series[0] == "dedup_kafka_lag"}
    memory.update(lags)
    own = {series for series in memory if series[0] in SPARK_OWN}
    assert {series: (memory[series], kafka[series]) for series in own} == dict.fromkeys(own, (0, 0))
    assert spark[("dedup_checkpoint_bytes_written_total", ())] > 0
    differing = {
        series: (memory[series], kafka.get(series), spark.get(series))
        for series in memory
        if series not in {*marks, *own} and not memory[series] == kafka.get(series) == spark.get(series)
    }
    assert differing == {}
    assert set(memory) == set(kafka) == set(spark)


def test_the_spark_engine_reports_checkpoint_health_and_counts_failed_batches(tmp_path, monkeypatch):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "0.jsonl").write_bytes(generate(StreamSpec(uniques=50))[0][0] + b"\n")
    for name, value in {
        "CHECKPOINT": tmp_path / "checkpoint",
        "LOG_FILE": tmp_path / "spark.log",
        "RESTART": "fixed-delay(attempts=1,delay=0)",
    }.items():
        monkeypatch.setenv(f"DEDUP_SPARK__{name}", str(value))
    monkeypatch.setenv("DEDUP_POLICIES__TRANSIENT", "retry(attempts=1,backoff=fixed,delay=0)>fail")
    healthy = container_for(
        load_settings(
            engine="spark",
            source=f"file:{tmp_path / 'in'}",
            sink=f"file:{tmp_path / 'out'}",
            dlq=f"file:{tmp_path / 'dlq'}",
        )
    )
    healthy.engine().run()
    values = unlabelled(healthy.metrics())
    assert values["dedup_checkpoint_commit_seconds"] > 0 and values["dedup_failed_batches_total"] == 0
    assert values["dedup_batch_duration_seconds_count"] == 1 and values["dedup_state_rows"] == 1

    (tmp_path / "blocker").write_text("a file where the sink's directory should be")
    monkeypatch.setenv("DEDUP_SPARK__CHECKPOINT", str(tmp_path / "checkpoint-2"))
    failing = container_for(
        load_settings(
            engine="spark",
            source=f"file:{tmp_path / 'in'}",
            sink=f"file:{tmp_path / 'blocker' / 'out'}",
            dlq=f"file:{tmp_path / 'dlq2'}",
        )
    )
    with pytest.raises(Exception, match="restart strategy"):
        failing.engine().run()
    text = failing.metrics().exposition().decode()
    assert "dedup_failed_batches_total 2.0" in text


def unlabelled(metrics) -> dict[str, float]:
    """Sample name -> value of an exposition's series without labels."""
    text = metrics.exposition().decode()
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples if not s.labels}


def state_files(checkpoint) -> dict[str, int]:
    """Path -> bytes of every file under ``checkpoint/state`` but Hadoop's hidden checksums."""
    return {
        str(p): p.stat().st_size
        for p in (checkpoint / "state").rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


def test_the_spark_engine_counts_what_its_batches_write_to_the_checkpoint_and_the_restore_after_a_restart(
    tmp_path, monkeypatch
):
    parts = [b"".join(r + b"\n" for r in generate(StreamSpec(uniques=300, seed=5))[0][part::5]) for part in range(5)]
    checkpoint = tmp_path / "checkpoint"
    monkeypatch.setenv("DEDUP_SPARK__CHECKPOINT", str(checkpoint))
    monkeypatch.setenv("DEDUP_SPARK__LOG_FILE", str(tmp_path / "spark.log"))

    def run(*new_parts: int) -> dict[str, float]:
        """The engine over the input with ``new_parts`` added, one file (one micro-batch) each."""
        (tmp_path / "in").mkdir(exist_ok=True)
        for part in new_parts:
            (tmp_path / "in" / f"{part}.jsonl").write_bytes(parts[part])
            os.utime(tmp_path / "in" / f"{part}.jsonl", (1_000_000 + part, 1_000_000 + part))
        container = container_for(
            load_settings(
                engine="spark",
                source=f"file:{tmp_path / 'in'}?maxFilesPerTrigger=1",
                sink=f"file:{tmp_path / 'out'}",
                dlq=f"file:{tmp_path / 'dlq'}",
            )
        )
        container.engine().run()
        return unlabelled(container.metrics())

    # 1. a new checkpoint, 3 micro-batches: changelog checkpointing writes a changelog per state
    # partition and batch, and (transformWithState's column families) a snapshot of version 1
    # only: all are counted
    first = run(0, 1, 2)
    after_first = state_files(checkpoint)
    assert [p for p in after_first if p.endswith(".changelog")]
    assert {Path(p).name for p in after_first if ".zip" in p} <= {"1.zip"}
    assert first["dedup_checkpoint_bytes_written_total"] == sum(after_first.values()) > 0
    assert first["dedup_state_bytes"] == sum(after_first.values())
    assert first["dedup_state_load_seconds"] == 0  # nothing to restore
    assert first["dedup_batch_duration_seconds_count"] == 3

    # 2. a restart on that checkpoint, 2 more micro-batches: it restores the state, writes only new files
    second = run(3, 4)
    after_second = state_files(checkpoint)
    new = {path: size for path, size in after_second.items() if path not in after_first}
    assert second["dedup_batch_duration_seconds_count"] == 2
    assert len([p for p in new if p.endswith(".changelog")]) == 2 * 2  # 2 batches x 2 partitions
    assert len(new) <= 2 * 2 + 1  # and the operator's metadata of the new run (transformWithState's v2)
    assert second["dedup_checkpoint_bytes_written_total"] == sum(new.values()) > 0
    assert second["dedup_state_bytes"] == sum(after_second.values())
    assert second["dedup_state_load_seconds"] > 0
    print(
        f"\nfirst run: {first['dedup_checkpoint_bytes_written_total']:.0f} bytes written in 3 batches, "
        f"state {first['dedup_state_bytes']:.0f} bytes; restart: {second['dedup_checkpoint_bytes_written_total']:.0f}"
        f" bytes in 2 batches, state {second['dedup_state_bytes']:.0f} bytes, "
        f"restored in {second['dedup_state_load_seconds']:.3f} s"
    )
