"""`agentfsm replay TRACE...`: re-run the routing of recorded runs through a policy.

Per step it prints the turn, the states passed, the decision, priority, guard
and reason; then a summary per run. `--json` prints one object per run.
`--against` replays every run under a second policy too and exits 1 when any
decision differs (for CI). Bad input exits 2: a malformed line names the
file, the line and what was wrong; `--keep-going` replays the rest and lists
every bad line at the end. Many files replay in parallel on a process pool
(`--engine process`, the default), on Ray (`--engine ray`) or in this
process (`--engine serial`, also used for a single file, which then streams).
Ray attaches to a running cluster (`--address`, else `RAY_ADDRESS`, else the one
`ray start --head` started on this machine) and starts one only with `--address local`;
stdout holds only the replay's lines (Ray's own notices go to stderr).

With `--against`, a summary that fits one screen ends the output: runs compared, runs
that differ (the first ten named, with their first differing step), the runs counted by
exit reason under each policy, and the impact: the calls judged otherwise, counted by
transition (ALLOW -> DENY, ASK -> ALLOW, ... and `not reached` where one replay ended
before the call), by tool and by the rule that decided under each policy, one example each.
With `--json` it is one last line `{"totals": {...}}` (with `impact`, every group), and
every run's line carries `differs` (and `first_difference` when true). `--only-diff`
prints only the steps that differ, under a header naming the file and run; `--junit
FILE` writes a JUnit XML report, one testcase per run, failed where it differs, its
failure naming the first call judged otherwise and the rule on each side.
A trace recorded with a shadow policy shows, after each run, where the shadow's recorded
verdicts differ from the enforced ones (`shadow` in `--json`); `--shadow FILE` judges the
replayed calls by that candidate policy instead. Shadow differences never change the exit
status (docs/shadow.md).
Progress goes to stderr (runs replayed, files done) when stderr is a terminal, or
anywhere with `--progress`; `--json` turns it off unless `--progress` is given.

Exit status: 0 the same decisions, 1 they differ (or a self-replay diverges), 2 bad
input, 3 the engine failed (a Ray task that died for good, or the cluster's GCS not
answering for `GCS_TIMEOUT` seconds), with one line on stderr saying what.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import sys
from collections import deque
from collections.abc import Generator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from agentfsm._cli._divergence import Totals, Verdict, junit_xml
from agentfsm._cli._options import Once, bounded, subcommand
from agentfsm._cli._replay_jobs import (
    AHEAD,
    EngineError,
    Job,
    Outcome,
    Progress,
    chunks,
    fewer_collections,
    load_policy,
    replay_file,
)
from agentfsm._cli._text import one_line
from agentfsm._replay.trajectories import expand_paths
from agentfsm.exceptions import AgentFSMError

__all__ = ["Job", "Outcome", "add_parser", "cli", "main", "replay_file", "replay_files"]

EXIT_DIFFERS = 1
EXIT_BAD_INPUT = 2
EXIT_ENGINE = 3
"""The engine failed (a Ray cluster lost): the runs were neither compared nor found bad."""


def _serial(jobs: list[Job], progress: Progress, workers: int) -> Generator[Outcome, None, None]:
    del workers

    def emit(line: str) -> None:
        progress.clear()
        print(line)

    for job in jobs:
        outcome = replay_file(job, emit=emit, on_run=progress.run_done)
        progress.advance()
        yield outcome


def replay_files(jobs: list[Job]) -> list[Outcome]:
    """Replay several files in order: one task of the process pool."""
    return [replay_file(job) for job in jobs]


def _pool(jobs: list[Job], progress: Progress, workers: int) -> Generator[Outcome, None, None]:
    """Replay on a process pool; outcomes come back in file order, a bounded window ahead."""
    tasks = chunks(jobs)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        queued: deque[Future[list[Outcome]]] = deque(
            pool.submit(replay_files, chunk) for chunk in itertools.islice(tasks, workers * AHEAD)
        )
        try:
            while queued:
                outcomes = queued.popleft().result()
                queued.extend(pool.submit(replay_files, c) for c in itertools.islice(tasks, 1))
                for outcome in outcomes:
                    progress.advance(outcome.runs)
                    yield outcome
        finally:  # stopped early (a bad file): what has not started never runs
            for future in queued:
                future.cancel()


ENGINES = {"serial": _serial, "process": _pool}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `replay` subcommand to an argparse subparsers object."""
    parser = subcommand(subparsers, "replay", "replay recorded runs through a policy", __doc__)
    _arguments(parser)
    return parser


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", metavar="TRACE", help="files, directories or globs")
    parser.add_argument("--policy", action=Once, metavar="FILE", help="policy file (JSON or TOML)")
    parser.add_argument(
        "--against", action=Once, metavar="FILE", help="second policy; exit 1 if it differs"
    )
    parser.add_argument(
        "--shadow",
        action=Once,
        metavar="FILE",
        help="judge every replayed call by this candidate policy too; show where it differs",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per run per line")
    parser.add_argument("--keep-going", action="store_true", help="replay past bad lines")
    parser.add_argument("--only-diff", action="store_true", help="print only the steps that differ")
    parser.add_argument(
        "--junit",
        action=Once,
        metavar="FILE",
        help="write a JUnit XML report: one testcase per run",
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help="show progress on stderr even when it is not a terminal, or with --json",
    )
    parser.add_argument(
        "--engine", action=Once, choices=[*sorted(ENGINES), "ray"], default="process"
    )
    parser.add_argument(
        "--workers", action=Once, type=_positive, default=None, help="parallel workers (>= 1)"
    )
    parser.add_argument(
        "--address",
        action=Once,
        help="Ray cluster for --engine ray: host:port, auto or local (default: RAY_ADDRESS, "
        "else auto, the cluster `ray start --head` started here; local starts a private one)",
    )


_positive = bounded(int, "a whole number >= 1", 1)


def main(args: Sequence[str] | argparse.Namespace | None = None) -> int:
    """Run `agentfsm replay`; return the exit status (0, 1 differs, 2 bad input, 3 engine)."""
    if not isinstance(args, argparse.Namespace):
        parser = argparse.ArgumentParser(
            prog="agentfsm replay",
            description=__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _arguments(parser)
        args = parser.parse_args(args)
    files = expand_paths(args.traces)
    # A file found in a directory that cannot be opened (a broken link) is that file's error.
    missing = [path for path, explicit in files if explicit and not os.path.exists(path)]
    if missing or not files:
        print(
            f"agentfsm replay: no such file: {', '.join(missing or args.traces)}", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    if args.against and getattr(args, "shadow", None):
        print(
            "agentfsm replay: --shadow and --against both judge the calls by a second policy; "
            "give one (--against also compares the runs' decisions)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    try:  # once here, not in every worker: a bad policy file is one error, not one per trace
        load_policy(args.policy)
        load_policy(args.against)
        load_policy(getattr(args, "shadow", None))
        _check_junit(getattr(args, "junit", None))
    except AgentFSMError as exc:
        print(f"agentfsm replay: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    only_diff = bool(getattr(args, "only_diff", False))
    jobs = [
        Job(
            path,
            explicit,
            args.policy,
            args.against,
            args.json,
            args.keep_going,
            only_diff,
            getattr(args, "shadow", None),
        )
        for path, explicit in files
    ]
    with fewer_collections():
        return _run_jobs(jobs, args)


def _check_junit(path: str | None) -> None:
    """Refuse a `--junit` file that could never be written, before replaying anything."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise AgentFSMError(f"--junit {path}: is a directory")
    if not target.parent.is_dir():
        raise AgentFSMError(f"--junit {path}: folder {target.parent} does not exist")


def _write_junit(path: str, verdicts: list[Verdict], errors: list[str], skipped: list[str]) -> str:
    """Write the JUnit report; return an error message, or "" when written."""
    try:
        Path(path).write_bytes(junit_xml(verdicts, errors, skipped))
    except OSError as exc:
        return f"--junit {path}: cannot write: {exc.strerror or exc}"
    return ""


def _engine(
    jobs: list[Job], args: argparse.Namespace, progress: Progress
) -> Generator[Outcome, None, None]:
    if len(jobs) == 1:
        return _serial(jobs, progress, 1)
    if args.engine == "ray":
        from agentfsm._cli.replay_ray import replay_on_ray  # imports Ray only when asked

        # --workers bounds the tasks at once; by default the cluster's CPUs, not this machine's
        return replay_on_ray(jobs, progress, args.workers, getattr(args, "address", None))
    workers = args.workers or os.cpu_count() or 1
    return ENGINES["serial" if workers == 1 else args.engine](jobs, progress, workers)


def _run_jobs(jobs: list[Job], args: argparse.Namespace) -> int:
    forced = bool(getattr(args, "progress", False))
    progress = Progress(len(jobs), forced=forced, quiet=args.json)
    errors: list[str] = []
    skipped: list[str] = []
    totals = Totals()
    junit = getattr(args, "junit", None)
    verdicts: list[Verdict] = []
    out = sys.stdout  # the replay's lines go here even while Ray's notices are sent to stderr
    try:
        with contextlib.closing(_engine(jobs, args, progress)) as outcomes:
            for outcome in outcomes:
                _print_lines(outcome, progress, out)
                totals.add(outcome.verdicts)
                totals.add_impact(outcome.impact)
                if junit:
                    verdicts.extend(outcome.verdicts)
                errors.extend(outcome.errors)
                skipped.extend([outcome.path] if outcome.skipped else [])
                if outcome.errors and not args.keep_going:
                    break
    except EngineError as exc:
        progress.close()
        print(f"agentfsm replay: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_ENGINE
    except AgentFSMError as exc:
        errors.append(str(exc))
    finally:
        progress.close()
    _print_totals(totals, args, out)
    if junit and (failed := _write_junit(junit, verdicts, errors, skipped)):
        print(f"agentfsm replay: {one_line(failed)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _finish(errors, skipped, bool(totals.differing), args.keep_going)


def _print_totals(totals: Totals, args: argparse.Namespace, out: Any) -> None:
    """The divergence summary: always with --against, and when a self-replay diverged."""
    if args.json:
        lines = [totals.as_json()] if args.against else []
    else:
        lines = list(totals.summary()) if args.against or totals.differing else []
    if lines:
        out.write("\n".join(lines) + "\n")
        out.flush()


def _print_lines(outcome: Outcome, progress: Progress, out: Any) -> None:
    if outcome.lines:
        progress.clear()
        out.write("\n".join(outcome.lines) + "\n")
        out.flush()


SHOWN = 20
"""How many skipped files or bad lines are named before the rest are only counted."""


def _finish(errors: list[str], skipped: list[str], differs: bool, keep_going: bool) -> int:
    if skipped:
        names = ", ".join(skipped[:SHOWN])
        more = f" and {len(skipped) - SHOWN} more" if len(skipped) > SHOWN else ""
        print(f"skipped {len(skipped)} file(s) of unknown format: {names}{more}", file=sys.stderr)
    if errors:
        heading = f"{len(errors)} bad line(s) or file(s):" if keep_going else "error:"
        print(heading, file=sys.stderr)
        for error in errors[:SHOWN]:
            print(f"  {error}", file=sys.stderr)
        if len(errors) > SHOWN:
            print(f"  ... and {len(errors) - SHOWN} more", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_DIFFERS if differs else 0


def cli() -> int:
    """Entry point for running this subcommand alone: `agentfsm replay` with sys.argv."""
    return main(sys.argv[1:])
