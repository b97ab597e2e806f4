"""Process supervision for the local services: one ``Service`` base class and its helpers.

A ``Service`` is one server process on loopback ports with a working directory of its own.
It starts the process, waits until the subclass says it is ready, re-picks ports that turn
out to be taken (unless they were given explicitly or the service already ran on them:
clients hold its address), and stops it with SIGTERM, then SIGKILL. Subclasses say what to
run (``_command``), what to prepare before (``_prepare``) and when it is ready (``_ready``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
BIND_ERRORS = ("Address already in use", "BindException")


class ServiceError(RuntimeError):
    """A local service could not be started, reached or stopped."""


class PortInUse(Exception):
    """The process exited because one of its ports was taken."""


def find_free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def pid_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def terminate(pid: int, proc: subprocess.Popen | None, timeout: float, sig: int = signal.SIGTERM) -> None:
    """Send ``sig``; SIGKILL if still alive after ``timeout`` s; reap our own child (``proc``).

    Raises ServiceError if the process outlives SIGKILL by 10 s."""

    def gone(wait: float) -> bool:
        if proc is None:
            return wait_until(lambda: not pid_alive(pid), wait)
        try:
            proc.wait(timeout=wait)
            return True
        except subprocess.TimeoutExpired:
            return False

    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        gone(0.5)
        return
    if gone(timeout if sig != signal.SIGKILL else 10):
        return
    if sig != signal.SIGKILL:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if gone(10):
            return
    raise ServiceError(f"process {pid} did not exit after SIGKILL")


def tail(path: Path, offset: int = 0, max_chars: int = 4000) -> str:
    """The end of a log file from byte ``offset`` on ("" if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return ""
    return data.decode(errors="replace")[-max_chars:]


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically (written aside, then renamed over)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def pdeathsig_prefix(detach: bool) -> list[str]:
    """``setpriv --pdeathsig SIGKILL --``: the child dies with the thread that started it."""
    if detach:
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "SIGKILL", "--"] if setpriv else []


class Service:
    """One server process on loopback ports, supervised from this Python process.

    ``workdir/state.json`` keeps the ports (``_state()``), so a later object on the same
    workdir reuses them. Unless ``detach=True`` the process gets SIGKILL when the Python
    thread that started it exits (Linux parent-death signal), so a crashed test run leaves
    nothing behind; ``detach=True`` is for processes another command stops.
    """

    NAME = "service"
    POLL_SECONDS = 0.05

    def __init__(self, workdir: Path, port: int | None, *, detach: bool, stdout_log: Path) -> None:
        self.workdir = Path(workdir).resolve()
        self.detach = detach
        self.state_file = self.workdir / "state.json"
        self.stdout_log = stdout_log
        # Ports given explicitly are never changed; persisted or picked ones may be re-picked
        # if they turn out to be taken at the first start of this object.
        self._ports_fixed = port is not None
        self.port: int = port or self._saved().get("port") or find_free_port()
        self._proc: subprocess.Popen | None = None
        self._started_once = False
        self.last_start_seconds: float | None = None

    # -- what a subclass says
    def _command(self) -> list[str]:
        raise NotImplementedError

    def _ready(self) -> bool:
        raise NotImplementedError

    def _environment(self) -> dict[str, str] | None:
        """The process's environment; ``None``: this process's own."""
        return None

    def _prepare(self) -> None:
        """Before each launch: directories, config files, state.json."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        write_json(self.state_file, self._state())

    def _state(self) -> dict[str, Any]:
        return {"port": self.port}

    def _log_files(self) -> list[Path]:
        """The logs whose new lines explain a failed start."""
        return [self.stdout_log]

    def _pick_new_ports(self) -> None:
        self.port = find_free_port()

    def _exited(self, clean: bool) -> None:
        """After the process exited (stopped, killed or failed to start)."""

    # -- state
    def _saved(self) -> dict[str, Any]:
        return read_json(self.state_file)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- lifecycle
    def start(self, timeout: float = 30) -> Service:
        """Start and wait until ready; raises ServiceError (with the log's last lines)."""
        if self.is_running():
            return self
        started = time.monotonic()
        attempts = 1 if (self._ports_fixed or self._started_once) else 3
        for attempt in range(attempts):
            try:
                self._launch(started + timeout)
                break
            except PortInUse:
                if attempt == attempts - 1:
                    raise ServiceError(f"{self.NAME}: port(s) in use ({self._state()}); see {self.workdir}") from None
                self._pick_new_ports()
        self._started_once = True
        self.last_start_seconds = time.monotonic() - started
        return self

    def _launch(self, deadline: float) -> None:
        self._prepare()
        offsets = {log: file_size(log) for log in self._log_files()}
        self.stdout_log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.stdout_log, "ab") as out:
            self._proc = subprocess.Popen(
                pdeathsig_prefix(self.detach) + self._command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=self._environment(),
                start_new_session=True,
                close_fds=True,
            )
        while not self._ready():
            code = self._proc.poll()
            if code is not None:
                self._proc = None
                self._exited(clean=False)
                self._fail(f"exited with code {code} during start-up", offsets)
            if time.monotonic() >= deadline:
                self.kill()
                self._fail("not ready in time", offsets)
            time.sleep(self.POLL_SECONDS)

    def _fail(self, what: str, offsets: dict[Path, int]) -> None:
        text = "\n".join(tail(log, offset) for log, offset in offsets.items())
        if any(e in text for e in BIND_ERRORS):
            raise PortInUse()
        raise ServiceError(f"{self.NAME} {what}; last log lines:\n{text[-4000:]}")

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL after ``timeout`` seconds."""
        if self._proc is not None:
            terminate(self._proc.pid, self._proc, timeout)
            clean = self._proc.returncode in (0, 143, -signal.SIGTERM)
            self._proc = None
            self._exited(clean)

    def kill(self) -> None:
        """SIGKILL: an unclean crash, for fault tests. start() afterwards recovers."""
        if self._proc is not None:
            terminate(self._proc.pid, self._proc, 0, signal.SIGKILL)
            self._proc = None
            self._exited(clean=False)

    def restart(self, timeout: float = 30, stop_timeout: float = 30) -> Service:
        """stop() then start() on the same ports and data."""
        self.stop(stop_timeout)
        self._started_once = True  # keep the ports: clients hold this address
        return self.start(timeout)

    def __enter__(self) -> Service:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
