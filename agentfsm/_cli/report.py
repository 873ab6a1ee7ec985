"""`agentfsm report TRACE... -o report.html`: one self-contained HTML page to review runs.

`--against FILE` replays every run under a second policy too and marks where it decides
otherwise; `--only-diff` (with `--against`) puts only those runs on the page. Progress
(runs replayed, files done) goes to stderr when it is a terminal, or anywhere with
`--progress`. Exit 0 when written, 1 when `--against` decided otherwise somewhere, 2 on
bad input or arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from agentfsm._cli._options import Once, subcommand
from agentfsm._cli._replay_jobs import Progress
from agentfsm._engine.policy import Policy
from agentfsm.exceptions import AgentFSMError

__all__ = ["add_parser", "main"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `report` on an argparse subparsers object; `args.handler(args)` runs it."""
    parser = subcommand(
        subparsers, "report", "write one HTML page to review recorded runs step by step", __doc__
    )
    parser.add_argument("traces", nargs="+", metavar="TRACE", help="files, directories or globs")
    parser.add_argument(
        "-o", "--output", action=Once, metavar="FILE", help="write here instead of stdout"
    )
    parser.add_argument("--policy", action=Once, metavar="FILE", help="policy file (JSON or TOML)")
    parser.add_argument(
        "--against", action=Once, metavar="FILE", help="a second policy to compare with"
    )
    parser.add_argument(
        "--only-diff", action="store_true", help="show only the runs --against decides otherwise"
    )
    parser.add_argument(
        "--progress", action="store_true", help="show progress on stderr even off a terminal"
    )
    parser.add_argument("--title", action=Once, default="agentfsm run report")
    parser.set_defaults(handler=main)
    return parser


def main(args: argparse.Namespace) -> int:
    """Write the page; 0 when written, 1 when `--against` decided otherwise somewhere."""
    from agentfsm._replay.trajectories import expand_paths
    from agentfsm._report import build

    if args.only_diff and not args.against:
        raise AgentFSMError("--only-diff needs --against FILE: a second policy to differ from")
    policy = Policy.from_file(args.policy) if args.policy else None
    against = Policy.from_file(args.against) if args.against else None
    progress = Progress(len(expand_paths(args.traces)), forced=args.progress)
    sources: set[str] = set()

    def on_run(view: Any) -> None:
        if view.source not in sources:  # a file's first run: the files before it are done
            sources.add(view.source)
            progress.done = len(sources) - 1
        progress.run_done()

    try:
        report = build(
            args.traces,
            policy,
            against=against,
            title=args.title,
            only_diff=args.only_diff,
            on_run=on_run,
        )
    finally:
        progress.done = len(sources)
        progress.close()
    # A lone surrogate read from a trace (half an emoji) has no UTF-8 form: shown as `\\udXXX`.
    html = report.html.encode("utf-8", "backslashreplace").decode("utf-8")
    if args.output:
        target = Path(args.output)
        if not target.parent.is_dir():
            raise AgentFSMError(f"-o {args.output}: folder {target.parent} does not exist")
        try:
            target.write_text(html, encoding="utf-8")
        except OSError as exc:
            raise AgentFSMError(f"-o {args.output}: cannot write: {exc.strerror}") from exc
        differ = sum(view.differs for view in report.runs)
        shown = f", {differ} differ" if args.against else ""
        print(f"{args.output}: {len(report.runs)} run(s){shown}", file=sys.stderr)
    else:
        sys.stdout.write(html)
    return 1 if report.differs else 0
