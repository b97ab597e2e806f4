"""The project's Python code as one zip, for executors that run in other processes.

On a cluster, executors run Python for the parts of the plan written in Python (the JSONL
source's line numbering, the Redis state's ``mapInArrow``). They must run the driver's code,
never whatever copy happens to be installed or checked out where they run, so the driver ships
its own packages with the job (``spark.submit.pyFiles``): PySpark puts the zip ahead of
site-packages on each executor's ``sys.path``. The zip is built once per content in the cache
directory, named by a hash of the files it holds.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

from adapters.spark.runtime._jars import cache_dir
from adapters.spark.shared import SparkSetupError

PACKAGES = ("domain", "adapters", "app")
SOURCE_ROOT = Path(__file__).resolve().parents[3]
ARCHIVE_PREFIX = "streamdedup-code-"


def _files(root: Path) -> list[Path]:
    return sorted(p for package in PACKAGES for p in (root / package).rglob("*.py") if "__pycache__" not in p.parts)


def code_archive(root: Path = SOURCE_ROOT) -> Path:
    """The zip of ``PACKAGES`` as found under ``root`` (the directory this code runs from)."""
    files = _files(root)
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    name = f"{ARCHIVE_PREFIX}{digest.hexdigest()[:12]}.zip"
    for directory in (cache_dir() / "python", Path(tempfile.gettempdir()) / "streamdedup-python"):
        archive = directory / name
        if archive.exists():
            return archive
        try:
            _write(archive, root, files)
            return archive
        except OSError:  # a cache this user cannot write (an image's): the temporary directory
            continue
    raise SparkSetupError(
        f"cannot write the code archive {name} for the executors in {cache_dir() / 'python'} or {tempfile.gettempdir()}"
    )


def _write(archive: Path, root: Path, files: list[Path]) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zip_file:
        for path in files:
            zip_file.write(path, path.relative_to(root))
    partial.replace(archive)
