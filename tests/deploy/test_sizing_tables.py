"""The state sizing's figures are one table, written in two places: the operators' page
(docs/operations/scaling-and-sizing.md) and the reasoning beside the manifests
(deploy/k8s/SIZING.md). Both must say the same, and every command a row names must exist.

Each check runs on the real files, and once on a deliberately broken sample to show it can fail.
"""

from __future__ import annotations

import re

import pytest

from tests.deploy import checkers as c

PAGES = (c.REPO / "docs/operations/scaling-and-sizing.md", c.DEPLOY / "k8s/SIZING.md")
BEGIN = re.compile(r"^<!-- sizing-table: .*-->$", re.M)
END = "<!-- sizing-table: end -->"


def sizing_table(text: str) -> str:
    """The table between the two markers (ValueError when a marker is missing)."""
    found = BEGIN.search(text)
    if found is None or END not in text[found.end() :]:
        raise ValueError("no sizing table (its markers are missing)")
    return text[found.end() : text.index(END, found.end())].strip()


def commands_missing(table: str) -> list[str]:
    """The benchmark scripts a row names that the repository does not have."""
    return sorted({s for s in re.findall(r"bench/[\w/]+\.py", table) if not (c.REPO / s).is_file()})


def test_both_pages_hold_the_same_sizing_table():
    operations, manifests = (sizing_table(page.read_text()) for page in PAGES)
    assert operations.count("\n|") >= 5, "the table has its rows"
    assert operations == manifests


def test_every_command_the_sizing_names_exists():
    table = sizing_table(PAGES[0].read_text())
    assert re.findall(r"bench/[\w/]+\.py", table)
    assert commands_missing(table) == []


def test_the_checks_can_fail():
    table = sizing_table(PAGES[0].read_text())
    text = PAGES[1].read_text()
    a_figure_changed = re.sub(r"\d+\.\d+ bytes", "110.0 bytes", text, count=1)  # the files per live key
    assert a_figure_changed != text and sizing_table(a_figure_changed) != table
    assert commands_missing(table + "\n| x | y | `bench/no_such_bench.py` |") == ["bench/no_such_bench.py"]
    with pytest.raises(ValueError):
        sizing_table(PAGES[1].read_text().replace(END, ""))
