"""Every relative link of the README, the guides under docs/ and the results index points at a file (and heading) that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [
    REPO / "README.md",
    REPO / "results" / "README.md",
    REPO / "examples" / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slugs(path: Path) -> set[str]:
    """GitHub's anchors of the headings of ``path`` (outside fenced blocks)."""
    slugs, fenced = set(), False
    for line in path.read_text().splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            slugs.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return slugs


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    bad = []
    for target in _links(page):
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _slugs(dest):
            bad.append(f"{target}: no heading #{anchor}")
    assert not bad, f"{page.relative_to(REPO)}: " + "; ".join(bad)
