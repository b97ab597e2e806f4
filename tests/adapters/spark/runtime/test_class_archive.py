"""The local driver's class-data archive: named by the driver's class path and JVM, used when
written, written when asked, and mapped by the drivers of this suite (scripts/bootstrap wrote it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adapters.spark.runtime import ARCHIVE_MODE, class_archive, local_class_archive, partial_archive, with_class_archive

pytest.importorskip("pyspark")

SETTINGS = {"spark.driver.extraClassPath": "/opt/a.jar", "spark.driver.extraJavaOptions": "-Dx=1"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMDEDUP_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(ARCHIVE_MODE, raising=False)
    return tmp_path / "cache"


def test_without_an_archive_the_settings_are_left_alone(cache):
    assert with_class_archive(SETTINGS) == SETTINGS


def test_a_written_archive_is_named_on_the_driver_s_command_line_and_an_unusable_one_is_silent(cache):
    archive = class_archive(SETTINGS)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    options = with_class_archive(SETTINGS)["spark.driver.extraJavaOptions"].split()
    assert options[0] == "-Dx=1" and f"-XX:SharedArchiveFile={archive}" in options
    assert "-Xlog:cds=off" in options and "-Xlog:cds+dynamic=off" in options


def test_switched_off_a_written_archive_is_not_named(cache, monkeypatch):
    archive = class_archive(SETTINGS)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    monkeypatch.setenv(ARCHIVE_MODE, "off")
    assert with_class_archive(SETTINGS) == SETTINGS


def test_another_class_path_or_jvm_looks_for_another_archive(cache, monkeypatch, tmp_path):
    first = class_archive(SETTINGS)
    assert class_archive(SETTINGS) == first and first.parent == cache / "class-archive"
    assert class_archive({**SETTINGS, "spark.driver.extraClassPath": "/opt/b.jar"}) != first
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert class_archive(SETTINGS) != first
    monkeypatch.delenv("SPARK_CONF_DIR")
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_bytes(b"another jvm")
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    assert class_archive(SETTINGS) != first


def test_asked_to_write_the_driver_dumps_its_classes_to_a_partial_file_of_this_process(cache, monkeypatch):
    monkeypatch.setenv(ARCHIVE_MODE, "write")
    archive = class_archive(SETTINGS)
    options = with_class_archive(SETTINGS)["spark.driver.extraJavaOptions"].split()
    assert f"-XX:ArchiveClassesAtExit={partial_archive(archive, os.getpid())}" in options
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in options)


@pytest.mark.spark
def test_the_suite_s_local_driver_maps_the_archive_bootstrap_wrote(spark):
    """scripts/bootstrap wrote the archive of a local driver with the engine's defaults, and the
    JVM of this suite's session maps it: it took the archive, it did not just name it."""
    archive = local_class_archive()
    assert archive.is_file(), f"no class-data archive at {archive}: run scripts/bootstrap"
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert str(archive) in maps
