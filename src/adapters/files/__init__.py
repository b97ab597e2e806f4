"""JSONL files, stdin and stdout as sources and sinks."""

from adapters.files._jsonl import (
    STDIO,
    JsonlDeadLetterSink,
    JsonlDuplicateSink,
    JsonlSink,
    JsonlSource,
    LinePosition,
    opening_failed,
)
from adapters.files._notifications import JsonlNotificationSink, JsonlNotificationSource

__all__ = [
    "STDIO",
    "JsonlDeadLetterSink",
    "JsonlDuplicateSink",
    "JsonlNotificationSink",
    "JsonlNotificationSource",
    "JsonlSink",
    "JsonlSource",
    "LinePosition",
    "opening_failed",
]
