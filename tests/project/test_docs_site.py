"""The documentation: the README stays a front door, the docs site builds, no link is broken.

The site (``mkdocs.yml``, ``docs/``) is built as a reader would build it, with
``mkdocs build --strict`` from the repository root: a page missing from the navigation, a
link to a page or an anchor that does not exist, or a README section a page includes that
is gone, fails the build. Markdown outside ``docs/`` (the README, ``deploy/``) is not part
of the site, so its relative links are checked here, file by file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README_MAX_BYTES = 20_000

FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//|#)", re.I)


def markdown_files() -> list[Path]:
    """Every Markdown file a reader of the repository opens: the README, docs/, deploy/."""
    files = [REPO_ROOT / "README.md"]
    for folder in ("docs", "deploy"):
        files += sorted((REPO_ROOT / folder).rglob("*.md"))
    return files


def relative_links(text: str) -> list[str]:
    """The relative link targets of a Markdown text, without their anchors; links inside
    code blocks and code spans are not links."""
    prose = CODE_SPAN.sub("", FENCE.sub("", text))
    targets = (m.group(1) for m in LINK.finditer(prose))
    return [t.split("#", 1)[0] for t in targets if not EXTERNAL.match(t) and t.split("#", 1)[0]]


def test_the_docs_site_builds_in_strict_mode(tmp_path):
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, f"mkdocs build --strict exited {build.returncode}\n{build.stdout}\n{build.stderr}"
    assert (tmp_path / "site" / "index.html").exists()
    changelog = (tmp_path / "site" / "changelog" / "index.html").read_text()
    for heading in re.findall(r"^## (.+)$", (REPO_ROOT / "CHANGELOG.md").read_text(), re.M):
        assert heading in changelog, f"the site's changelog page lacks CHANGELOG.md's section {heading!r}"


def test_the_readme_is_a_front_door_of_at_most_20000_bytes():
    size = (REPO_ROOT / "README.md").stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size:,} bytes; move reference material to docs/"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_points_to_a_file_the_repository_holds(path):
    missing = [t for t in relative_links(path.read_text()) if not (path.parent / t).exists()]
    assert missing == [], f"{path.relative_to(REPO_ROOT)} links to missing files: {missing}"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_markdown_file_cites_a_file_outside_the_repository(path):
    assert "FACTS.md" not in path.read_text(), f"{path.relative_to(REPO_ROOT)} cites FACTS.md"


def test_the_link_check_sees_links_and_skips_code():
    text = "[a](docs/x.md#y) ![i](img.png) [w](https://x.org) [z](#here)\n`[c](nope.md)`\n```\n[d](no.md)\n```\n"
    assert relative_links(text) == ["docs/x.md", "img.png"]


def test_the_site_index_includes_the_readmes_top_instead_of_copying_it():
    index = (REPO_ROOT / "docs" / "index.md").read_text()
    readme = (REPO_ROOT / "README.md").read_text()
    for section in ("intro", "status"):
        assert f'--8<-- "README.md:{section}"' in index
        shown = readme.split(f"[start:{section}] -->", 1)[1].split(f"<!-- --8<-- [end:{section}]", 1)[0]
        copied = [line for line in shown.splitlines() if len(line) > 40 and line in index]
        assert copied == [], f"docs/index.md copies the README's {section} section instead of including it"


def test_every_test_the_docs_name_exists():
    """A page that names a test (`test_…`) as evidence names one the suite still has."""
    defined = set()
    for path in (REPO_ROOT / "tests").rglob("*.py"):
        defined |= set(re.findall(r"def (test_[a-z0-9_]+)", path.read_text())) | {path.stem}
    named = {
        (str(path.relative_to(REPO_ROOT)), name)
        for path in [*markdown_files()]
        for name in re.findall(r"`(test_[a-z0-9_]+)(?:\[[^\]`]*\])?`", path.read_text())
    }
    assert named, "the check found no test named in the docs: is it reading them?"
    missing = sorted((page, name) for page, name in named if name not in defined)
    assert not missing, f"pages naming tests the suite no longer has: {missing}"
