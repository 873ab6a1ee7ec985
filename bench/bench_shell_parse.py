"""Time `shell.parse` on long commands of several shapes (issue 30, item 11).

    python bench/bench_shell_parse.py

Prints, per shape and size, the seconds `shell.parse` takes (uncached; one run each)
and whether the command was read or left unsure past `MAX_LENGTH`. The grammar's own
parse time grows with the square of the length for pipelines of commands with
assignments or flags; past `MAX_LENGTH` the text is not parsed at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from agentfsm import _shell as shell

SHAPES: dict[str, Callable[[int], str]] = {
    "pipeline `a=1 ls -la |`": lambda n: " | ".join(["a=1 ls -la"] * n),
    "pipeline `ls -la |`": lambda n: " | ".join(["ls -la"] * n),
    "list `ls -la &&`": lambda n: " && ".join(["ls -la"] * n),
    "quoted heredoc": lambda n: "cat > f <<'EOF'\n" + "x | y && $(z)\n" * n + "EOF\n",
}


def main() -> None:
    print(f"MAX_LENGTH = {shell.MAX_LENGTH} bytes")
    for name, build in SHAPES.items():
        for count in (1000, 2000, 4000, 6000, 12000):
            text = build(count)
            start = time.perf_counter()
            shell.parse.cache_clear()
            script = shell.parse(text)
            seconds = time.perf_counter() - start
            state = "unsure" if script.unsure else "read"
            print(f"{name:28} {len(text.encode()):>7} B  {seconds:7.3f} s  {state}")


if __name__ == "__main__":
    main()
