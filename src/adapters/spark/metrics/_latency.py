"""The end-to-end latency of unique events (``end_to_end_latency_seconds``, per rule), with no Spark job of its own.

Each record carries ``arrived`` (``stream._sources``: its Kafka record's timestamp; for files
the time of the micro-batch that read them). The plan's ``observe`` (``metrics._listener``),
computed by the executors in the pass that writes the batch, counts the batch's unique
events per rule whose delay ``batch time - arrived`` is at most each bound of the
histogram (``metrics._cells``: cumulative counts ``latency:RULE:I``, plus each rule's total). The batch time
is the micro-batch's own time (``batchTimestampMs``, ``adapters.spark.shared._batch_time``).

The driver gets the counts with the batch's progress and replays them into
``domain._ports.Metrics.observe`` at the middle of each bucket plus the time from the batch's
timestamp to the end of its write (``write_delay``: Spark's phases up to ``addBatch``), so a
histogram with the same bounds gets the same bucket counts as if each event had been timed
when its batch was written, within that batch's spread. Events past the last bound are
observed at the last bound plus that delay. Negative delays (clocks apart) fall in the first bucket.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from adapters.metrics import CATALOG
from adapters.spark.shared import clock_micros, with_clock

LATENCY = "end_to_end_latency_seconds"
BOUNDS: tuple[float, ...] = CATALOG[LATENCY].buckets
PREFIX = "latency:"
DELAY = "_latency_seconds"
TOTAL = "n"
BEFORE_WRITE = ("walCommit", "getBatch", "queryPlanning", "addBatch")  # durationMs from batch time to the write's end


def with_delay(judged: DataFrame) -> DataFrame:
    """``judged`` plus ``DELAY``, the seconds from each row's arrival to the batch's time (an
    observed metric may not call ``current_timestamp()`` itself: it is not deterministic)."""
    return with_clock(judged).withColumn(DELAY, (clock_micros() - F.unix_micros(F.col("arrived"))) / F.lit(1_000_000))


def latency_counts(values: Mapping[str, int]) -> dict[str, list[int]]:
    """Rule → unique events per bucket (``len(BOUNDS) + 1``: the last is past the last bound), from
    an observed row's values; rules without events are left out."""
    cumulative: dict[str, dict[str, int]] = {}
    for column, value in values.items():
        if column.startswith(PREFIX) and value:
            rule, _, index = column[len(PREFIX) :].rpartition(":")
            cumulative.setdefault(rule, {})[index] = int(value)
    counts = {}
    for rule, seen in cumulative.items():
        below = [seen.get(str(i), 0) for i in range(len(BOUNDS))]
        total = seen.get(TOTAL, 0)
        counts[rule] = [b - a for a, b in zip([0, *below], [*below, total])]
    return counts


def write_delay(durations_ms: Mapping[str, int]) -> float:
    """Seconds from a micro-batch's timestamp to the end of its write, from its progress's ``durationMs``."""
    return sum(int(durations_ms.get(phase, 0) or 0) for phase in BEFORE_WRITE) / 1000


def publish_latency(metrics, counts: Mapping[str, list[int]], delay: float) -> None:
    """Each counted event as one observation at its bucket's middle plus ``delay``."""
    middles = [(low + high) / 2 for low, high in zip((0.0, *BOUNDS), BOUNDS)] + [BOUNDS[-1]]
    for rule, per_bucket in counts.items():
        for middle, count in zip(middles, per_bucket):
            for _ in range(count):
                metrics.observe(LATENCY, middle + delay, rule=rule)
