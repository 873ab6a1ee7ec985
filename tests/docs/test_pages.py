"""The README is a first screen and the docs/ pages hold the reference: every link between
them holds, the README lists every page, and the pages' examples run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])
"""Every Markdown page: the README and all of docs/."""
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
README_LINES = 200
"""The README stays a first screen and a map, not the reference."""


def prose(path: Path) -> str:
    """A page's text without its fenced code blocks (a link inside code is not a link)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings."""
    found = re.findall(r"^#{1,6} (.+)$", prose(path), re.MULTILINE)
    return {slug(heading) for heading in found}


def links(path: Path) -> list[str]:
    """The relative links of a page (web addresses are not checked here)."""
    found = LINK.findall(prose(path))
    return [link for link in found if not re.match(r"[a-z]+:", link)]


def blocks(path: Path, language: str) -> list[str]:
    """The fenced blocks of one language in a page, in order."""
    text = path.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.DOTALL | re.MULTILINE)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


class TestLinks:
    @pytest.mark.parametrize("page", PAGES, ids=rel)
    def test_every_link_holds(self, page: Path) -> None:
        """Each relative link names a file of the repository, and its anchor a heading there."""
        broken = []
        for link in links(page):
            target, _, anchor = link.partition("#")
            path = (page.parent / target).resolve() if target else page
            if not path.exists():
                broken.append(f"{link}: no such file")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{link}: no heading #{anchor} in {rel(path)}")
        assert broken == [], f"{rel(page)}: " + "; ".join(broken)

    def test_the_checker_sees_links(self) -> None:
        """The link reader finds known links, so an empty list of broken ones means something."""
        found = links(ROOT / "README.md")
        assert "docs/policy.md" in found
        assert "docs/replay.md#in-ci-exit-status" in found
        assert slug("Checking a policy: `agentfsm lint` and `agentfsm explain`") == (
            "checking-a-policy-agentfsm-lint-and-agentfsm-explain"
        )


class TestReadme:
    def test_the_two_commands_come_first(self) -> None:
        """The first block is `make demo` then `make test`, and both are Makefile targets."""
        first = blocks(ROOT / "README.md", "sh")[0].splitlines()
        assert [line.split("#")[0].strip() for line in first] == ["make demo", "make test"]
        makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
        assert re.search(r"^demo: .*## ", makefile, re.MULTILINE)
        assert re.search(r"^test: .*## ", makefile, re.MULTILINE)
        assert "(no API key)" in first[0]

    def test_readme_is_short(self) -> None:
        """The README is a first screen and a map; the reference lives in docs/."""
        lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
        assert lines <= README_LINES, f"README.md has {lines} lines"

    def test_every_page_is_in_the_table_of_contents(self) -> None:
        """Each top-level page of docs/ is linked from the README."""
        listed = {link.partition("#")[0] for link in links(ROOT / "README.md")}
        pages = {f"docs/{page.name}" for page in DOCS.glob("*.md")}
        assert pages - listed == set()
        assert "docs/integrations/README.md" in listed
