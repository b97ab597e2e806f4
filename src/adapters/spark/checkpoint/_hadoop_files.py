"""Files of a checkpoint on any Hadoop file system, read and written through the running Spark's JVM.

Spark keeps a streaming checkpoint on whatever Hadoop ``FileSystem`` its location names: a
local path or ``file:`` URI, ``hdfs://``, ``s3a://``, ``abfs://``, ``viewfs://``… The engine's
own files there (``streamdedup/``: the manifest, the exactly-once identity, the owner's lease,
a migration's files) go through the same layer —
``Path(uri).getFileSystem(sparkContext.hadoopConfiguration())`` — so one code path serves
every location, local ones included. ``HadoopPath`` offers the part of ``pathlib.Path``
that this code uses; a relative location is resolved as Spark resolves it (against the
JVM's working directory).

``write_text`` never leaves a partial file in place of the target: the text goes to a hidden
file beside it (``.NAME.<random>.partial``), renamed over the target with ``FileContext.rename(…,
OVERWRITE)`` (a scheme without a ``FileContext`` implementation: delete, then rename, as
Spark's own checkpoint file manager does there). That rename is atomic on HDFS; on Hadoop's
local file system it is delete-then-rename, so a concurrent reader can miss the file for an
instant (``lease`` looks again), and a crash in between leaves only the partial file.

Failure behaviour: reading a missing file raises ``FileNotFoundError`` (as pathlib does);
any other failure of the file system raises ``StateUnavailable`` (transient: the checkpoint
is the Spark engine's state), never a Java exception.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from adapters.spark.shared import CorruptFile
from domain import StateUnavailable

PARTIAL = ".{}.{}.partial"  # hidden, and one per writer: two instances replacing one file do not mix


@dataclass(frozen=True)
class _FileSystem:
    """One Hadoop ``FileSystem`` and what is needed to talk to it (the JVM, its configuration).

    ``path_class``: Hadoop's ``Path``, looked up once (each step of ``jvm.org.apache…`` is a call
    into the JVM, and paths are made for every file a micro-batch touches)."""

    jvm: Any
    gateway: Any
    conf: Any
    fs: Any
    path_class: Any = None
    looked_up: dict = field(default_factory=dict, compare=False)  # JVM objects ``replace`` needs, made once

    def renames(self) -> tuple[Any, Any]:
        """The ``FileContext`` of this file system and the ``OVERWRITE`` rename option, looked up once."""
        if "renames" not in self.looked_up:
            hadoop = self.jvm.org.apache.hadoop.fs
            context = hadoop.FileContext.getFileContext(self.fs.getUri(), self.conf)
            overwrite = self.gateway.new_array(hadoop.Options.Rename, 1)
            overwrite[0] = hadoop.Options.Rename.OVERWRITE
            self.looked_up["renames"] = (context, overwrite)
        return self.looked_up["renames"]


class HadoopPath:
    """A file or directory on a Hadoop file system (see the module docstring)."""

    __slots__ = ("_fs", "_jpath")

    def __init__(self, jpath, fs: _FileSystem):
        self._jpath, self._fs = jpath, fs

    @classmethod
    def at(cls, location: str, spark=None) -> HadoopPath:
        """``location`` on its file system; ``spark``: a SparkSession (default: the running SparkContext)."""
        context = spark.sparkContext if spark is not None else _running_context()
        jvm, conf = context._jvm, context._jsc.hadoopConfiguration()
        path_class = jvm.org.apache.hadoop.fs.Path
        path = path_class(location)
        with translated(location):
            fs = path.getFileSystem(conf)
            return cls(fs.makeQualified(path), _FileSystem(jvm, context._gateway, conf, fs, path_class))

    def __truediv__(self, name: str) -> HadoopPath:
        path_class = self._fs.path_class or self._fs.jvm.org.apache.hadoop.fs.Path
        return HadoopPath(path_class(self._jpath, name), self._fs)

    def __str__(self) -> str:
        return self._jpath.toString()

    def __repr__(self) -> str:
        return f"HadoopPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HadoopPath) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    @property
    def name(self) -> str:
        return self._jpath.getName()

    @property
    def parent(self) -> HadoopPath:
        return HadoopPath(self._jpath.getParent(), self._fs)

    @property
    def suffix(self) -> str:
        stem, dot, suffix = self.name.rpartition(".")
        return dot + suffix if stem.strip(".") else ""

    @property
    def stem(self) -> str:
        return self.name[: len(self.name) - len(self.suffix)]

    def with_suffix(self, suffix: str) -> HadoopPath:
        return self.parent / (self.stem + suffix)

    def exists(self) -> bool:
        with translated(self):
            return bool(self._fs.fs.exists(self._jpath))

    def is_dir(self) -> bool:
        with translated(self):
            return self.exists() and bool(self._fs.fs.getFileStatus(self._jpath).isDirectory())

    def iterdir(self) -> list[HadoopPath]:
        """The directory's entries (hidden ones included, e.g. Hadoop's ``.NAME.crc``)."""
        with translated(self):
            return [HadoopPath(status.getPath(), self._fs) for status in self._fs.fs.listStatus(self._jpath)]

    def glob(self, pattern: str) -> list[HadoopPath]:
        """The directory's entries whose name matches ``pattern`` (one level, as ``pathlib``'s ``*.json``)."""
        return [p for p in self.iterdir() if fnmatchcase(p.name, pattern)] if self.exists() else []

    def read_bytes(self) -> bytes:
        with translated(self):
            stream = self._fs.fs.open(self._jpath)
            try:
                return bytes(self._fs.jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
            finally:
                stream.close()

    def read_text(self) -> str:
        return self.read_bytes().decode()

    def write_text(self, text: str) -> None:
        """Replace the file's content atomically (see the module docstring)."""
        partial = self.parent / PARTIAL.format(self.name, uuid.uuid4().hex[:8])
        with translated(self):
            out = self._fs.fs.create(partial._jpath, True)
            try:
                out.write(bytearray(text.encode()))
            finally:
                out.close()
        partial.replace(self)

    def replace(self, target: HadoopPath) -> None:
        """Rename this file over ``target`` (atomically where the file system can: see the module docstring)."""
        with translated(target):
            try:
                context, overwrite = self._fs.renames()
            except Exception as exc:
                if _java_class(exc) != "org.apache.hadoop.fs.UnsupportedFileSystemException":
                    raise
                self._fs.fs.delete(target._jpath, False)
                self._fs.fs.rename(self._jpath, target._jpath)
                return
            context.rename(self._jpath, target._jpath, overwrite)

    def mkdir(self, parents: bool = True, exist_ok: bool = True) -> None:
        """Create the directory and its parents (Hadoop's ``mkdirs``; an existing one is fine)."""
        with translated(self):
            self._fs.fs.mkdirs(self._jpath)

    def unlink(self, missing_ok: bool = False) -> None:
        with translated(self):
            if not self._fs.fs.delete(self._jpath, False) and not missing_ok:
                raise FileNotFoundError(str(self))

    def modified(self) -> float:
        """When the file was last written, in seconds since the epoch."""
        with translated(self):
            return self._fs.fs.getFileStatus(self._jpath).getModificationTime() / 1000

    def total_bytes(self) -> int:
        """Bytes of every file under this directory (0 when it does not exist)."""
        with translated(self):
            return int(self._fs.fs.getContentSummary(self._jpath).getLength()) if self.exists() else 0


