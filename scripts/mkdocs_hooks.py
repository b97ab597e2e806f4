"""mkdocs hooks: the reference pages' generated parts (``app.reference``), made as the site builds.

A page line ``<!-- generated: cli -->`` becomes every command's help, ``<!-- generated: settings -->``
the table of every setting, ``<!-- generated: metrics -->`` the table of every metric: read from the program itself, never kept in the repository.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from app.reference import cli_reference, metrics_reference, settings_reference

GENERATED = {
    "<!-- generated: cli -->": cli_reference,
    "<!-- generated: settings -->": settings_reference,
    "<!-- generated: metrics -->": metrics_reference,
}


def on_page_markdown(markdown, page, config, files):
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
