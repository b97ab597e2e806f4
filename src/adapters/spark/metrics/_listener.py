"""Metrics from Spark's ``StreamingQueryListener``: accounting counts and progress gauges.

The plan's output carries an ``observe`` named ``accounting`` (``accounting_metrics``);
Spark reports it in each micro-batch's progress event, and ``ProgressListener`` adds it
to an ``Accounting`` and records gauges (state rows, batch duration, rates, Kafka lag,
checkpoint commit and state load times) in any ``domain._ports.Metrics``; the state's bytes and
what each micro-batch wrote to the checkpoint come from its files (``state_files``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from adapters.spark.metrics._cells import CELL, CellLayout
from adapters.spark.metrics._events import JsonEventListener
from adapters.spark.metrics._latency import BOUNDS, DELAY, latency_counts, publish_latency, with_delay, write_delay
from adapters.spark.stream import NOTIFICATION, REJECTED_NOTIFICATION
from domain import BUCKET_OF, Accounting

log = logging.getLogger(__name__)
OBSERVATION = "accounting"
COUNTED = tuple(Accounting().as_dict())


def is_input() -> Column:
    """A judged row counts as an input record (``in``) unless it is a notification."""
    return ~F.col("verdict").isin(NOTIFICATION, REJECTED_NOTIFICATION)


def bucket_of() -> Column:
    """The bucket of ``domain._dedup.BUCKET_OF`` a judged row's verdict counts in (null: none)."""
    verdict, bucket = F.col("verdict"), F.lit(None).cast("string")
    for v, name in BUCKET_OF.items():
        bucket = F.when(verdict == v.value, name).otherwise(bucket)
    return bucket


def accounting_layout(rules: Iterable[str] = ()) -> CellLayout:
    """The cells of judged rows under the ``rules``' names (``metrics._cells``): counts in
    ``Accounting.as_dict``'s names, each rule's breakdown (``name@label``: out, duplicates and
    late per rule, ``NO_RULE`` for passed through; dead letters per reason) and the unique
    events' latency buckets (``metrics._latency``)."""
    return CellLayout.of(rules, BOUNDS)


def accounting_metrics(judged: DataFrame, rules: Iterable[str] = ()) -> DataFrame:
    """``judged`` with its cells observed under ``OBSERVATION`` (``accounting_layout``)."""
    layout = accounting_layout(rules)
    return with_cells(judged, layout).observe(OBSERVATION, layout.column(F.col(CELL))).drop(DELAY, CELL)


def with_cells(judged: DataFrame, layout: CellLayout) -> DataFrame:
    """``judged`` plus each row's cell (``CELL``) and its delay (``metrics._latency.DELAY``)."""
    return with_delay(judged).withColumn(CELL, layout.cell(F.col(DELAY)))


def accounting_of(judged: DataFrame, rules: Iterable[str] = ()) -> Accounting:
    """The counts of a static (micro-batch) DataFrame of judged rows."""
    return counted(judged, rules)[0]


def counted(judged: DataFrame, rules: Iterable[str] = ()) -> tuple[Accounting, dict[str, list[int]]]:
    """The counts and the latency buckets (``metrics._latency``) of a static DataFrame of judged rows, in one job."""
    layout = accounting_layout(rules)
    values = layout.counts(with_cells(judged, layout).agg(layout.column(F.col(CELL))).first())
    return accounting_from(values), latency_counts(values)


def accounting_from(values: Mapping[str, int]) -> Accounting:
    """An ``Accounting`` of named counts (``accounting_layout``'s)."""
    counts: dict[str, Any] = {name: int(values.get(name) or 0) for name in COUNTED}  # Accounting's int fields
    accounting = Accounting(records_in=counts.pop("in"), **counts)
    for column, value in values.items():
        name, _, label = column.partition("@")
        if label and value:
            accounting.detail[name, label] += int(value)
    return accounting


