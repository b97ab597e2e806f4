"""The Spark engine's default trigger interval (``spark.trigger``), chosen from measurements.

A micro-batch starts every interval, or at once when the previous one took longer. An event
waits for the next batch to start (up to the interval) and then for its batch to end, so the
interval is most of the latency while batches are shorter than it: with batches of 270–390 ms
(docs/design/latency.md), ``500 milliseconds`` gave p50 0.67–0.83 s and p99 1.4–1.9 s in
``bench/latency_bench.py`` where ``1 second`` gave 1.0–1.1 s and 1.8–2.1 s; ``250
milliseconds`` ran batches back to back (a core busy at any rate) for no better p99. A longer
interval costs fewer checkpoint writes per second (each batch writes its offset and commit
logs and a state store version) and a shorter one replays less after a crash
(docs/operations/latency.md).
"""

DEFAULT_TRIGGER = "500 milliseconds"
