"""The program's log lines: one format, every line redacted of secrets (``domain.redaction``)."""

from __future__ import annotations

import logging

from domain.redaction import redact

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class RedactingFormatter(logging.Formatter):
    """Formats a record (its traceback included), then masks every secret in the text."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def configure_logging(level: str) -> None:
    """Log to stderr at ``level`` through the redacting formatter (a no-op when logging is set up)."""
    handler = logging.StreamHandler()
    handler.setFormatter(RedactingFormatter(FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
