"""docs/budgets.md: its example runs and prints what the page says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "budgets.md"


def block(language: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    found: list[str] = re.findall(rf"^```{language}\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    return found[0]


def test_the_example_prints_what_the_page_shows() -> None:
    """The first Python block's output is the page's `text` block, line for line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block("python"), str(PAGE), "exec"), {"__name__": "budgets_example"})
    assert out.getvalue() == block("text")
