"""The domain imports nothing outside the standard library (and itself)."""

import ast
import sys
from pathlib import Path

DOMAIN = Path(__file__).resolve().parents[2] / "src" / "domain"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_domain_imports_only_the_standard_library():
    files = sorted(DOMAIN.rglob("*.py"))
    assert len(files) >= 8
    offenders = {
        f"{path.name}: {name}"
        for path in files
        for name in imported_modules(path)
        if name != "domain" and name not in sys.stdlib_module_names and name != "__future__"
    }
    assert offenders == set()


def test_the_check_catches_a_third_party_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import pyspark\nfrom redis import Redis\nimport json\n")
    assert imported_modules(bad) - set(sys.stdlib_module_names) == {"pyspark", "redis"}
