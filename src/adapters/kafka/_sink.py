"""Unique events to a topic: the original bytes, keyed by the event's deduplication key.

Writes go through the engine's shared ``ProducerChannel`` (idempotent, ``acks=all``), so
``flush`` raises ``SinkUnavailable`` exactly when the channel does (see ``producer``).
"""

from __future__ import annotations

from collections.abc import Callable

from adapters.kafka._producer import ProducerChannel
from domain import Event, RawRecord, RecordTooLarge, RuleSet, join_parts


def unique_value_key(event: Event) -> bytes:
    return event.unique_value.encode()


def rule_key(rules: RuleSet) -> Callable[[Event], bytes]:
    """The values of the event's rule's key fields (``uniqueValue`` by default, or for types
    without a rule; several joined as ``domain._keys`` joins a state key's parts), so every copy
    of an event lands on the same partition."""

    if all(rule.key_fields == ("uniqueValue",) for rule in rules.rules.values()):
        return unique_value_key  # every type's key (a sink tells this one by its name: no call per record)

    def key_of(event: Event) -> bytes:
        rule = rules.rules.get(event.type)
        if rule is None or rule.key_fields == ("uniqueValue",):
            return unique_value_key(event)
        return join_parts(event.field_value(name) for name in rule.key_fields).encode()

    return key_of


class KafkaSink:
    """An ``EventSink`` writing each unique event's original bytes to ``topic``.

    ``flush`` returns the events the topic refused as too large only at delivery (its limit
    could not be read at start: ``ProducerChannel``), each with its ``RecordTooLarge``. Under a
    transaction nothing is returned: the refusal dooms it, and the batch is judged again.
    """

    def __init__(self, channel: ProducerChannel, topic: str, key_of: Callable[[Event], bytes] = unique_value_key):
        self.channel = channel
        self.topic = topic
        self.key_of = key_of
        self._written: list[tuple[bytes, bytes | None, RawRecord]] = []  # since the last flush

    def write(self, record: RawRecord, event: Event) -> None:
        key = event.unique_value.encode() if self.key_of is unique_value_key else self.key_of(event)
        channel = self.channel
        channel.produce(self.topic, record.value, key)
        if not channel.transactional and self.topic not in channel.limits_read:
            self._written.append((record.value, key, record))

    def flush(self) -> list[tuple[RawRecord, RecordTooLarge]]:
        """Flushes the channel; the written events the topic refused as too large (matched by
        message; a refusal is rare, so the batch's messages are looked up only then)."""
        self.channel.flush()
        written, self._written = self._written, []
        if self.channel.transactional:
            return []
        refused = self.channel.take_refused(self.topic)
        if not refused:
            return []
        by_message = {(value, key): record for value, key, record in written}
        return [(by_message[(value, key)], error) for value, key, error in refused if (value, key) in by_message]

    def close(self) -> None:
        """The channel is shared; the engine closes it."""
