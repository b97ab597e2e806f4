"""Which writer the Spark engine's delivery and outputs give (``output.writers.writer_for``): Kafka topics
are written by the executors under both deliveries, JSONL directories by Spark's own writers. Building a
writer reads the topics' size limits from the broker (``oversize``), hence a real one."""

from __future__ import annotations

import pytest

from adapters.spark.output.writers import AtLeastOnceWriter, ExactlyOnceWriter, writer_for
from adapters.spark.errors import SparkSetupError
from adapters.spark.output.executor_writer import PRODUCER_DEFAULTS

pytestmark = pytest.mark.kafka


@pytest.fixture
def uris(kafka_bootstrap):
    """The sink, a dead-letter topic on its cluster, and one on a cluster named otherwise."""
    port = kafka_bootstrap.rsplit(":", 1)[1]
    return f"kafka://{kafka_bootstrap}/out", f"kafka://{kafka_bootstrap}/dlq", f"kafka://localhost:{port}/dlq"


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_kafka_topics_are_written_by_the_executors_in_one_pass_under_both_deliveries(delivery, uris,
                                                                                   kafka_bootstrap):
    writer = writer_for(uris[0], uris[1], delivery, "/tmp/checkpoint")
    assert writer.executors is not None and writer.reads == 1
    assert writer.executors.producer["bootstrap.servers"] == kafka_bootstrap
    transactional = writer.executors.markers is not None
    assert transactional == (delivery == "exactly-once")
    assert isinstance(writer, ExactlyOnceWriter if transactional else AtLeastOnceWriter)


def test_the_executor_writer_takes_the_sink_uris_client_options_over_the_defaults(uris):
    writer = writer_for(uris[0] + "?kafka.compression.type=zstd&kafka.linger.ms=5", uris[1], "at-least-once", "/c")
    producer = writer.executors.producer
    assert (producer["compression.type"], producer["linger.ms"]) == ("zstd", "5")
    assert producer["batch.size"] == PRODUCER_DEFAULTS["batch.size"] and producer["enable.idempotence"] == "true"


def test_dead_letters_elsewhere_take_a_write_of_their_own(uris):
    sink, _, other = uris
    assert writer_for(sink, "/tmp/dlq", "at-least-once", "/c").reads == 2
    assert writer_for(sink, other, "at-least-once", "/c").reads == 2
    assert writer_for(sink, "/tmp/dlq", "exactly-once", "/c").reads == 2


def test_a_directory_sink_is_written_by_sparks_own_writer():
    writer = writer_for("/tmp/out", "/tmp/dlq", "at-least-once", "/c")
    assert isinstance(writer, AtLeastOnceWriter) and writer.executors is None and writer.reads == 2


def test_exactly_once_refuses_outputs_one_transaction_cannot_span(uris, kafka_bootstrap):
    sink, letters, other = uris
    for outputs, named in [(("/tmp/out", letters), "needs a kafka:// sink"),
                           ((sink, other), f"dead-letter topic on the sink's cluster ({kafka_bootstrap})")]:
        with pytest.raises(SparkSetupError, match="exactly-once") as refused:
            writer_for(*outputs, "exactly-once", "/c")
        assert named in str(refused.value) and "\n" not in str(refused.value)
