"""The error taxonomy every policy decides on.

Adapters translate library exceptions into these types at their edge (a lost Redis
connection becomes a ``StateUnavailable``); policies look only at these types and the
data they carry, never at a library's exception class.
"""

from __future__ import annotations


class DedupError(Exception):
    """Root of every error the service acts on."""

    permanent: bool = True
    error_class: str = "bug"

    @property
    def reason(self) -> str:
        return self.error_class


class PermanentError(DedupError):
    """Retrying cannot help: the same input fails the same way again."""

    permanent = True


class SetupError(PermanentError):
    """The program cannot start with these settings or resources (a wrong or conflicting setting, a
    missing topic or input, a checkpoint of another job or in use): the same start fails the same
    way, so it is never restarted or retried; the CLI prints its one-line message and exits 2."""

    error_class = "setup"


class TransientError(DedupError):
    """Infrastructure trouble: the same input may succeed later.

    ``retry_after`` (seconds), when an adapter knows it, is a hint for the retry policy.
    """

    permanent = False
    error_class = "transient"

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class InvalidEvent(PermanentError):
    """A record that is not a valid event; ``code`` is machine-readable, ``field`` names the culprit."""

    error_class = "invalid"

    def __init__(self, code: str, detail: str, field: str | None = None):
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.field = field

    @property
    def reason(self) -> str:
        return self.code


class UnknownEventType(InvalidEvent):
    """An event whose type has no rule, when unknown types are configured to be dead-lettered."""

    def __init__(self, event_type: str):
        super().__init__("unknown_type", f"no deduplication rule for type {event_type!r}", "type")


OVERSIZE = "oversize"  # the reason of a record too large for an output
INVALID_CODES = (
    "not_utf8",
    "not_json",
    "not_object",
    "missing_field",
    "null_field",
    "wrong_type",
    "empty_field",
    "out_of_range",
    "unknown_type",
    "future",
)
DEAD_LETTER_REASONS = (*INVALID_CODES, "late", OVERSIZE, "bug", "transient")
"""Every reason a dead letter can give: the codes of ``InvalidEvent`` (``domain._events``), a late
record, a record too large for its output, and the error classes a policy dead-letters."""


class RecordTooLarge(PermanentError):
    """A record larger than an output takes (e.g. a Kafka topic's ``max.message.bytes``).

    Permanent for that output and the record's own doing: ``invalid``, so the ``invalid``
    policy decides (by default dead-lettered, with reason ``oversize``, the dead letter cut to
    its bound: ``domain._dead_letters.bounded``). ``size`` and ``limit`` are in bytes.
    """

    error_class = "invalid"

    def __init__(self, size: int, limit: int, output: str):
        super().__init__(too_large_text(str(size), str(limit), output))
        self.size, self.limit = size, limit

    @property
    def reason(self) -> str:
        return OVERSIZE


def too_large_text(size: str, limit: str, output: str) -> str:
    """The message of ``RecordTooLarge`` (sizes as text, so an engine can put a column's in)."""
    return f"message of {size} bytes is larger than the {limit} bytes {output} takes"


class ProcessingBug(PermanentError):
    """An unexpected exception inside the service: a bug, never the event's fault."""

    error_class = "bug"

    @classmethod
    def wrap(cls, exc: BaseException) -> ProcessingBug:
        bug = cls(f"{type(exc).__name__}: {exc}")
        bug.__cause__ = exc
        return bug


class StateUnavailable(TransientError):
    """The state store could not be reached or did not answer."""


class SinkUnavailable(TransientError):
    """An output (events, dead letters or notifications) could not accept a write."""


class SourceUnavailable(TransientError):
    """The input could not be read for now."""


class BatchAborted(TransientError):
    """The committer aborted the batch and rewound its input: the batch is read and judged again,
    and nothing of this attempt counts (e.g. an output refused a message of the transaction as too
    large, which the engine learned from)."""


class PolicyExhausted(DedupError):
    """A policy chain ended in ``fail``: the engine must stop without acknowledging the input."""

    def __init__(self, cause: DedupError, attempts: int):
        super().__init__(f"{cause} (after {attempts} attempt{'s' if attempts != 1 else ''})")
        self.cause = cause
        self.attempts = attempts


def classify(exc: BaseException) -> DedupError:
    """The domain error for any exception: domain errors as they are, anything else a bug."""
    if isinstance(exc, DedupError):
        return exc
    return ProcessingBug.wrap(exc)


def first_line(error: BaseException, text: str | None = None) -> str:
    """The first non-blank line of ``text`` (default: the error's own text, a Java exception's when
    it carries one, as py4j's errors do), or the error's type when there is no text: what a
    one-line message quotes of an error whose full text may be a stack trace."""
    if text is None:
        java = getattr(error, "java_exception", None)
        text = str(error if java is None else java.toString())
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
