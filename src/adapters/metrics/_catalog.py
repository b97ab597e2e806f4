"""Every metric the service exports: its name in the engines, Prometheus name, type, labels, help.

The engines report through ``domain._ports.Metrics`` with the accounting's names
(``Accounting.as_dict``) and their figures; this table is the one place that says how each is
exported. The site's metric reference (docs/reference/metrics.md) is generated from it
(``app._reference.metrics_reference``).
"""

from __future__ import annotations

from dataclasses import dataclass

from domain import LABEL_OF


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # counter, gauge or histogram
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()  # a histogram's upper bounds (seconds)

    @property
    def exported(self) -> str:
        """The Prometheus name: ``dedup_<name>`` (``in`` is ``records_in``), counters end in ``_total``."""
        base = f"dedup_{'records_in' if self.name == 'in' else self.name}"
        return f"{base}_total" if self.kind == "counter" else base


BATCH_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
LATENCY_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2.5, 5, 10, 30, 60)


def _counter(name: str, text: str) -> Metric:
    return Metric(name, "counter", text, (LABEL_OF[name],) if name in LABEL_OF else ())


CATALOG = {
    m.name: m
    for m in (
        _counter("in", "Records read from the input"),
        _counter("out", "Unique events written to the output, per rule (none: a type without a rule, passed through)"),
        _counter("duplicates", "Duplicates dropped, per rule"),
        _counter("dead_lettered", "Records sent to the dead-letter output, per reason"),
        _counter("skipped", "Records dropped by a skip policy"),
        _counter("late", "Records older than their partition's time minus the allowed lateness, per rule"),
        _counter("invalid", "Records that are not valid events"),
        _counter("passed_through", "Events of a type without a rule, passed through"),
        _counter("invalidations", "INVALIDATE notifications applied"),
        _counter(
            "rejected_notifications",
            "Invalid notifications: dead-lettered with reason bad_notification or an "
            "event code (Kafka), or logged (a file); not input records, so outside the accounting's balance",
        ),
        Metric(
            "batch_duration_seconds",
            "histogram",
            "Duration of a poll batch (memory, kafka) or micro-batch (spark)",
            buckets=BATCH_SECONDS,
        ),
        Metric(
            "end_to_end_latency_seconds",
            "histogram",
            "Time from a unique event's arrival on the input (its Kafka "
            "record's timestamp; for files the time it was read) to its write to the output, per rule",
            ("rule",),
            LATENCY_SECONDS,
        ),
        Metric(
            "latency_objective_seconds",
            "gauge",
            "The setting latency_objective: the p99 end-to-end latency above "
            "which the DedupLatencyAboveObjective alert fires",
        ),
        Metric(
            "watermark_seconds",
            "gauge",
            "The rule's watermark: event time (epoch seconds) every partition has reached",
            ("rule",),
        ),
        Metric(
            "event_time_lag_seconds",
            "gauge",
            "How far the rule's watermark is behind the newest event time seen",
            ("rule",),
        ),
        Metric("state_rows", "gauge", "Keys in the dedup state (spark engine)"),
        Metric(
            "state_keys_removed",
            "counter",
            "Keys the operator removed from the dedup state: their emissions expired "
            "(or an invalidation emptied them) (spark engine)",
        ),
        Metric("state_bytes", "gauge", "Bytes of the dedup state's files in the checkpoint (spark engine)"),
        Metric(
            "checkpoint_commit_seconds",
            "gauge",
            "Time the last micro-batch took to commit its offsets and state to the checkpoint (spark engine)",
        ),
        Metric(
            "state_load_seconds",
            "gauge",
            "State restore time after a restart on a checkpoint: the execution of the "
            "first micro-batch, whose tasks load the state before judging (spark engine)",
        ),
        Metric(
            "checkpoint_bytes_written",
            "counter",
            "Bytes micro-batches wrote to the checkpoint's state: changelogs "
            "or deltas, snapshots and their files (spark engine)",
        ),
        Metric(
            "failed_batches",
            "counter",
            "Micro-batches whose query failed and was handed to the restart strategy (spark engine)",
        ),
        Metric("batch_duration_ms", "gauge", "Duration of the last micro-batch in milliseconds (spark engine)"),
        Metric("input_rows_per_second", "gauge", "Input rate of the last micro-batch (spark engine)"),
        Metric("processed_rows_per_second", "gauge", "Processing rate of the last micro-batch (spark engine)"),
        Metric(
            "kafka_lag",
            "gauge",
            "Records the input partition is behind its end offset (kafka and spark engines)",
            ("topic", "partition"),
        ),
    )
}
