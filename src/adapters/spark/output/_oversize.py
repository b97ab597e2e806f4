"""Records too large for a Kafka output, on the Spark engine: unique events are dead-lettered,
dead letters are cut to fit (as the kafka engine does: ``adapters.kafka._producer``).

A Kafka topic refuses a message over its ``max.message.bytes``, and the producer one over
its own limit; either fails the micro-batch, and its replay fails again: the query stalls.
So the writer reads the output topics' limits when it is built and

* ``OversizeRoute`` turns each unique event larger than the events topic takes
  (``adapters.kafka._sizes.message_size``) into a dead letter: verdict ``dead-letter``, reason
  ``oversize``, error ``domain._errors.too_large_text`` (the kafka engine's
  ``RecordTooLarge``). Its key stays remembered in the state, as with the kafka engine's
  default ``invalid=dead-letter``; the ``invalid`` policy's other steps are not applied to it;
* ``dead_letter_bound`` bounds the dead letters' key plus value so that they fit their
  topic (``domain._dead_letters.bounded``).

A topic whose configuration cannot be read is not checked (logged).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from adapters.kafka import DEAD_LETTER_HEADERS_ROOM, RECORD_OVERHEAD
from adapters.spark.shared import Endpoint
from adapters.spark.stream import DEAD_LETTER, EMIT
from domain import OVERSIZE, too_large_text

JAVA_PRODUCER_DEFAULT_MAX = 1_048_576  # the Kafka Java producer's max.request.size (Spark's Kafka writer)
TIMEOUT = 10.0


@dataclass(frozen=True)
class OversizeRoute:
    """Unique events over ``limit`` bytes (None: no limit) become ``oversize`` dead letters."""

    limit: int | None = None
    output: str = ""

    def __call__(self, judged: DataFrame) -> DataFrame:
        if self.limit is None:
            return judged
        size = message_size()
        oversize = (F.col("verdict") == EMIT) & (size > F.lit(self.limit))
        return judged.withColumns(
            {
                "verdict": F.when(oversize, F.lit(DEAD_LETTER)).otherwise(F.col("verdict")),
                "reason": F.when(oversize, F.lit(OVERSIZE)).otherwise(F.col("reason")),
                "detail": F.when(oversize, self._text(size)).otherwise(F.col("detail")),
            }
        )

    def _text(self, size: Column) -> Column:
        before, _, after = too_large_text("\0", str(self.limit), self.output).partition("\0")
        return F.concat(F.lit(before), size.cast("string"), F.lit(after))


def message_size() -> Column:
    """``adapters.kafka._sizes.message_size`` of a row's ``value`` and ``kafka_key`` (no headers)."""
    return F.lit(RECORD_OVERHEAD) + F.octet_length("value") + F.coalesce(F.octet_length("kafka_key"), F.lit(0))


def events_route(events: Endpoint, kafka_settings: Mapping[str, str], producer_max: int) -> OversizeRoute:
    """The route for unique events written to ``events`` by a producer taking ``producer_max`` bytes."""
    limit = topic_limit(events, kafka_settings)
    if limit is None:
        return OversizeRoute()
    return OversizeRoute(min(limit, producer_max), f"topic {events.topic!r}")


def dead_letter_bound(dead_letters: Endpoint, kafka_settings: Mapping[str, str], max_bytes: int) -> int:
    """``max_bytes``, lowered so that a dead letter with its headers fits a Kafka dead-letter topic."""
    limit = topic_limit(dead_letters, kafka_settings)
    return max_bytes if limit is None else max(0, min(max_bytes, limit - RECORD_OVERHEAD - DEAD_LETTER_HEADERS_ROOM))


def topic_limit(endpoint: Endpoint, kafka_settings: Mapping[str, str]) -> int | None:
    """A Kafka endpoint's ``max.message.bytes`` (None: not Kafka, or not readable)."""
    if endpoint.kind != "kafka":
        return None
    from adapters.kafka import KafkaEndpoint, max_message_bytes

    assert endpoint.topic is not None  # a Kafka endpoint (parse_uri) always names its topic
    return max_message_bytes(KafkaEndpoint(endpoint.location, endpoint.topic), kafka_settings, TIMEOUT)


def producer_max(java_options: Mapping[str, str] | None = None) -> int:
    """The largest message the writer's (Java) producer takes: ``max.request.size``."""
    return int((java_options or {}).get("kafka.max.request.size", JAVA_PRODUCER_DEFAULT_MAX))
