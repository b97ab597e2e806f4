"""Noticing, while the query runs, that a migration's old state has expired.

``RetirementWatch`` listens to the query's progress; the first micro-batch after which the
watermark reaches ``retire_at`` (the old state's last expiry) calls ``on_retire(watermark)`` once.
From then on no old emission is live, so the fallback cannot change a verdict; the next
start leaves it out of the plan. The watch removes itself when the query terminates.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pyspark.sql.streaming import StreamingQueryListener

log = logging.getLogger(__name__)


class RetirementWatch(StreamingQueryListener):
    def __init__(self, spark, retire_at: int, on_retire: Callable[[int], None], watermark: Callable[[], int | None]):
        """``watermark``: the engine's highest rule watermark after the last batch (``BatchWatermarks.highest``)."""
        self.spark, self.retire_at, self.on_retire, self.watermark = spark, retire_at, on_retire, watermark
        self.done = False
        self.query_id: str | None = None  # the first query started after the watch: the engine's

    def onQueryStarted(self, event):
        if self.query_id is None:
            self.query_id = str(event.id)

    def onQueryIdle(self, event):
        pass

    def onQueryProgress(self, event):
        watermark = self.watermark()
        ours = str(event.progress.id) == self.query_id
        if ours and not self.done and watermark is not None and watermark >= self.retire_at:
            self.done = True
            self.on_retire(watermark)

    def onQueryTerminated(self, event):
        if str(event.id) != self.query_id:
            return
        self.done = True
        try:
            self.spark.streams.removeListener(self)
        except Exception as exc:
            log.debug("could not remove the retirement watch: %s", exc)
