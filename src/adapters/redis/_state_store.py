"""Deduplication state in Redis: one key per dedup key, decided atomically by a Lua script.

Each key holds the domain's v2 value (``domain._state.encode``; v1 values are read and
upgraded). ``check_and_set_many`` sends the whole batch in one round trip: claims are
split into chunks of ``chunk_size`` (so Redis is never blocked for long), each chunk one
``EVALSHA``, all chunks in one pipeline, executed in order (the scripts are loaded, with one
more round trip, only when the server does not have them yet).

Expiry follows event time (:mod:`adapters.redis._script`): before each chunk, a sweep forgets
up to two keys per claim of the chunk among those its rules' shared watermarks have passed
(the lowest over the source partitions every instance claimed from within ``idle_timeout``), so a
batch costs what it claims and what expires, never what is stored, and the state follows
the window in event time, during a backlog too. A key has no TTL: a job stopped for hours
forgets nothing. Needs Redis 7.0 or later (:meth:`RedisStateStore.server_version`).

A full Redis (``maxmemory`` reached under ``noeviction``) refuses a chunk's claims whole; the
sweep still runs, as it only frees memory. The refusal is a ``StateUnavailable`` that says so,
and the retry policy waits for the sweeps, or for an operator, to make room.

Failure behaviour: every redis-py error becomes ``StateUnavailable`` (transient; the retry
policy decides), with the server's address and never its password. A batch that fails may
have been applied in part (a chunk or a whole script whose reply was lost); replaying it is
idempotent because each claim carries its record's position as owner. A stored value no
version can read raises ``StateFormatError`` (a bug-class error) with nothing applied.

Keys are stored as their UTF-8 bytes, with a lone surrogate (``"\\ud800"``, which JSON allows
and UTF-8 cannot encode) kept as its own three bytes (Python's ``surrogatepass``): every key
has a Redis key, two different keys never share one, and ``scan_items`` gives the key back as
it was. A hostile key affects only its own claim. Owners are percent-encoded with lone
surrogates kept the same way, so the script still recognises such a record's replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from itertools import islice
from typing import cast
from urllib.parse import quote, urlsplit, urlunsplit

import redis
import redis.connection
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, OutOfMemoryError
from redis.retry import Retry

from adapters.redis._expiry import is_index, lane_of
from adapters.redis._script import BAD_STATE, CHECK_AND_SET, SCRIPT_SHA, SWEEP, SWEEP_SHA, claim_argument
from domain import (
    DEFAULT_IDLE_TIMEOUT,
    GRANTED,
    Claim,
    Emission,
    Judgement,
    StateFormatError,
    StateUnavailable,
    decode,
    first_line,
    redact_uri,
    rule_part,
)
from domain import SEPARATOR as KEY_SEPARATOR

DEFAULT_PREFIX = "dedup:"


class RedisStateStore:
    """A ``StateStore`` on Redis. ``url``: ``redis://[:PASSWORD@]HOST:PORT/DB``, ``rediss://``
    for TLS (``?ssl_cert_reqs=...&ssl_ca_certs=...``), or ``unix://PATH?db=N``.

    ``options`` go to ``redis.Redis.from_url`` (e.g. ``username``, ``ssl_certfile``).
    redis-py retries a dropped connection once at once; longer outages are the retry
    policy's job.
    """

    durable = True

    def __init__(
        self,
        url: str,
        key_prefix: str = DEFAULT_PREFIX,
        *,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        socket_timeout: float = 5.0,
        connect_timeout: float = 2.0,
        chunk_size: int = 2000,
        **options,
    ):
        self.address = redacted_url(url)
        self.key_prefix = key_prefix
        self.idle_timeout = idle_timeout  # s without a claim after which a lane's watermark holds nothing back
        self.chunk_size = chunk_size
        try:
            self._redis = redis.Redis.from_url(
                url,
                socket_timeout=socket_timeout,
                socket_connect_timeout=connect_timeout,
                retry=Retry(NoBackoff(), 1),
                health_check_interval=30,
                **options,
            )
        except (ValueError, redis.RedisError) as exc:
            raise StateUnavailable(f"invalid redis URL {self.address}: {exc}") from None
        self._claims = None  # the connection ``send_many`` sends through, with ``_unread`` answers on it
        self._unread = 0

    def check_and_set(self, claim: Claim) -> bool:
        return self.check_and_set_many([claim])[0].granted

    def check_and_set_many(self, claims: Sequence[Claim]) -> list[Judgement]:
        if not claims:
            return []
        with self._translated("check-and-set"):
            replies = self._evaluate(self._chunks(claims))
        return _judged(replies)

    def send_many(self, claims: Sequence[Claim]) -> Callable[[], list[Judgement]]:
        """Send ``claims`` (as ``check_and_set_many`` does) without waiting: Redis decides them
        while the caller goes on, and the returned call reads their judgements. All sends go
        through one connection of their own, so Redis decides them in the order they were sent;
        their answers must be read in that order too."""
        if not claims:
            return list
        with self._translated("check-and-set"):
            connection = self._claims_connection()
            commands = [command for chunk in self._chunks(claims) for command in self._commands(chunk)]
            try:
                connection.send_packed_command(connection.pack_commands(commands), check_health=not self._unread)
            except BaseException:
                self._drop_claims_connection()
                raise
            self._unread += len(commands)
        return lambda: self._judgements(claims, connection, len(commands))

    def _judgements(
        self, claims: Sequence[Claim], connection: redis.connection.Connection, replies: int
    ) -> list[Judgement]:
        """The answers of one ``send_many``, read from its connection (the oldest unread ones)."""
        if connection is not self._claims:
            raise StateUnavailable(
                f"redis check-and-set failed at {self.address}: the connection of an earlier "
                "call was lost before its answer was read"
            )
        answers, failure = [], None
        with self._translated("check-and-set"):
            try:
                for _ in range(replies):
                    self._unread -= 1
                    try:
                        answers.append(connection.read_response(disconnect_on_error=False))
                    except redis.ResponseError as exc:
                        failure = failure or exc
            except BaseException:
                self._drop_claims_connection()
                raise
            if isinstance(failure, NoScriptError):
                self._load_scripts()
                return self.check_and_set_many(claims)
            if failure is not None:
                raise failure
        return _judged(answers)

    def _chunks(self, claims: Sequence[Claim]) -> list[Sequence[Claim]]:
        return [claims[i : i + self.chunk_size] for i in range(0, len(claims), self.chunk_size)]

    def _claims_connection(self):
        if self._claims is None:
            self._claims = self._redis.connection_pool.get_connection()
            self._unread = 0
        return self._claims

    def _drop_claims_connection(self) -> None:
        connection, self._claims, self._unread = self._claims, None, 0
        if connection is not None:
            connection.disconnect()
            self._redis.connection_pool.release(connection)

    def invalidate(self, key: str) -> bool:
        with self._translated("invalidate"):
            return self._redis.delete(redis_key(self.key_prefix, key)) > 0

    def entries(self, key: str, now: int) -> tuple[Emission, ...]:
        with self._translated("read"):
            value = self._redis.get(redis_key(self.key_prefix, key))
        if value is None:
            return ()
        return tuple(e for e in decode(value) if e.expires_at > now)

    def scan_items(self, chunk: int = 1000) -> Iterator[tuple[str, bytes]]:
        """Every ``(key, stored value)`` under this store's prefix (SCAN + MGET; for inspection)."""
        with self._translated("scan"):
            keys = self._state_keys(chunk)
            while batch := list(islice(keys, chunk)):
                for key, value in zip(batch, self._redis.mget(batch)):
                    if value is not None:
                        yield key_text(key).removeprefix(self.key_prefix), cast(bytes, value)  # no decode_responses

    def newest_emission_times(self) -> dict[str, int]:
        """The time of the newest emission per rule, read from every key (SCAN; unreadable values
        skipped): where a migration's old state ends (``app._container.build_state_store``)."""
        newest: dict[str, int] = {}
        for key, value in self.scan_items():
            try:
                entries = decode(value)
            except ValueError:
                continue
            rule = key.partition(KEY_SEPARATOR)[0]
            for e in entries:
                newest[rule] = max(newest.get(rule, e.time), e.time)
        return newest

    def key_count(self) -> int:
        """How many state keys exist under this store's prefix."""
        with self._translated("scan"):
            return sum(1 for _ in self._state_keys(1000))

    def _state_keys(self, chunk: int) -> Iterator[bytes]:
        """The state keys under this store's prefix (SCAN), without the expiry index's."""
        keys = self._redis.scan_iter(match=_glob_escape(self.key_prefix) + "*", count=chunk)
        return (key for key in keys if not is_index(self.key_prefix, key))

    def server_version(self) -> tuple[int, ...] | None:
        """The server's version (``INFO server``) as numbers, None where INFO is disabled or renamed
        (managed Redis): the scripts need 7.0 or later."""
        with self._translated("info"):
            try:
                text = str(self._redis.info("server")["redis_version"])
            except (redis.ResponseError, KeyError):
                return None
        return tuple(int(part) for part in text.split(".") if part.isdigit())

    def eviction_policy(self) -> str | None:
        """The server's ``maxmemory-policy``: from ``CONFIG GET``, or from ``INFO memory`` where
        CONFIG is disabled, renamed or not granted (managed Redis); None when neither tells."""
        with self._translated("eviction policy check"):
            try:
                return self._redis.config_get("maxmemory-policy")["maxmemory-policy"]
            except (redis.ResponseError, KeyError):
                pass
            try:
                return self._redis.info("memory").get("maxmemory_policy")
            except redis.ResponseError:
                return None

    def memory_bytes(self) -> int:
        """The Redis server's memory use (``used_memory``; every key, not only this prefix)."""
        with self._translated("info"):
            return int(self._redis.info("memory")["used_memory"])

    def close(self) -> None:
        self._drop_claims_connection()
        self._redis.close()

    def _evaluate(self, chunks: list[Sequence[Claim]]) -> list:
        """Pipelined EVALSHAs, a sweep and the claims per chunk; when Redis lacks a script, load both and resend
        (a sweep that ran before is harmless: it forgets only what the claims would drop)."""
        for _ in range(2):
            pipe = self._redis.pipeline(transaction=False)
            for chunk in chunks:
                for command in self._commands(chunk):
                    pipe.execute_command(*command)
            replies = pipe.execute(raise_on_error=False)
            if not any(isinstance(r, NoScriptError) for r in replies):
                break
            self._load_scripts()
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies

    def _load_scripts(self) -> None:
        self._redis.script_load(SWEEP)
        self._redis.script_load(CHECK_AND_SET)

    def _commands(self, claims: Sequence[Claim]) -> list[tuple]:
        """A chunk's commands: a sweep, budgeted at two keys per claim, that records the watermark of each
        lane (rule and source partition) the chunk claims from (its claims' lowest ``Claim.sweeps_until``:
        the watermark their batch began with) and forgets what the lowest lane's has passed; then the claims."""
        keys = [redis_key(self.key_prefix, c.key) for c in claims]
        args = [claim_argument(c.time, c.window, c.expires_at, c.now, quoted_owner(c.owner)) for c in claims]
        claimed = ("EVALSHA", SCRIPT_SHA, len(keys), *keys, self.key_prefix, *args)
        lanes: dict[tuple[str, str], int] = {}  # per rule and source partition, its claims' lowest sweeps_until
        for c, argument in zip(claims, args):
            lane, until = (rule_part(c.key), lane_of(argument.rpartition(",")[2])), c.sweeps_until()
            lanes[lane] = min(lanes.get(lane, until), until)
        swept = [part for (rule, lane), until in lanes.items() for part in (rule, lane, until)]
        return [
            ("EVALSHA", SWEEP_SHA, 0, self.key_prefix, 2 * len(claims), round(self.idle_timeout * 1000), *swept),
            claimed,
        ]

    @contextmanager
    def _translated(self, operation: str) -> Iterator[None]:
        """Turn redis-py errors into domain errors at this edge."""
        try:
            yield
        except OutOfMemoryError:
            raise StateUnavailable(
                f"redis at {self.address} is full (maxmemory reached under noeviction): {operation} "
                "refused, the refused claims not applied; retried as sweeps forget expired keys, "
                "or raise maxmemory"
            ) from None
        except redis.ResponseError as exc:
            if str(exc).startswith(BAD_STATE):
                raise StateFormatError(str(exc).removeprefix(BAD_STATE).strip()) from None
            raise StateUnavailable(f"redis {operation} failed at {self.address}: {exc}") from None
        except redis.AuthenticationError as exc:
            raise StateUnavailable(f"redis at {self.address} refused the credentials: {exc}") from None
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StateUnavailable(f"redis unreachable at {self.address} ({operation}): {_reason(exc)}") from None
        except redis.RedisError as exc:
            raise StateUnavailable(f"redis {operation} failed at {self.address}: {exc}") from None


