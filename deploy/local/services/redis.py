"""redis-server on a loopback port, for tests that need a real Redis (and to stop one)."""

from __future__ import annotations

from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .prerequisites import redis_server
from .process import LOOPBACK, Service


class RedisServer(Service):
    """redis-server on a loopback port; no persistence unless ``appendonly=True``.

    With ``appendonly=True`` data survives stop()/restart() and (with the default
    ``appendfsync="always"``) even kill().
    """

    NAME = "redis-server"

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        appendonly: bool = False,
        appendfsync: str = "always",
        extra_args: list[str] | None = None,
        detach: bool = False,
    ) -> None:
        workdir = Path(workdir).resolve()
        super().__init__(workdir, port, detach=detach, stdout_log=workdir / "stdout.log")
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.extra_args = list(extra_args or [])

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    def _command(self) -> list[str]:
        return [
            redis_server(),
            "--port", str(self.port),
            "--bind", LOOPBACK,
            "--dir", str(self.workdir),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.appendfsync,
            "--daemonize", "no",
            "--logfile", str(self.workdir / "redis.log"),
            *self.extra_args,
        ]  # fmt: skip

    def _log_files(self) -> list[Path]:
        return [self.workdir / "redis.log", self.stdout_log]

    def _ready(self) -> bool:
        # one try: redis-py's default retries (with backoff) made a check last up to 15 s
        client = redis.Redis(
            host=LOOPBACK, port=self.port, socket_connect_timeout=1, socket_timeout=1, retry=Retry(NoBackoff(), 0)
        )
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()
