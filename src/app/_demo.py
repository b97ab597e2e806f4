"""``dedup demo``: a generated stream whose counts are known, run through an engine, checked.

The Spark engine (the default) reads a directory of JSONL files, one file per micro-batch,
the late records in the last file (see ``app._generator.generate_parts``), and writes the
unique events and dead letters as directories of part files. The memory engine reads and
writes single files. Each run starts afresh: the demo's own inputs, outputs and checkpoint
under ``--out`` are replaced.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from app._generator import Expected, StreamSpec, generate, generate_parts
from domain import Accounting

SPARK_PARTS = 6


@dataclass
class Demo:
    """What to run (the settings), what must come out (``expected``), and where it goes."""

    settings: dict
    expected: Expected
    outputs: dict[str, Path] = field(default_factory=dict)

    def describe(self, where: Path) -> str:
        e = self.expected
        return (
            f"dedup demo: {e.records:,} records generated in {where} "
            f"({e.duplicates:,} duplicates, {e.invalid} invalid, {e.late} late)"
        )


def prepare(engine: str, out: Path, spec: StreamSpec) -> tuple[Demo, Path]:
    """Write the input under ``out`` (clearing an earlier run); returns the demo and its input path."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    return _prepare_spark(out, spec) if engine == "spark" else _prepare_memory(out, spec)


def _prepare_memory(out: Path, spec: StreamSpec) -> tuple[Demo, Path]:
    records, expected = generate(spec)
    source = out / "input.jsonl"
    source.write_bytes(b"".join(r + b"\n" for r in records))
    outputs = {name: out / f"{name}.jsonl" for name in ("output", "dead-letters")}
    for path in outputs.values():
        path.unlink(missing_ok=True)
    settings = {
        "engine": "memory",
        "source": f"file:{source}",
        "sink": f"file:{outputs['output']}",
        "dlq": f"file:{outputs['dead-letters']}",
    }
    return Demo(settings, expected, outputs), source


def _prepare_spark(out: Path, spec: StreamSpec) -> tuple[Demo, Path]:
    parts, expected = generate_parts(spec, SPARK_PARTS)
    source, checkpoint = out / "input", out / "checkpoint"
    outputs = {name: out / name for name in ("output", "dead-letters")}
    for directory in (source, checkpoint, *outputs.values()):
        shutil.rmtree(directory, ignore_errors=True)
    write_parts(source, parts)
    settings = {
        "engine": "spark",
        "source": f"file:{source}?maxFilesPerTrigger=1",
        "sink": f"file:{outputs['output']}",
        "dlq": f"file:{outputs['dead-letters']}",
        "spark": {"checkpoint": str(checkpoint), "available_now": True, "log_file": str(out / "spark.log")},
        "log_level": "ERROR",
    }  # the demo's checkpoint is new on purpose: no "empty state" warning
    return Demo(settings, expected, outputs), source


def write_parts(directory: Path, parts: list[list[bytes]]) -> list[Path]:
    """One JSONL file per part, modification times in part order (the order Spark reads them in)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, records in enumerate(parts):
        path = directory / f"part-{index:04d}.jsonl"
        path.write_bytes(b"".join(r + b"\n" for r in records))
        os.utime(path, (1_000_000 + index, 1_000_000 + index))
        paths.append(path)
    return paths


def report(totals: Accounting, expected: dict[str, int], outputs: dict[str, Path]) -> int:
    """Print expected against reported counts; 0 when every count matches and the accounting balances."""
    got = totals.as_dict()
    print(f"{'count':<16}{'expected':>10}{'got':>10}", file=sys.stderr)
    for name, want in expected.items():
        mark = "" if got[name] == want else "   <-- MISMATCH"
        print(f"{name:<16}{want:>10,}{got[name]:>10,}{mark}", file=sys.stderr)
    ok = all(got[name] == want for name, want in expected.items()) and totals.balanced
    print(
        f"dedup demo: {'OK' if ok else 'FAILED'}: unique events in {outputs['output']}, "
        f"dead letters in {outputs['dead-letters']}",
        file=sys.stderr,
    )
    return 0 if ok else 1
