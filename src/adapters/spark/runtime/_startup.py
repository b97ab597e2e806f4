"""What the Spark engine checks before each start of its query: what waiting cannot heal is
refused in one line before Spark runs anything, and a broker that does not answer is found in
seconds, not after the Kafka connector's minutes of retries.

``require_endpoints`` checks every input and output of the job:

* a Kafka topic (the source's topics, the notifications', the events' and the dead letters')
  exists, asked with confluent-kafka's admin client as the kafka engine asks
  (``adapters.kafka._topics.require_topics``: whole-cluster metadata only, so a check never
  makes a broker create a topic) with ``kafka.config``'s librdkafka settings (a URI's own
  query parameters are options of Spark's Java client, not used here). A missing topic raises
  ``KafkaConfigurationError`` naming the topic and its brokers: a setup error, never
  restarted. Brokers that do not answer within ``timeout`` seconds raise
  ``SourceUnavailable`` (an input's) or ``SinkUnavailable`` (an output's) naming them:
  transient, the restart strategy decides;
* a JSONL input directory (source, notifications) exists: ``InputMissing``, a setup error.
  Output directories are created by their first write.
"""

from __future__ import annotations

from collections.abc import Mapping

from adapters.spark.checkpoint import HadoopPath
from adapters.spark.shared import InputMissing, parse_uri

TIMEOUT = 10.0  # seconds for a cluster's metadata
INPUTS = ("source", "notifications")


def require_endpoints(
    spark, endpoints: Mapping[str, str], kafka_settings: Mapping[str, str] | None = None, timeout: float = TIMEOUT
) -> None:
    """Check ``endpoints`` (role -> URI: ``source``, ``notifications``, ``sink``, ``dlq``); raises as
    the module docstring says, the first input's problem first."""
    topics = []
    for role, uri in endpoints.items():
        endpoint = parse_uri(uri, role)
        if endpoint.kind == "kafka":
            assert endpoint.topic is not None  # a Kafka endpoint (parse_uri) always names its topic
            topics += [(role, topic) for topic in endpoint.topic.split(",") if topic.strip()]
        elif role in INPUTS:
            _require_directory(spark, role, endpoint.location)
    if topics:
        _require_topics(endpoints, topics, kafka_settings, timeout)


def _require_directory(spark, role: str, location: str) -> None:
    if any(c in location for c in "*?[{"):
        return  # a glob: Spark reads what matches, none at first is fine
    path = HadoopPath.at(location, spark)
    if not path.exists():
        raise InputMissing(
            f"input directory {location} ({role}) does not exist; create it, or give the "
            f"directory that holds the input as --{role}"
        )
    if not path.is_dir():
        raise InputMissing(
            f"input {location} ({role}) is a file; the Spark engine reads a directory of files "
            f"(each new file one after another): give the directory that holds it as --{role}"
        )


def _require_topics(endpoints: Mapping[str, str], topics: list[tuple[str, str]], kafka_settings, timeout) -> None:
    from adapters.kafka import KafkaEndpoint, require_topics

    checked = [
        (role, KafkaEndpoint(parse_uri(endpoints[role], role).location, topic.strip())) for role, topic in topics
    ]
    require_topics(checked, kafka_settings, timeout)
