"""The code archive the driver ships to executors: every module of the packages, named by content."""

from __future__ import annotations

import sys
import zipfile

import pytest

from adapters.spark.runtime import ARCHIVE_PREFIX, PACKAGES, SOURCE_ROOT, code_archive

archive_module = sys.modules[code_archive.__module__]  # the door's name is the function; its module is patched


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STREAMDEDUP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_it_holds_every_module_of_the_packages_and_nothing_else(cache):
    archive = code_archive()
    assert archive.parent == cache / "python" and archive.name.startswith(ARCHIVE_PREFIX)
    names = set(zipfile.ZipFile(archive).namelist())
    want = {
        str(p.relative_to(SOURCE_ROOT))
        for package in PACKAGES
        for p in (SOURCE_ROOT / package).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert names == want and "domain/_dedup.py" in names and "adapters/spark/_engine.py" in names


def test_a_changed_module_gets_a_new_archive_and_the_same_code_the_same(cache, tmp_path):
    tree = tmp_path / "src"
    for package in PACKAGES:
        (tree / package).mkdir(parents=True)
        (tree / package / "__init__.py").write_text(f"NAME = {package!r}\n")
    first, again = code_archive(tree), code_archive(tree)
    (tree / "domain" / "__init__.py").write_text("NAME = 'changed'\n")
    changed = code_archive(tree)
    assert first == again and changed != first
    assert zipfile.ZipFile(changed).read("domain/__init__.py") == b"NAME = 'changed'\n"


def test_a_cache_it_cannot_write_falls_back_to_the_temporary_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(archive_module, "cache_dir", lambda: tmp_path / "file-not-dir" / "cache")
    (tmp_path / "file-not-dir").write_text("a file, so no directory can be made under it")
    monkeypatch.setattr(archive_module.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    assert code_archive().parent == tmp_path / "tmp" / "streamdedup-python"


def test_the_session_adds_it_to_the_configured_python_files(cache):
    from adapters.spark.runtime import python_files

    assert python_files({"spark.submit.pyFiles": "/jobs/deps.zip"}) == ["/jobs/deps.zip", str(code_archive())]
    assert python_files({}) == [str(code_archive())]


@pytest.mark.parametrize(
    "master, loopback",
    [
        ("local[2]", True),
        ("spark://127.0.0.1:7077", True),
        ("spark://localhost:7077", True),
        ("spark://10.0.0.5:7077", False),
        ("k8s://https://kubernetes.default.svc:443", False),
    ],
)
def test_the_driver_binds_to_loopback_only_for_a_master_on_this_machine(master, loopback):
    from adapters.spark.runtime import on_loopback

    assert on_loopback(master) is loopback
