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
`ray start --head` started on this machine) and starts one only with `--address local`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agentfsm.cli.command import one_line
from agentfsm.engine.policy import Policy
from agentfsm.exceptions import AgentFSMError, TraceError
from agentfsm.replay.engine import ReplayResult, compare, divergence, replay_run
from agentfsm.replay.trajectories import expand_paths, read_runs

__all__ = ["Job", "Outcome", "add_parser", "cli", "main", "replay_file", "replay_files"]

EXIT_DIFFERS = 1
EXIT_BAD_INPUT = 2
Emit = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Job:
    """One file to replay, and how (picklable, so it can cross to a worker)."""

    path: str
    explicit: bool
    policy: str | Policy | None
    """A policy file, or the policy itself (Ray's driver reads the file and ships the policy)."""
    against: str | Policy | None
    as_json: bool
    keep_going: bool


@dataclass(slots=True)
class Outcome:
    """What replaying one file produced: output lines, bad input, differences."""

    path: str
    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    runs: int = 0
    differs: bool = False
    skipped: bool = False


def _load_policy(path: str | Policy | None) -> Any:
    """The policy file's policy; None replays each run with the policy its trace recorded.

    A file is read once per process while it stays the same (its size and
    modification time), not once per trace replayed: reading and building a
    policy costs as much as replaying a step.
    """
    if path is None or isinstance(path, Policy):
        return path
    try:
        stat = os.stat(path)
    except OSError:
        return Policy.from_file(path)  # which says what is wrong with the file
    key = (path, stat.st_mtime_ns, stat.st_size)
    policy = _POLICIES.get(key)
    if policy is None:
        if len(_POLICIES) >= 16:
            _POLICIES.clear()
        policy = _POLICIES[key] = Policy.from_file(path)
    return policy


_POLICIES: dict[tuple[str, int, int], Policy] = {}


def replay_file(job: Job, emit: Emit | None = None) -> Outcome:
    """Replay every run of one file; print through `emit`, or keep the lines in the outcome."""
    outcome = Outcome(job.path)
    write = emit or outcome.lines.append
    errors: list[TraceError] | None = [] if job.keep_going else None
    try:
        _replay_runs(job, outcome, write, errors)
    except TraceError as exc:
        if not job.explicit and "unknown trajectory format" in exc.message:
            outcome.skipped = True
        else:
            outcome.errors.append(one_line(str(exc)))
    except AgentFSMError as exc:
        outcome.errors.append(one_line(f"{job.path}: {exc}"))
    except OSError as exc:  # this file only: the others still replay under --keep-going
        outcome.errors.append(one_line(f"{job.path}: cannot read: {exc.strerror or exc}"))
    outcome.errors.extend(one_line(str(e)) for e in errors or ())
    return outcome


def _replay_runs(job: Job, outcome: Outcome, write: Emit, errors: list[TraceError] | None) -> None:
    policy = _load_policy(job.policy)
    other = _load_policy(job.against) if job.against else None
    for run in read_runs(job.path, errors):
        if other is not None:
            run.steps = list(run.steps)  # replayed twice
        result = replay_run(run, policy)
        against = replay_run(run, other) if other is not None else None
        outcome.runs += 1
        # Replayed with the policy it recorded, an agentfsm trace must decide as it did live.
        diverged = divergence(run, result) if policy is None else None
        outcome.differs |= _report(result, against, job.as_json, write, diverged)


def _report(
    result: ReplayResult,
    against: ReplayResult | None,
    as_json: bool,
    write: Emit,
    diverged: str | None = None,
) -> bool:
    comparison = compare(result, against) if against is not None else None
    marks = comparison.against if comparison is not None else {}
    if as_json:
        data = _json_of(result, against, marks)
        if diverged is not None:
            data["diverges"] = diverged
        write(json.dumps(data, ensure_ascii=False))
    else:
        for line in _text_of(result, against, marks):
            write(line)
        if diverged is not None:
            write(f"  DIVERGES from the recording: {diverged}")
    return diverged is not None or (comparison is not None and comparison.differs)


