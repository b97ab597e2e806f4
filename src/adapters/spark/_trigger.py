"""The Spark engine's default trigger interval (``spark.trigger``), chosen from measurements.

A micro-batch starts every interval, or at once when the previous one took longer. An event
waits for the next batch to start (up to the interval) and then for its batch to end, so the
interval is most of the latency while batches are shorter than it. With batches of 270–450 ms
(docs/design/latency.md), ``bench/latency_bench.py`` after its warm-up gave, at 200 events/s,
p99 0.58–0.63 s with ``250 milliseconds`` against 0.76–0.87 s with ``500 milliseconds``, and at
5,000 events/s 0.91–0.98 s against 0.99–1.01 s (2026-11-29). A shorter
interval runs batches back to back while records arrive (a core busy at any rate; no batch
runs while the input is idle) and writes more checkpoint files per second (each batch its
offset and commit logs and a state store version); a longer one replays more after a crash
(docs/operations/latency.md).
"""

DEFAULT_TRIGGER = "250 milliseconds"
