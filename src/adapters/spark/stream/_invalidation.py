"""INVALIDATE notifications on the Spark engine's deduplication state.

Notifications (``{"notification": "INVALIDATE", "exception": "…", "event": {…}}``) are read
as a second stream (a Kafka topic or a JSONL directory) and unioned into the operator's
input just before the stateful step: each becomes a row keyed by its event's dedup key
(computed by the same plan as the events, so key fields and rule scoping are the same),
with ``invalidate = true`` and the lowest arrival order, so it comes first in its
micro-batch. ``WindowDedup`` then forgets every emission of that key, as
``StateStore.invalidate`` does in the in-memory engine, and the event passes again when
re-sent inside its window. The in-memory engine applies notifications before each batch
it polls; here they apply before the events of the micro-batch that reads them.

Notification rows come out of the operator with verdict ``invalidated``; they are not
input records: the accounting counts them as ``invalidations`` only (``metrics``), and the
writers, which take ``emit`` and ``dead_letter`` rows, never write them. A notification that
is not valid JSON (however deeply nested), not an INVALIDATE, or whose event is invalid
changes nothing: its row comes out ``rejected_notification``, counted as
``rejected_notifications`` (the summary, the metric, a warning per micro-batch). One whose
event is valid but of a type without a rule has nothing to forget: ``invalidated``, as in the
domain. Deviation:
the in-memory and kafka engines also dead-letter it with reason ``bad_notification``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from adapters.spark.stream._plan import DedupPlan, Hook

FIRST = -(2**63)


def notification_rows(notes: DataFrame, plan: DedupPlan) -> DataFrame:
    """Operator-input rows for the notifications in ``notes`` (``RECORD_COLUMNS``): a valid
    INVALIDATE of a ruled event is ``judged`` (its key is forgotten); any other is not (it is
    passed, and counted as rejected)."""
    text = F.col("value").cast("string")
    invalidate = F.coalesce(F.get_json_object(text, "$.notification") == F.lit("INVALIDATE"), F.lit(False))
    events = notes.withColumn("value", F.when(invalidate, F.get_json_object(text, "$.event").cast("binary")))
    rows = plan.operator_input(events)
    return rows.withColumns(
        {
            "file_time": F.lit(FIRST),
            "ord": F.lit(FIRST),
            "invalidate": F.lit(True),
            "judged": F.col("judged") & F.col("value").isNotNull(),
        }
    )


def with_notifications(notes: DataFrame, plan: DedupPlan, then: Hook | None = None) -> Hook:
    """A ``DedupPlan.before_operator`` hook: the event rows (through ``then``, e.g. a migration's
    fallback lookup) unioned with the notification rows."""

    def union(events: DataFrame) -> DataFrame:
        events = (then or (lambda df: df))(events).withColumn("invalidate", F.lit(False))
        return events.unionByName(notification_rows(notes, plan), allowMissingColumns=True)

    return union
