"""The docs' charts: a ``<!-- plot: … -->`` line under a table of measured figures becomes a
Mermaid chart of that table as the site builds (``scripts/mkdocs_hooks.py``); the benches print
their tables with those lines, so a chart is drawn from the figures a run printed, never kept as
a picture in the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import checkpoint_cost_bench, latency_bench
from scripts.mkdocs_hooks import PLOT, axis_top, plot

REPO_ROOT = Path(__file__).resolve().parents[2]
TABLE = """Before.

| keys | memory: state | note |
|---|---|---|
| 1 M | 6.1 MB | first |
| 2 M | **1,043.7 MB** (snapshot) | second |

<!-- plot: line | state in the checkpoint | keys | memory: state | MB -->
After.
"""


def charts(markdown: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)```", plot(markdown), re.S)


def test_a_plot_line_becomes_a_chart_of_the_table_above_it():
    (chart,) = charts(TABLE)
    assert chart.splitlines() == [
        "xychart-beta",
        '    title "state in the checkpoint"',
        '    x-axis ["1 M", "2 M"]',
        '    y-axis "MB" 0 --> 1500',
        "    line [6.1, 1043.7]",
    ]
    assert "<!-- plot" not in plot(TABLE) and "Before." in plot(TABLE) and "After." in plot(TABLE)


def test_sideways_bars_name_each_point_by_several_columns():
    text = TABLE.replace("line | state in the checkpoint | keys |", "hbar | state | keys + note |")
    (chart,) = charts(text)
    assert chart.startswith('%%{init: {"xyChart": {"width": 900}}}%%\nxychart-beta horizontal\n')
    assert '["1 M, first", "2 M, second"]' in chart and "    bar [6.1, 1043.7]" in chart


@pytest.mark.parametrize(
    ("values", "top"),
    [(["98517", "53343"], "100000"), (["0.43"], "0.45"), (["6.1", "1043.7"], "1500"), (["5"], "5"), (["0"], "1")],
)
def test_the_value_axis_runs_from_0_to_just_above_the_highest_value(values, top):
    assert axis_top(values) == top


def test_a_negative_value_leaves_the_axis_to_mermaid():
    (chart,) = charts(TABLE.replace("| 6.1 MB |", "| -6.1 MB |"))
    assert '    y-axis "MB"\n' in chart + "\n" and "-->" not in chart


def test_two_plot_lines_chart_the_same_table():
    text = TABLE.replace("-->\n", "-->\n<!-- plot: bar | again | note | memory: state | MB -->\n", 1)
    assert len(charts(text)) == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("| memory: state | MB", "| rocksdb: state | MB"), "no column 'rocksdb: state'"),
        (("| memory: state | MB", "| note | MB"), "the cell 'first' of column 'note' holds no number"),
        (("line |", "pie |"), "the kind is line, bar or hbar"),
        (("| 1 M |", "1 M |"), None),  # a row that is not a table row ends the table above
    ],
)
def test_a_plot_that_cannot_be_drawn_stops_the_build_naming_why(change, message):
    text = TABLE.replace(*change)
    with pytest.raises(ValueError, match=re.escape(message) if message else "no table right above it"):
        plot(text)


@pytest.mark.parametrize("page", sorted((REPO_ROOT / "docs").rglob("*.md")), ids=lambda p: p.name)
def test_every_chart_of_the_docs_draws_from_its_table(page):
    text = page.read_text()
    assert plot(text).count("\nxychart-beta") - text.count("\nxychart-beta") == len(PLOT.findall(text))


def test_the_latency_bench_prints_its_table_with_the_chart_the_latency_page_draws():
    ms = {"count": 9, "p50": 7.8, "p90": 12.8, "p99": 14.4, "p99.9": 20.0, "max": 1234.0}
    result = {"engine": "kafka", "delivery": "at-least-once", "state": "memory", "settings": {}, "reached_rate": 4999.9}
    printed = latency_bench.markdown([{**result, "latency_ms": ms}, {**result, "state": "redis", "latency_ms": ms}])
    (chart,) = charts(printed)
    assert '"kafka, at-least-once, memory, 4,999.9/s", "kafka, at-least-once, redis, 4,999.9/s"' in chart
    assert "bar [14.4, 14.4]" in chart
    page = (REPO_ROOT / "docs/operations/latency.md").read_text()
    assert printed.splitlines()[0] in page and printed.splitlines()[-1] in page


def test_the_checkpoint_bench_prints_its_table_with_charts_of_each_provider():
    batches = [
        {
            "state_rows": n * 1e6,
            "written": 6.1 * n * 2**20,
            "state_bytes": n * 2**20,
            "walCommit": 1,
            "commitOffsets": 2,
            "commitTimeMs": 3,
        }
        for n in (1, 2)
    ]
    printed = checkpoint_cost_bench.markdown([{"provider": p, "batches": batches} for p in ("memory", "rocksdb")])
    drawn = charts(printed)
    assert len(drawn) == 4
    assert all('x-axis ["1 M", "2 M"]' in chart for chart in drawn)
    assert "line [1.0, 2.0]" in drawn[0] and "line [6.1, 12.2]" in drawn[1]
