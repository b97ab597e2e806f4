"""mkdocs hooks: the reference pages' generated parts (``app._reference``), made as the site builds.

A page line ``<!-- generated: cli -->`` becomes every command's help, ``<!-- generated: settings -->``
the table of every setting, ``<!-- generated: metrics -->`` the table of every metric: read from the program itself, never kept in the repository.
``<!-- generated: changelog -->`` is CHANGELOG.md, its links to ``docs/…`` made relative to the site.
``<!-- plot: … -->`` under a table of measured figures becomes a chart of that table (``plot``): the
figures are written once, in the table a benchmark printed, and the picture cannot drift from them.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from app import cli_reference, metrics_reference, settings_reference

ROOT = Path(__file__).resolve().parents[1]


def changelog() -> str:
    """CHANGELOG.md as a page of the site: its links into ``docs/`` point at the site's pages."""
    text = (ROOT / "CHANGELOG.md").read_text()
    return text.replace("](docs/", "](").split("\n", 1)[1]  # the page has its own title


GENERATED = {
    "<!-- generated: changelog -->": changelog,
    "<!-- generated: cli -->": cli_reference,
    "<!-- generated: settings -->": settings_reference,
    "<!-- generated: metrics -->": metrics_reference,
}


WIDE = '%%{init: {"xyChart": {"width": 900}}}%%'  # sideways bars: room for the value axis's numbers
PLOT = re.compile(r"^<!-- plot: (.+?) -->[ \t]*$", re.M)
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def plot(markdown: str) -> str:
    """Each line ``<!-- plot: KIND | TITLE | X COLUMNS | Y COLUMN | Y AXIS -->`` becomes a chart
    (Mermaid's ``xychart-beta``, drawn in the reader's browser) of the nearest table above it.
    KIND is ``line``, ``bar`` or ``hbar`` (bars drawn sideways, for long names). The X columns'
    cells (``A + B``: both, joined) name the points; the first number of each Y column cell
    (``**43.7 MB** (snapshot)`` is 43.7; thousands separators are dropped) is the point's value.
    The value axis starts at 0 (``axis_top`` sets its end): an axis that starts at the lowest
    value makes a bar of 60,000 look a tenth of one of 98,000. A column the table lacks, or a Y
    cell without a number, stops the build with a message naming it."""

    def chart(match: re.Match[str]) -> str:
        kind, title, x, y, axis = (part.strip() for part in match.group(1).split("|"))
        if kind not in ("line", "bar", "hbar"):
            raise ValueError(f"plot {title!r}: the kind is line, bar or hbar, not {kind!r}")
        rows = _table_above(markdown[: match.start()], title)
        header = rows[0]
        xs = [column.strip() for column in x.split(" + ")]
        for column in (*xs, y):
            if column not in header:
                raise ValueError(f"plot {title!r}: the table above has no column {column!r} (it has {header})")
        names, values = [], []
        for row in rows[1:]:
            cell = row[header.index(y)]
            number = NUMBER.search(cell.replace(",", ""))
            if number is None:
                raise ValueError(f"plot {title!r}: the cell {cell!r} of column {y!r} holds no number")
            name = ", ".join(row[header.index(column)] for column in xs)
            names.append(name.replace("*", "").replace("`", "").replace('"', "'"))
            values.append(number.group())
        return "\n".join(
            [
                "```mermaid",
                *([WIDE] if kind == "hbar" else []),
                "xychart-beta horizontal" if kind == "hbar" else "xychart-beta",
                f'    title "{title}"',
                "    x-axis [" + ", ".join(f'"{name}"' for name in names) + "]",
                f'    y-axis "{axis}"' + ("" if float(min(values, key=float)) < 0 else f" 0 --> {axis_top(values)}"),
                f"    {kind.removeprefix('h')} [" + ", ".join(values) + "]",
                "```",
            ]
        )

    return PLOT.sub(chart, markdown)


def axis_top(values: list[str]) -> str:
    """The end of a value axis from 0: the highest value rounded up to a half step of its order
    of magnitude (98,517 → 100000, 0.43 → 0.45, 1043.7 → 1500)."""
    highest = max(float(value) for value in values)
    if highest <= 0:
        return "1"
    step = 10 ** math.floor(math.log10(highest)) / 2
    top = math.ceil(highest / step) * step
    return f"{top:g}" if top < 1e6 else str(int(top))


def _table_above(text: str, title: str) -> list[list[str]]:
    """The cells of the last Markdown table in ``text`` (its header first, the ``|---|`` line
    left out); other plot lines and blank lines between it and the end are skipped."""
    lines = text.rstrip().splitlines()
    while lines and (not lines[-1].strip() or PLOT.match(lines[-1])):
        lines.pop()
    table: list[str] = []
    while lines and lines[-1].lstrip().startswith("|"):
        table.insert(0, lines.pop())
    if len(table) < 3:
        raise ValueError(f"plot {title!r}: no table right above it")
    cells = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in table]
    return [cells[0]] + cells[2:]


def on_page_markdown(markdown, page, config, files):
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return plot(markdown)
