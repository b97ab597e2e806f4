"""Where Spark's own log goes: a file, not the terminal.

Spark's JVM logs warnings and errors with their Java stack traces (a failing query: over a
thousand lines per attempt), and py4j logs every exception raised in a ``foreachBatch``
call with its traceback. ``dedup`` says in one line what went wrong; the detail goes to
``spark.log_file``: the JVM's log through log4j2 (``conf/log4j2-file.properties``: warnings
and errors, rolled at 10 MB, five files kept) and the Python loggers ``py4j`` and
``pyspark`` through a handler on the same file, in the program's log format (secrets
redacted as in every log line). With ``console`` (``log_level`` DEBUG) both also reach stderr.

Only a JVM this process starts reads the log4j2 settings: under spark-submit the JVM runs
already and keeps its own (``--driver-java-options -Dlog4j2.configurationFile=…``); the
Python loggers still go to the file.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from logging.handlers import WatchedFileHandler
from pathlib import Path

from adapters.spark.shared import SparkSetupError

FILE_CONF = Path(__file__).resolve().parent / "conf" / "log4j2-file.properties"
PYTHON_LOGGERS = ("py4j", "pyspark")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"  # when the program configured none


@dataclass(frozen=True)
class SparkLog:
    """Spark's log file (absolute) and whether the terminal gets Spark's lines too."""

    file: Path
    console: bool = False

    @classmethod
    def at(cls, location: str, console: bool = False) -> SparkLog:
        """The log at ``location`` (relative to the working directory), its directory created;
        ``SparkSetupError`` naming the setting when it cannot be written."""
        path = Path(location).expanduser().absolute()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.open("a").close()
        except OSError as exc:
            raise SparkSetupError(
                f"invalid setting spark.log_file (DEDUP_SPARK__LOG_FILE): cannot write {path}: {exc.strerror or exc}"
            ) from None
        return cls(path, console)

    def java_options(self) -> str:
        """The driver JVM's options that send its log4j2 log to the file (quoted for Spark's split)."""
        return (
            f'-Dlog4j2.configurationFile={FILE_CONF.as_uri()} "-Dstreamdedup.log.file={self.file}" '
            f"-Dstreamdedup.log.console={'warn' if self.console else 'off'}"
        )

    def capture_python_loggers(self) -> None:
        """py4j's and pyspark's records into the file; to the terminal as well only with ``console``."""
        handler = None
        for name in PYTHON_LOGGERS:
            logger = logging.getLogger(name)
            logger.propagate = self.console
            if not any(getattr(h, "baseFilename", None) == str(self.file) for h in logger.handlers):
                handler = handler or self._handler()
                logger.addHandler(handler)

    def _handler(self) -> logging.Handler:
        """A handler on the file, reopened when log4j2 rolls it over; the program's log format."""
        handler = WatchedFileHandler(self.file)
        formats = [h.formatter for h in logging.getLogger().handlers if h.formatter]
        handler.setFormatter(formats[0] if formats else logging.Formatter(FORMAT))
        return handler
