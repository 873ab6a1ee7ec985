"""Sections of bench/RESULTS-integrations.md, each written by its own benchmark script."""

from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS-integrations.md"


def write_section(name: str, text: str, path: Path = RESULTS) -> None:
    """Put `text` between the markers of section `name`, replacing it, or append it."""
    start, end = f"<!-- section: {name} -->", f"<!-- end: {name} -->"
    block = f"{start}\n{text.rstrip()}\n{end}\n"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end) + r"\n?", re.S)
    if pattern.search(old):
        new = pattern.sub(lambda _: block, old)
    else:
        new = f"{old.rstrip()}\n\n{block}" if old.strip() else block
    path.write_text(new, encoding="utf-8")
