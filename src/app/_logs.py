"""The program's log lines: text for a terminal or one JSON object per line for a log shipper,
every line redacted of secrets (``domain._redaction``).

A JSON line holds ``time``, ``level``, ``logger`` and ``message``, the traceback as
``exc_info`` when there is one, and whatever a call site adds with ``extra=`` (a micro-batch's
``batch_id`` and counts). python-json-logger writes it.
"""

from __future__ import annotations

import json
import logging

from pythonjsonlogger.json import JsonFormatter

from domain import redact

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RedactingFormatter(logging.Formatter):
    """Formats a record (its traceback included), then masks every secret in the text."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class RedactingJsonFormatter(JsonFormatter):
    """One JSON object per record; every string in it redacted."""

    def __init__(self):
        super().__init__(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            json_default=str,
        )

    def process_log_record(self, log_record: dict) -> dict:
        return {key: redact(value) if isinstance(value, str) else _redacted(value) for key, value in log_record.items()}


def _redacted(value):
    if isinstance(value, (dict, list, tuple)):
        return json.loads(redact(json.dumps(value, default=str)))
    return value


def formatter(log_format: str = "text") -> logging.Formatter:
    return RedactingJsonFormatter() if log_format == "json" else RedactingFormatter(FORMAT)


def configure_logging(level: str, log_format: str = "text") -> None:
    """Log to stderr at ``level`` in ``log_format`` (``text`` or ``json``), redacted (a no-op
    when logging is set up)."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format))
    logging.basicConfig(level=level, handlers=[handler])
