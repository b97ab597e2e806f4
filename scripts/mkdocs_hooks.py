"""mkdocs hooks: the reference pages' generated parts (``app.reference``), made as the site builds.

A page line ``<!-- generated: cli -->`` becomes every command's help, ``<!-- generated: settings -->``
the table of every setting, ``<!-- generated: metrics -->`` the table of every metric: read from the program itself, never kept in the repository.
``<!-- generated: changelog -->`` is CHANGELOG.md, its links to ``docs/…`` made relative to the site.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from app.reference import cli_reference, metrics_reference, settings_reference

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


def on_page_markdown(markdown, page, config, files):
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
