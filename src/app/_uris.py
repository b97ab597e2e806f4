"""What the URI settings accept, checked when the settings load (before any engine starts).

Streams (``source``, ``sink``, ``dlq``, ``notifications``, ``notifications_out``): ``-``
(stdin/stdout), ``file:PATH``, ``jsonl:DIRECTORY`` or ``kafka://HOST:PORT[,HOST:PORT]/TOPIC``.
States (``state``, ``migration.state_from``): ``memory``, ``memory:SNAPSHOT_PATH``, or a
Redis URL (``redis://``, ``rediss://``, ``unix://``). Which engine takes which is the
composition root's business; here a value is refused when no engine could take it: a bare path,
an unknown or upper-case scheme (the closest known one is suggested), a port that is not a port,
a snapshot path that is a directory. Each error is a ``ValueError`` whose message shows the
value redacted (``domain._redaction``).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from urllib.parse import urlsplit

from adapters.kafka import KafkaConfigurationError, parse_kafka_uri
from app._setting_names import env_name
from domain import first_line, redact_uri

STREAM_FORMS = {"kafka://": "kafka://HOST:PORT/TOPIC", "file:": "file:PATH", "jsonl:": "jsonl:DIRECTORY"}
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
CHECKPOINT = "checkpoint"  # the Spark engine's state, kept in its checkpoint
STATE_FORMS = {
    "memory:": "memory:SNAPSHOT_PATH",
    **{s: f"{s}HOST:PORT/DB" for s in REDIS_SCHEMES[:2]},
    "unix://": "unix://SOCKET_PATH?db=N",
}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(//)?")


def check_stream_uri(value: str, setting: str) -> str:
    if value == "-" or (value.startswith(("file:", "jsonl:")) and len(value.split(":", 1)[1]) > 0):
        return value
    if value.startswith("kafka://"):
        try:
            parse_kafka_uri(value, setting)
        except KafkaConfigurationError as exc:
            raise ValueError(str(exc).removeprefix(f"invalid {setting} URI ")) from None
        return value
    raise ValueError(_unknown_form(value, STREAM_FORMS, "'-'"))


MEMORY_DEAD_LETTERS = "file:dead-letters.jsonl"  # the memory engine's dead-letter output when none is set


def distinct_files(uris: dict[str, str | None], state: str) -> None:
    """The memory engine's files, each named by one setting only: a sink writing over the input,
    the state snapshot or another output would destroy it; ``-`` is stdin for the inputs and
    stdout for the outputs, one of each at most. Raises ValueError naming the setting."""

    def path(uri: str | None) -> str | None:
        if uri == "-" or uri == "file:-":
            return "-"
        return uri.removeprefix("file:") if uri and uri.startswith("file:") else None

    snapshot = state.removeprefix("memory:") if state.startswith("memory:") else None
    inputs = {"source": path(uris.get("source")), "notifications": path(uris.get("notifications"))}
    outputs = {
        "sink": path(uris.get("sink")),
        "dlq": path(uris.get("dlq") or MEMORY_DEAD_LETTERS),
        "notifications_out": path(uris.get("notifications_out")),
        "state": snapshot,
    }
    for group, stream in ((inputs, "stdin"), (outputs, "stdout")):
        seen: dict[str, str] = {}
        for setting, where in group.items():
            if where:
                place = stream if where == "-" else str(Path(where).resolve())
                if place in seen:
                    raise ValueError(
                        f"{setting} ({env_name([setting])}): {stream if where == '-' else where} is "
                        f"also {seen[place]}'s; each needs its own file"
                    )
                seen[place] = setting
    written = {str(Path(p).resolve()): s for s, p in outputs.items() if p and p != "-"}
    for setting, where in inputs.items():
        writer = written.get(str(Path(where).resolve())) if where and where != "-" else None
        if writer:
            raise ValueError(
                f"{writer} ({env_name([writer])}): {where} is also {setting}'s, which it would "
                f"overwrite; each needs its own file"
            )


def check_state_uri(value: str) -> str:
    if value in ("memory", CHECKPOINT):
        return value
    if value.startswith("memory:"):
        path = Path(value.removeprefix("memory:"))
        if not path.name:
            raise ValueError("memory:SNAPSHOT_PATH needs a file path")
        if path.is_dir():
            raise ValueError(f"memory:{path} is a directory; the snapshot is a file, e.g. memory:{path / 'state.json'}")
        if not path.parent.is_dir():
            raise ValueError(f"the snapshot's directory {path.parent} does not exist")
        return value
    if value.startswith(REDIS_SCHEMES):
        _check_redis_url(value)
        return value
    raise ValueError(_unknown_form(value, STATE_FORMS, "'memory', 'checkpoint' (the spark engine)"))


def _check_redis_url(value: str) -> None:
    parts = urlsplit(value)
    try:
        _ = parts.port  # reading the port validates it
    except ValueError:
        raise ValueError(f"{redact_uri(value)!r} has an invalid port: a port is a number from 1 to 65535") from None
    if parts.scheme != "unix" and not parts.hostname:
        raise ValueError(f"{redact_uri(value)!r} names no host: {parts.scheme}://HOST:PORT/DB")
    if parts.scheme != "unix" and parts.path.strip("/") and not parts.path.strip("/").isdigit():
        raise ValueError(f"{redact_uri(value)!r}: the database is a number, {parts.scheme}://HOST:PORT/DB")
    _check_redis_parameters(value)


def _check_redis_parameters(value: str) -> None:
    """Query parameters the Redis client takes, with values it takes (a connection is built, not opened)."""
    import redis

    try:
        redis.ConnectionPool.from_url(value).make_connection()
    except (TypeError, ValueError) as exc:
        unknown = re.search(r"unexpected keyword argument '([^']+)'", str(exc))
        reason = f"the Redis client has no parameter {unknown[1]!r}" if unknown else first_line(exc)
        raise ValueError(f"{redact_uri(value)!r}: {redact_uri(reason)}") from None


def _unknown_form(value: str, forms: dict[str, str], other: str) -> str:
    accepted = ", ".join([other, *dict.fromkeys(forms.values())])
    shown = redact_uri(value)
    scheme = _SCHEME.match(value)
    if not value.strip():
        return f"empty; give one of {accepted}"
    if not scheme:
        hint = f"; for a file write file:{shown}" if "file:" in forms else ""
        return f"{shown!r} is not one of {accepted}{hint}"
    written = scheme.group(0)
    if written in forms:
        return f"{shown!r} names nothing after the scheme: write {forms[written]}"
    if written.lower() in forms:
        return f"{shown!r}: write the scheme in lower case, {written.lower()}"
    closest = difflib.get_close_matches(written.lower(), list(forms), n=1, cutoff=0.6)
    hint = f"; did you mean {closest[0]}?" if closest else ""
    return f"unknown scheme {written!r} in {shown!r}{hint} (accepted: {accepted})"
