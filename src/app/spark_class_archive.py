"""``python -m app.spark_class_archive``: write the local Spark driver's class-data archive.

A driver that maps the archive starts its first micro-batch seconds sooner
(``adapters.spark.runtime._class_archive``). The archive is written by a small ``dedup demo``
(500 events through the Spark engine, local mode) whose driver JVM dumps the classes it loaded
when it exits. ``scripts/bootstrap`` runs this; it does nothing when the archive for the
current JVM and jars is there already (``--force`` writes it again; ``--quiet`` prints nothing
then). Archives of other JVMs or
jars are removed. Exits 1 with one line if the demo fails (the engine then runs without one).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.spark.runtime import ARCHIVE_MODE, PARTIAL, local_class_archive, partial_archive

UP_TO_DATE = "class-data archive up to date"
JVM_EXIT_TIMEOUT = 300  # seconds for the demo's JVM to write the archive after its driver ended


def write(force: bool = False) -> str:
    """Write the archive unless it is there; returns what was done, in one line."""
    archive = local_class_archive()
    if archive.is_file() and not force:
        return f"{UP_TO_DATE}: {archive}"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="streamdedup-class-archive-") as work:
        demo = subprocess.Popen(
            [sys.executable, "-m", "app", "demo", "--events", "500", "--out", str(Path(work) / "demo")],
            env={**os.environ, ARCHIVE_MODE: "write"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        output, _ = demo.communicate()
        partial = partial_archive(archive, demo.pid)
        if demo.returncode != 0:
            last = output.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise SystemExit(f"class-data archive not written: the demo failed ({last[0]})")
        _wait_for_the_jvm_writing(partial)
    if not partial.is_file():
        raise SystemExit(f"class-data archive not written: the demo's JVM left no {partial.name}")
    partial.replace(archive)
    for other in archive.parent.iterdir():
        if other != archive and (other.suffix == ".jsa" or other.name.endswith(PARTIAL)):
            other.unlink(missing_ok=True)
    return f"class-data archive written in {time.monotonic() - started:.0f}s: {archive}"


def _wait_for_the_jvm_writing(partial: Path) -> None:
    """The driver's JVM outlives its Python process (it exits once its stdin closes) and writes
    the archive as it exits: wait until no process names ``partial`` on its command line."""
    deadline = time.monotonic() + JVM_EXIT_TIMEOUT
    needle = str(partial).encode()
    while time.monotonic() < deadline:
        if not any(needle in cmdline for cmdline in _command_lines()):
            return
        time.sleep(0.2)
    raise SystemExit(f"class-data archive not written: the demo's JVM still runs after {JVM_EXIT_TIMEOUT}s")


def _command_lines() -> list[bytes]:
    lines = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            lines.append((proc / "cmdline").read_bytes())
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return lines


def command(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.spark_class_archive", description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="write the archive even if it is there")
    parser.add_argument("--quiet", action="store_true", help="print nothing when the archive is up to date")
    args = parser.parse_args(argv)
    done = write(args.force)
    if not (args.quiet and done.startswith(UP_TO_DATE)):
        print(done)
    return 0


if __name__ == "__main__":
    sys.exit(command())
