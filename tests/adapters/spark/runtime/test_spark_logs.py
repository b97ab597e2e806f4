"""Spark's own log goes to ``spark.log_file``; the terminal gets dedup's one-line messages.

A query that fails in a micro-batch makes Spark log every failed task and the query's end
with Java stack traces (over a thousand lines), and py4j log the ``foreachBatch`` exception
with its Python traceback. ``dedup run`` runs as its own process here, its stdout and stderr
together being the terminal.
"""

from __future__ import annotations

import logging
import re

import pytest

from adapters.spark.runtime import FILE_CONF, LOG_CONF, SparkLog
from adapters.spark.shared import SparkSetupError
from tests.adapters.spark.processes import DedupProcess

JAVA_TRACE = "\tat org.apache."
PY4J_TRACE = "There was an exception while executing the Python Proxy"
VALID = b'{"eventType": "APP", "uniqueValue": "a", "eventTime": "2026-01-01T00:00:00Z"}'


@pytest.mark.spark
@pytest.mark.parametrize("log_level", ["WARNING", "DEBUG"])
def test_a_failing_query_leaves_its_traces_in_the_spark_log_and_one_line_on_the_terminal(tmp_path, log_level):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part-0.jsonl").write_bytes(VALID + b"\nnot json\n")
    dedup = DedupProcess(
        tmp_path, env={"DEDUP_POLICIES__INVALID": "fail", "DEDUP_SPARK__RESTART": "none", "DEDUP_LOG_LEVEL": log_level}
    )
    dedup.start(bounded=True)
    assert dedup.wait() == 3
    terminal, log = dedup.output(), (tmp_path / "logs" / "spark.log").read_text()
    assert JAVA_TRACE in log and PY4J_TRACE in log
    stopped = [line for line in terminal.splitlines() if line.startswith("dedup: ")]
    assert stopped[-1].endswith(f"(Spark's own log: {tmp_path}/logs/spark.log)")
    if log_level == "DEBUG":  # Spark's lines on the terminal as well
        assert JAVA_TRACE in terminal and PY4J_TRACE in terminal
    else:
        assert JAVA_TRACE not in terminal and "Traceback" not in terminal
        assert terminal.count("\n") < 10, terminal


@pytest.mark.spark
@pytest.mark.parametrize("conf", [LOG_CONF, FILE_CONF], ids=lambda path: path.name)
def test_every_logger_the_log_settings_quiet_is_a_class_or_package_of_the_spark_release_in_use(spark, conf):
    """A logger named after a class Spark has moved quiets nothing (4.2 moved two of them)."""
    names = re.findall(r"^logger\.\w+\.name = (\S+)$", conf.read_text(), re.M)
    loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()

    def found(name: str) -> bool:
        if name.rpartition(".")[2][:1].isupper():  # a class
            return loader.getResource(name.replace(".", "/") + ".class") is not None
        return loader.getResources(name.replace(".", "/")).hasMoreElements()  # a package

    assert len(names) >= 4 and [name for name in names if not found(name)] == []


def test_the_log_file_is_created_with_its_directory_and_named_in_the_driver_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = SparkLog.at("logs dir/spark.log")
    assert log.file == tmp_path / "logs dir" / "spark.log" and log.file.exists()
    options = log.java_options()
    assert f'"-Dstreamdedup.log.file={log.file}"' in options and "-Dstreamdedup.log.console=off" in options
    assert "-Dstreamdedup.log.console=warn" in SparkLog.at("logs dir/spark.log", console=True).java_options()


def test_an_unwritable_log_file_is_refused_naming_the_setting(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(
        SparkSetupError,
        match=r"^invalid setting spark.log_file \(DEDUP_SPARK__LOG_FILE\): "
        r"cannot write .*file/spark.log",
    ):
        SparkLog.at(str(tmp_path / "file" / "spark.log"))


@pytest.mark.parametrize("console", [False, True])
def test_py4j_and_pyspark_records_go_to_the_file_and_to_the_terminal_only_with_console(tmp_path, console):
    names = ("py4j", "pyspark")
    kept = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).propagate) for name in names}
    try:
        SparkLog.at(str(tmp_path / "spark.log"), console).capture_python_loggers()
        SparkLog.at(str(tmp_path / "spark.log"), console).capture_python_loggers()  # once is enough
        logging.getLogger("py4j.clientserver").error("callback failed")
        assert (tmp_path / "spark.log").read_text().count("callback failed") == 1
        assert all(logging.getLogger(name).propagate is console for name in names)
    finally:
        for name, (handlers, propagate) in kept.items():
            logger = logging.getLogger(name)
            for handler in set(logger.handlers) - set(handlers):
                logger.removeHandler(handler)
                handler.close()
            logger.propagate = propagate