def _judged(replies: list) -> list[Judgement]:
    """The judgements in the claims' replies (lists: 1, granted, or the emission a claim repeats);
    the sweeps' replies (counts) are skipped."""
    return [
        GRANTED if v == 1 else Judgement(decode(b"3|" + v)[0])
        for reply in replies
        if isinstance(reply, list)
        for v in reply
    ]


def quoted_owner(owner: str) -> str:
    """``owner`` percent-encoded as the script stores it (``quote``, nothing safe).

    An owner is a source position (``topic:partition:offset``): its head is quoted once and
    remembered, its decimal offset needs none, and quoting is done character by character, so
    the two together are the whole owner quoted."""
    head, _, tail = owner.rpartition(":")
    if head and tail.isascii() and tail.isdigit():
        return _quoted_head(head) + "%3A" + tail
    return quote(owner, safe="", errors="surrogatepass")


@lru_cache(maxsize=4096)
def _quoted_head(head: str) -> str:
    return quote(head, safe="", errors="surrogatepass")


def redis_key(prefix: str, key: str) -> bytes:
    """The Redis key of state key ``key``: UTF-8, lone surrogates kept (``surrogatepass``); lossless."""
    return (prefix + key).encode("utf-8", "surrogatepass")


def key_text(raw: bytes) -> str:
    """A Redis key as text, the inverse of :func:`redis_key` (a key no store wrote: undecodable bytes replaced)."""
    try:
        return raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace")


def redacted_url(url: str) -> str:
    """The URL as it may be shown: without its user and password, and secret parameters masked."""
    parts = urlsplit(redact_uri(url))
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _reason(exc: Exception) -> str:
    return first_line(exc)


def _glob_escape(text: str) -> str:
    return "".join(f"\\{ch}" if ch in "*?[]\\" else ch for ch in text)
