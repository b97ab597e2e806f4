"""The Spark engine's Java sources: each Java package is named after the Python package it
serves (``streamdedup.stream`` serves ``adapters.spark.stream``), lives in the directory of
its name, and is compiled into the jar it belongs to; every class the code and the docs name
by its Java name is one of them (issue 55)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adapters.spark.runtime import (
    FORKLESS_LOCAL_FILES,
    PLAIN_EVENT_CLASS,
    SOURCE_ROOT,
    TRAILING_CONTENT_CLASS,
    operator_sources,
)

REPO = Path(__file__).resolve().parents[3]
JVM = SOURCE_ROOT / "adapters" / "spark" / "jvm"
JAVA_PACKAGES = JVM / "streamdedup"
# A class named by its Java name, a py4j package (``spark._jvm.streamdedup.stream``), a source path.
CLASS_NAME = re.compile(r"(?<![\w.-])streamdedup\.([a-z]\w*)\.([A-Z]\w*)")
JVM_PACKAGE = re.compile(r"\bjvm\.streamdedup\.(\w+)")
SOURCE_PATH = re.compile(r"\bjvm/streamdedup/(\w+)/(?:(\w+)\.java)?")


def java_sources() -> list[Path]:
    return sorted(JAVA_PACKAGES.rglob("*.java"))


def test_each_java_package_is_its_directory_and_named_after_a_python_package_of_the_engine():
    packages = {source.parent for source in java_sources()}
    assert {p.name for p in packages} == {"stream", "checkpoint", "output", "runtime"}
    for source in java_sources():
        package = source.parent.relative_to(JVM).as_posix().replace("/", ".")
        assert source.read_text().startswith(f"package {package};\n"), source
    for package in packages:
        assert (SOURCE_ROOT / "adapters" / "spark" / package.name / "__init__.py").exists(), package


def test_the_operator_jar_has_the_kafka_writer_only_with_the_connector_and_never_the_local_file_system():
    def packages(kafka: bool) -> set[str]:
        return {source.parent.name for source in operator_sources(kafka=kafka)}

    assert packages(kafka=False) == {"stream", "checkpoint"}
    assert packages(kafka=True) == {"stream", "checkpoint", "output"}
    assert set(operator_sources(kafka=True)) == {s for s in java_sources() if s.parent.name != "runtime"}


@pytest.mark.parametrize("name", [PLAIN_EVENT_CLASS, TRAILING_CONTENT_CLASS, *FORKLESS_LOCAL_FILES.values()])
def test_the_classes_the_engine_names_are_its_sources(name):
    assert (JVM / (name.replace(".", "/") + ".java")).exists()


def named_files() -> list[Path]:
    code = [p for top in ("src", "tests", "bench", "deploy", "scripts") for p in (REPO / top).rglob("*.py")]
    return sorted([*code, *(REPO / "docs").rglob("*.md"), REPO / "README.md"])


def test_every_java_name_in_the_code_and_the_docs_is_a_class_or_package_of_the_sources():
    unknown = []
    for path in named_files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            where = f"{path.relative_to(REPO)}:{number}"
            for package, name in CLASS_NAME.findall(line):
                if not (JAVA_PACKAGES / package / f"{name}.java").exists():
                    unknown.append(f"{where}: streamdedup.{package}.{name}")
            for package in JVM_PACKAGE.findall(line):
                if not (JAVA_PACKAGES / package).is_dir():
                    unknown.append(f"{where}: jvm.streamdedup.{package}")
            for package, name in SOURCE_PATH.findall(line):
                if not (JAVA_PACKAGES / package / (f"{name}.java" if name else "")).exists():
                    unknown.append(f"{where}: jvm/streamdedup/{package}/{name}")
    assert not unknown, "names of no Java source:\n" + "\n".join(unknown)
