"""The command line of every docs/gen_*.py script: write its file, or `--check` it.

A script imports this only when it runs as one (`make docs`), where docs/ is first on
`sys.path`; the tests load the scripts by path and call their `render()`, which needs it not.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path


def main(
    out: Path,
    render: Callable[[], str],
    argv: Sequence[str] | None = None,
    *,
    announce: bool = False,
) -> int:
    """Write `render()` to `out` (saying so when `announce`); with `--check` in `argv` (the
    command line's by default), write nothing and return 1 when `out` is missing or differs."""
    text = render()
    if "--check" in (sys.argv[1:] if argv is None else argv):
        return 0 if out.is_file() and out.read_text(encoding="utf-8") == text else 1
    out.write_text(text, encoding="utf-8")
    if announce:
        print(f"wrote {out.parent.name}/{out.name}")
    return 0