def _json_of(
    result: ReplayResult, against: ReplayResult | None, marks: dict[int, str | None]
) -> dict[str, Any]:
    data = result.summary()
    decisions = []
    for index, record in enumerate(result.decisions):
        brief = record.brief()
        if index in marks:
            brief["against_action"] = marks[index]
        decisions.append(brief)
    data["decisions"] = decisions
    if against is not None:
        data["against_exit_reason"] = against.exit_reason
    return data


def _text_of(
    result: ReplayResult, against: ReplayResult | None, marks: dict[int, str | None]
) -> Iterator[str]:
    yield f"== {result.source} run {result.run} ({result.format})"
    for index, r in enumerate(result.decisions):
        path = ">".join(r.path) or "-"
        reason = one_line(r.reason)
        line = f"  turn {r.turn:>3}  {path}  {r.action} {r.priority} {r.guard}  {reason}"
        if index in marks:
            line += f"  [against: {marks[index]}]"
        yield line
    yield "  " + _summary_line(result)
    if against is not None:
        yield f"  against: exit={against.exit_reason} turns={against.steps}"


def _summary_line(result: ReplayResult) -> str:
    stops = one_line("; ".join(result.stops) or "none")
    return (
        f"summary: exit={result.exit_reason} recorded_end={result.recorded_end} "
        f"turns={result.steps} tool_calls={result.tool_calls} episodes={len(result.episode_exits)} "
        f"not_replayed={result.not_replayed} missing_results={result.missing_results} "
        f"stops: {stops}"
    )


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, total: int, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.done = 0
        self.enabled = total > 1 and bool(getattr(self.stream, "isatty", lambda: False)())

    def advance(self) -> None:
        """Count one finished file and redraw."""
        self.done += 1
        if self.enabled:
            width = 30
            filled = width * self.done // self.total
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(f"\r[{bar}] {self.done}/{self.total} files")
            self.stream.flush()

    def close(self) -> None:
        """Erase the bar."""
        if self.enabled:
            self.stream.write("\r" + " " * 60 + "\r")
            self.stream.flush()


def _serial(jobs: list[Job], progress: Progress, workers: int) -> Iterator[Outcome]:
    del workers
    for job in jobs:
        outcome = replay_file(job, emit=print)
        progress.advance()
        yield outcome


CHUNK_BYTES = 1 << 20
"""Small files go to a worker together, in file order, up to about this many bytes a task."""
AHEAD = 16
"""Tasks queued per worker: enough that no worker idles behind a slow file, few enough that
the outcomes waiting to be printed in order stay a handful (memory does not grow with the
number of files)."""


def replay_files(jobs: list[Job]) -> list[Outcome]:
    """Replay several files in order: one task of the process pool."""
    return [replay_file(job) for job in jobs]


def _chunks(jobs: list[Job]) -> Iterator[list[Job]]:
    chunk: list[Job] = []
    size = 0
    for job in jobs:
        chunk.append(job)
        size += _size(job.path)
        if size >= CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:  # the worker reports it, in its place
        return 0


def _pool(jobs: list[Job], progress: Progress, workers: int) -> Iterator[Outcome]:
    """Replay on a process pool; outcomes come back in file order, a bounded window ahead."""
    tasks = _chunks(jobs)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        queued: deque[Future[list[Outcome]]] = deque(
            pool.submit(replay_files, chunk) for chunk in itertools.islice(tasks, workers * AHEAD)
        )
        try:
            while queued:
                outcomes = queued.popleft().result()
                queued.extend(pool.submit(replay_files, c) for c in itertools.islice(tasks, 1))
                for outcome in outcomes:
                    progress.advance()
                    yield outcome
        finally:  # stopped early (a bad file): what has not started never runs
            for future in queued:
                future.cancel()


