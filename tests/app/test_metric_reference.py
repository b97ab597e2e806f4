"""The site's metric reference is the catalog's: every exported metric, its type, labels and meaning."""

import re
from pathlib import Path

from adapters.metrics import CATALOG
from app import metrics_reference

DOCS = Path(__file__).resolve().parents[2] / "docs"


def reference_rows() -> dict[str, tuple[str, str, str]]:
    rows = {}
    for line in metrics_reference().splitlines()[2:]:
        name, kind, labels, meaning = (cell.strip() for cell in line.strip("|").split("|"))
        rows[name.strip("`")] = (kind, labels, meaning)
    return rows


def test_the_metric_reference_lists_every_metric_of_the_catalog_as_exported():
    expected = {
        m.exported: (m.kind, ", ".join(f"`{label}`" for label in m.labels) or "–", m.help) for m in CATALOG.values()
    }
    assert reference_rows() == expected
    assert "<!-- generated: metrics -->" in (DOCS / "reference" / "metrics.md").read_text()


def test_every_catalog_name_is_a_valid_prometheus_name():
    assert all(re.fullmatch(r"dedup_[a-z_]+", m.exported) for m in CATALOG.values())