class ProgressListener(JsonEventListener):
    """Adds each progress event of query ``query_id`` to ``totals``; thread-safe to read.

    Listener calls arrive asynchronously on Spark's listener bus, in the order Spark posted
    them; a run's termination comes after its last progress, so ``wait_for_end(run_id)``
    returns once every micro-batch that run completed has been added (not the batch id of
    ``query.lastProgress``: an idle query's last progress names the next batch, which never
    ran, and waiting for it held every stop of an idle query for 30 s). ``on_batch(totals)``
    is called after every progress and idle event of the query (a sign of life even with no input).
    The ``state_rows`` gauge comes from the operator's own count of its keys (``state_rows``, a
    ``_state_rows.StateRowGauge``); without one, from the state store's count of its rows when it
    keeps one (``state_rows_tracked``: False when RocksDB does not count them,
    ``trackTotalNumberOfRows=false``, the engine's default, and Spark reports 0), or it is left
    out. (RocksDB's count also holds the rows of the operator's expiry queues, which are not
    keys.) After each micro-batch the
    figure is kept in the checkpoint through ``state_rows.record``. ``state_files``: the
    checkpoint's ``_state_files.StateFiles``, looked at after each micro-batch with a stateful
    operator (the ``state_bytes`` gauge and the ``checkpoint_bytes_written`` counter; neither
    without it). The ``state_keys_removed`` counter: the keys the operator removed, from its own count.
    """

    def __init__(
        self,
        metrics=None,
        on_batch: Callable[[Accounting], None] | None = None,
        state_rows_tracked: bool = True,
        state_rows=None,
        state_files=None,
        rules: Iterable[str] = (),
    ):
        self.layout = accounting_layout(rules)
        self.on_batch = on_batch
        self.state_rows_tracked = state_rows_tracked
        self.state_rows = state_rows
        self.state_files = state_files
        self.query_id: str | None = None
        self.totals = Accounting()
        self.gauges: dict[str, float] = {}
        self.batch_durations_ms: list[int] = []
        self._ended: set[str] = set()  # runIds whose termination arrived
        self._started: set[str] = set()  # runIds whose first micro-batch with state has been seen
        self._recounted: dict[int, tuple[Accounting, dict[str, list[int]]]] = {}
        self._removed = 0  # the operator's count of removed keys at the last micro-batch
        self._metrics = metrics
        self._changed = threading.Condition()

    def onQueryStarted(self, event):
        pass

    def onQueryIdle(self, event):
        if self._ours(event.id):
            self._notify()

    def onQueryTerminated(self, event):
        with self._changed:
            self._ended.add(str(event.runId))
            self._changed.notify_all()

    def onQueryProgress(self, event):
        progress = event.progress
        if not self._ours(progress.id):
            return
        gauges = _gauges(progress, self.state_rows_tracked, self.state_rows)
        written = self._look_at_state(progress, gauges)
        removed = 0
        if self.state_rows is not None and progress.stateOperators:  # kept before wait_for() sees the batch
            self.state_rows.record(int(gauges["state_rows"]) if "state_rows" in gauges else None)
            total_removed = self.state_rows.removed()  # read once: the next batch's tasks may be counting already
            removed, self._removed = total_removed - self._removed, total_removed
        with self._changed:
            counts, latency = self._recounted.pop(progress.batchId, (None, None))
            if counts is None:
                values = self.layout.counts(progress.observedMetrics.get(OBSERVATION))
                counts, latency = accounting_from(values), latency_counts(values)
            self.totals.add(counts)
            self.gauges.update(gauges)
            self.batch_durations_ms.append(int(progress.durationMs.get("triggerExecution", 0)))
        self._publish(counts, gauges, kafka_lags(progress), written, removed)
        if counts.rejected_notifications:
            log.warning(
                "micro-batch %d: %d notifications ignored: not an INVALIDATE of a valid event with a rule "
                "(rejected_notifications)",
                progress.batchId,
                counts.rejected_notifications,
            )
        if self._metrics is not None and latency:
            publish_latency(self._metrics, latency, write_delay(progress.durationMs))
        self._notify()

    def _look_at_state(self, progress, gauges: dict[str, float]) -> int:
        """After a micro-batch with state: its size and restore time in ``gauges``; returns the
        bytes written to the checkpoint's state since the last look."""
        if not progress.stateOperators:
            return 0
        if str(progress.runId) not in self._started:
            self._started.add(str(progress.runId))
            restored = state_load_seconds(progress)
            if restored is not None:
                gauges["state_load_seconds"] = restored
        look = self.state_files.look() if self.state_files is not None else None
        if look is None:
            return 0
        gauges["state_bytes"] = float(look.size)
        return look.written

    def recount(self, batch_id: int, counts: Accounting, latency: dict[str, list[int]] | None = None) -> None:
        """``counts`` (and ``latency``, ``metrics._latency.latency_counts``) replace the observed
        accounting of micro-batch ``batch_id``: its plan ran more than once (a retried write: the
        observed counts are inflated), or the batch was judged outside the observed plan (Redis state)."""
        with self._changed:
            self._recounted[batch_id] = (counts, latency or {})

    def _ours(self, query_id) -> bool:
        return self.query_id is None or str(query_id) == self.query_id

    def _notify(self) -> None:
        if self.on_batch is not None:
            self.on_batch(self.totals)

    def wait_for_end(self, run_id: str, timeout: float = 10.0) -> bool:
        """Block until the termination of query run ``run_id`` (``query.runId``) has arrived, so
        its counts are complete; False if it did not arrive within ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: run_id in self._ended, timeout)

    def _publish(
        self,
        counts: Accounting,
        gauges: dict[str, float],
        lags: dict[tuple[str, str], float],
        written: int = 0,
        removed: int = 0,
    ) -> None:
        if self._metrics is None:
            return
        counts.publish(self._metrics)
        for name, value in gauges.items():
            self._metrics.gauge(name, value)
        if counts.records_in:
            self._metrics.observe("batch_duration_seconds", gauges["batch_duration_ms"] / 1000)
        for (topic, partition), lag in lags.items():
            self._metrics.gauge("kafka_lag", lag, topic=topic, partition=partition)
        self._metrics.increment("checkpoint_bytes_written", written)
        if removed:
            self._metrics.increment("state_keys_removed", removed)


def _gauges(progress, state_rows_tracked: bool, operator_count=None) -> dict[str, float]:
    gauges = {
        "batch_duration_ms": float(progress.durationMs.get("triggerExecution", 0)),
        "input_rows_per_second": float(progress.inputRowsPerSecond or 0.0),
        "processed_rows_per_second": float(progress.processedRowsPerSecond or 0.0),
    }
    if progress.stateOperators:
        state = progress.stateOperators[0]
        # the operator's own count: RocksDB's (tracked) also holds the rows of its expiry queues
        counted = operator_count.rows() if operator_count else None
        rows = counted if counted is not None else state.numRowsTotal if state_rows_tracked else None
        if rows is not None:
            gauges["state_rows"] = float(rows)
        durations = progress.durationMs
        gauges["checkpoint_commit_seconds"] = (
            state.commitTimeMs + durations.get("walCommit", 0) + durations.get("commitOffsets", 0)
        ) / 1000
    return gauges


def state_load_seconds(progress) -> float | None:
    """The state's restore time, from a run's first micro-batch with state: None when it is the
    query's first micro-batch (nothing to restore). Spark 4.0.1 does not time the load of a state
    store (no such progress or custom metric), which its tasks do before they judge a key, so
    this is the batch's execution (``addBatch``: load, judging, output), an upper bound of it."""
    if progress.batchId == 0:
        return None
    return progress.durationMs.get("addBatch", 0) / 1000


def kafka_lags(progress) -> dict[tuple[str, str], float]:
    """Per Kafka partition of the sources, the records the batch's end offset is behind the
    latest offset Spark saw (both in the progress, as JSON ``{topic: {partition: offset}}``)."""
    lags = {}
    for source in progress.sources:
        try:
            ends, latest = json.loads(source.endOffset or "null"), json.loads(source.latestOffset or "null")
        except (TypeError, ValueError):
            continue
        if not isinstance(ends, dict) or not isinstance(latest, dict):
            continue  # not a Kafka source
        for topic, offsets in latest.items():
            for partition, offset in (offsets or {}).items():
                end = (ends.get(topic) or {}).get(partition)
                if isinstance(end, int) and isinstance(offset, int):
                    lags[topic, partition] = float(max(0, offset - end))
    return lags