ENGINES = {"serial": _serial, "process": _pool}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `replay` subcommand to an argparse subparsers object."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "replay", help="replay recorded runs through a policy", description=__doc__
    )
    _arguments(parser)
    return parser


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", metavar="TRACE", help="files, directories or globs")
    parser.add_argument("--policy", metavar="FILE", help="policy file (JSON or TOML)")
    parser.add_argument("--against", metavar="FILE", help="second policy; exit 1 if it differs")
    parser.add_argument("--json", action="store_true", help="one JSON object per run per line")
    parser.add_argument("--keep-going", action="store_true", help="replay past bad lines")
    parser.add_argument("--engine", choices=[*sorted(ENGINES), "ray"], default="process")
    parser.add_argument("--workers", type=_positive, default=None, help="parallel workers (>= 1)")
    parser.add_argument(
        "--address",
        help="Ray cluster for --engine ray: host:port, auto or local (default: RAY_ADDRESS, "
        "else auto, the cluster `ray start --head` started here; local starts a private one)",
    )


def _positive(text: str) -> int:
    """An argparse type: an int >= 1 (argparse reports anything else as a usage error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def main(args: Sequence[str] | argparse.Namespace | None = None) -> int:
    """Run `agentfsm replay`; return the exit status (0, 1 differs, 2 bad input)."""
    if not isinstance(args, argparse.Namespace):
        parser = argparse.ArgumentParser(prog="agentfsm replay", description=__doc__)
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
    try:  # once here, not in every worker: a bad policy file is one error, not one per trace
        _load_policy(args.policy)
        _load_policy(args.against)
    except AgentFSMError as exc:
        print(f"agentfsm replay: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    jobs = [
        Job(path, explicit, args.policy, args.against, args.json, args.keep_going)
        for path, explicit in files
    ]
    with fewer_collections():
        return _run_jobs(jobs, args)


GC_THRESHOLDS = (20_000, 50, 50)
"""The cyclic collector's thresholds during a replay (Python's default: 700, 10, 10)."""


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the cyclic collector about 30 times less often while replaying (`GC_THRESHOLDS`).

    A replay allocates millions of short-lived objects and frees them by
    reference counting: it leaves no cycles (the engine's clock does not point
    back at it), so each collection walks live objects and finds nothing. The
    previous thresholds come back afterwards; the pool's workers, forked
    inside, inherit the setting. A threshold of 0 (collection off) stays 0.
    """
    before = gc.get_threshold()
    pairs = zip(before, GC_THRESHOLDS, strict=True)
    gc.set_threshold(*(old and max(old, new) for old, new in pairs))
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _engine(jobs: list[Job], args: argparse.Namespace, progress: Progress) -> Iterator[Outcome]:
    if len(jobs) == 1:
        return _serial(jobs, progress, 1)
    if args.engine == "ray":
        from agentfsm.cli.replay_ray import replay_on_ray  # imports Ray only when asked

        # --workers bounds the tasks at once; by default the cluster's CPUs, not this machine's
        return replay_on_ray(jobs, progress, args.workers, getattr(args, "address", None))
    workers = args.workers or os.cpu_count() or 1
    return ENGINES["serial" if workers == 1 else args.engine](jobs, progress, workers)


def _run_jobs(jobs: list[Job], args: argparse.Namespace) -> int:
    progress = Progress(len(jobs))
    errors: list[str] = []
    skipped: list[str] = []
    differs = False
    try:
        for outcome in _engine(jobs, args, progress):
            _print_lines(outcome, progress)
            differs |= outcome.differs
            errors.extend(outcome.errors)
            skipped.extend([outcome.path] if outcome.skipped else [])
            if outcome.errors and not args.keep_going:
                break
    except AgentFSMError as exc:
        errors.append(str(exc))
    finally:
        progress.close()
    return _finish(errors, skipped, differs, args.keep_going)


def _print_lines(outcome: Outcome, progress: Progress) -> None:
    if outcome.lines:
        progress.close()
        sys.stdout.write("\n".join(outcome.lines) + "\n")
        sys.stdout.flush()


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
