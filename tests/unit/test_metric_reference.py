"""README's metric reference is the catalog's: every exported metric, its type, labels and meaning."""

import re
from pathlib import Path

from adapters.metrics.catalog import CATALOG

README = Path(__file__).resolve().parents[2] / "README.md"


def reference_rows() -> dict[str, tuple[str, str, str]]:
    text = README.read_text()
    table = text.split("<!-- metric reference: tests/unit/test_metric_reference.py -->", 1)[1].strip()
    rows = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("| `"):
            break
        name, kind, labels, meaning = (cell.strip() for cell in line.strip("|").split("|"))
        rows[name.strip("`")] = (kind, labels, meaning)
    return rows


def test_the_readme_lists_every_metric_of_the_catalog_as_exported():
    expected = {m.exported: (m.kind, ", ".join(f"`{label}`" for label in m.labels) or "–", m.help)
                for m in CATALOG.values()}
    assert reference_rows() == expected


def test_every_catalog_name_is_a_valid_prometheus_name():
    assert all(re.fullmatch(r"dedup_[a-z_]+", m.exported) for m in CATALOG.values())
