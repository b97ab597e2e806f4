"""The checks Python projects run, in the suite: ruff's lint and format, and mypy over ``src``.

Their settings are in pyproject.toml (``[tool.ruff]``, ``[tool.mypy]``); each test prints what
the tool found, so a failing run says what to mend (``ruff check --fix``, ``ruff format``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CHECKED = ["src", "tests", "bench", "scripts", "deploy"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    "command",
    [["check", *CHECKED], ["format", "--check", *CHECKED]],
    ids=["lint", "format"],
)
def test_ruff_finds_nothing(command):
    done = run(str(BIN / "ruff"), *command)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing_in_src():
    """Strict on the domain, the adapters' and the app's annotations checked (pyproject.toml)."""
    done = run(str(BIN / "mypy"))
    assert done.returncode == 0, done.stdout + done.stderr