def _running_context():
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is None:
        from adapters.spark.shared import SparkSetupError

        raise SparkSetupError("a checkpoint is read through Spark's Hadoop file systems: start a SparkSession first")
    return context


INTERRUPTS = (
    "java.nio.channels.ClosedByInterruptException",
    "java.io.InterruptedIOException",
    "java.lang.InterruptedException",
)


@contextmanager
def translated(where) -> Iterator[None]:
    """Java exceptions from the file system as ``FileNotFoundError`` or ``StateUnavailable``; an
    interrupt (a stopping query cancels its running micro-batch) stays as it is."""
    from py4j.protocol import Py4JJavaError

    try:
        yield
    except Py4JJavaError as exc:
        if _java_class(exc) in INTERRUPTS:
            raise  # the query is being stopped: Spark tells that from a failure by this exception
        if _java_class(exc) == "java.io.FileNotFoundException":
            raise FileNotFoundError(str(where)) from None
        message = str(exc.java_exception.getMessage() or _java_class(exc)).strip().splitlines()[0]
        if _java_class(exc) == "org.apache.hadoop.fs.ChecksumException":
            raise CorruptFile(f"checkpoint file system: {where}: {message}") from None
        raise StateUnavailable(f"checkpoint file system: {where}: {message}") from None


def _java_class(exc: BaseException) -> str | None:
    java = getattr(exc, "java_exception", None)
    return java.getClass().getName() if java is not None else None
