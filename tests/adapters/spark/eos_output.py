"""What ``read_committed`` readers see of the Spark engine's exactly-once output: the unique events,
the dead letters' original values, and the commit markers per (batch, partition)."""

from __future__ import annotations

import json
from collections import Counter

from adapters.spark.output import control_topic_for, partition_id
from domain import dead_letters
from tests.support.kafka_io import read_topic


def committed(bootstrap: str, topic: str, only_committed: bool = True) -> Counter:
    return Counter(m.value for m in read_topic(bootstrap, topic, committed=only_committed))


def dead_letter_values(bootstrap: str, topic: str) -> Counter:
    return Counter(
        dead_letters.from_headers(m.value, m.key, m.raw_headers).record.value for m in read_topic(bootstrap, topic)
    )


def markers(bootstrap: str, events_topic: str, transactional_id: str) -> Counter:
    """How many committed markers each (batch, partition) has."""
    found = Counter()
    for message in read_topic(bootstrap, control_topic_for(events_topic)):
        if message.key.startswith(partition_id(transactional_id, "").encode()):
            marker = json.loads(message.value)
            found[marker["batch_id"], marker["partition"]] += 1
    return found
