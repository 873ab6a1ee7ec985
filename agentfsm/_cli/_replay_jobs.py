"""Replaying trace files as jobs: what one job replays, what comes back, and its progress.

Shared by the `replay` command's engines (this process, a process pool) and Ray's
(`replay_ray`), which ships the same jobs to a cluster's nodes.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentfsm._cli import _shadow
from agentfsm._cli._divergence import Impact, Verdict, verdict_of
from agentfsm._cli._text import one_line
from agentfsm._engine.policy import Policy
from agentfsm._replay.engine import (
    DecisionRecord,
    ReplayResult,
    compare,
    divergence,
    recorded_policy,
    replay_run,
)
from agentfsm._replay.trajectories import RecordedRun, read_runs
from agentfsm._replay.trajectories._io import located, report
from agentfsm.exceptions import AgentFSMError, TraceError

__all__ = [
    "AHEAD",
    "CHUNK_BYTES",
    "GC_THRESHOLDS",
    "Emit",
    "EngineError",
    "Job",
    "Outcome",
    "Progress",
    "chunks",
    "fewer_collections",
    "load_policy",
    "replay_file",
]

Emit = Callable[[str], None]


class EngineError(AgentFSMError):
    """The engine that runs the replay failed (a Ray cluster lost, a task that died): not
    the input's fault, and no answer about the runs; `agentfsm replay` exits 3."""


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
    only_diff: bool = False
    """Print only the runs that differ (every run still gets a verdict)."""
    shadow: str | Policy | None = None
    """A candidate policy file judged on the replayed calls (`_shadow`); None shows the
    shadow verdicts the trace recorded, if any."""


@dataclass(slots=True)
class Outcome:
    """What replaying one file produced: output lines, bad input, differences."""

    path: str
    lines: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    runs: int = 0
    differs: bool = False
    skipped: bool = False
    verdicts: list[Verdict] = field(default_factory=list)
    """One per run replayed, in file order."""
    impact: Impact | None = None
    """The calls `--against` judges otherwise in this file (None without `--against`)."""


def load_policy(path: str | Policy | None) -> Any:
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


def replay_file(
    job: Job, emit: Emit | None = None, on_run: Callable[[], None] | None = None
) -> Outcome:
    """Replay every run of one file; print through `emit`, or keep the lines in the outcome.

    `on_run` is called after each run (the progress of a file replayed in this process).
    """
    outcome = Outcome(job.path)
    write = emit or outcome.lines.append
    errors: list[TraceError] | None = [] if job.keep_going else None
    try:
        _replay_runs(job, outcome, write, errors, on_run)
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


def _replay_runs(
    job: Job,
    outcome: Outcome,
    write: Emit,
    errors: list[TraceError] | None,
    on_run: Callable[[], None] | None,
) -> None:
    policy = load_policy(job.policy)
    other = load_policy(job.against) if job.against else None
    for run in read_runs(job.path, errors):
        against: ReplayResult | None = None
        first_flip = ""
        if other is not None:
            run.steps = list(run.steps)  # replayed twice
            # Each policy is the other's shadow: every call a replay reaches then carries
            # its verdict under the replayed policy and what decided it (the impact).
            mine = policy if policy is not None else recorded_policy(run) or Policy()
            result = replay_run(run, mine, shadow=other)
            against = replay_run(run, other, shadow=mine)
            if outcome.impact is None:
                outcome.impact = Impact()
            first_flip = outcome.impact.add_run(
                f"{run.source} run {run.id}", result.judged, against.judged
            )
            result.judged, against.judged = [], []
            shadow = _shadow.summary(run.shadow, "recorded")
        else:
            judged = _shadow.Verdicts()
            candidate = load_policy(job.shadow) if job.shadow else None
            observers = [judged] if candidate is not None else []
            result = replay_run(run, policy, observers=observers, shadow=candidate)
            shadow = (
                _shadow.summary(judged.found, str(job.shadow))
                if candidate is not None
                else _shadow.summary(run.shadow, "recorded")
            )
        outcome.runs += 1
        # Replayed with the policy it recorded, an agentfsm trace must decide as it did live.
        diverged = divergence(run, result) if policy is None else None
        verdict = verdict_of(result, against, diverged)._replace(rules=first_flip)
        if first_flip and not verdict.differs:
            # The same actions, but a call judged otherwise (a new deny beside an allowed
            # call still executes tools): a policy change CI must see.
            verdict = verdict._replace(
                differs=True, detail=f"a call judged otherwise: {first_flip}"
            )
        outcome.verdicts.append(verdict)
        outcome.differs |= verdict.differs
        if verdict.differs or not job.only_diff:
            _report(result, against, job, write, verdict, diverged, shadow)
        if run.open_at is not None:
            report(errors, _never_ended(run, run.open_at))
        if on_run is not None:
            on_run()


def _never_ended(run: RecordedRun, line: int) -> TraceError:
    """The error for an agentfsm trace run whose recording stops before its end: replayed,
    it would end nowhere, and a silent exit 0 would pass a killed run as a good one."""
    return located(
        run.source,
        line,
        f"run {run.id} never ended: its last event is here and no decision after it ends "
        "the run (the process writing the trace was killed, or the run was never stopped)",
    )


def _report(
    result: ReplayResult,
    against: ReplayResult | None,
    job: Job,
    write: Emit,
    verdict: Verdict,
    diverged: str | None,
    shadow: dict[str, Any] | None = None,
) -> None:
    marks = compare(result, against).against if against is not None else {}
    if job.as_json:
        data = _json_of(result, against, marks, job.only_diff)
        data["differs"] = verdict.differs
        if verdict.differs:
            data["first_difference"] = verdict.first_difference()
        if diverged is not None:
            data["diverges"] = diverged
        if shadow is not None:
            data["shadow"] = shadow
        write(json.dumps(data, ensure_ascii=False))
    else:
        texts = (
            _diff_of(result, against, marks) if job.only_diff else _text_of(result, against, marks)
        )
        for line in texts:
            write(line)
        if verdict.rules:
            write(f"  first call judged otherwise: {verdict.rules}")
        if diverged is not None:
            write(f"  DIVERGES from the recording: {diverged}")
        for line in _shadow.lines(shadow) if shadow is not None else ():
            write(line)


def _json_of(
    result: ReplayResult,
    against: ReplayResult | None,
    marks: dict[int, str | None],
    only_diff: bool = False,
) -> dict[str, Any]:
    data = result.summary()
    decisions = []
    for index, record in enumerate(result.decisions):
        if only_diff and index not in marks:
            continue
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
        yield _step_line(r, marks.get(index, _SAME))
    yield "  " + _summary_line(result)
    if against is not None:
        yield f"  against: exit={against.exit_reason} turns={against.steps}"


_SAME = "\0same"
"""A step `--against` decided alike (no `[against: ...]` mark)."""


def _step_line(r: DecisionRecord, against: str | None) -> str:
    path = ">".join(r.path) or "-"
    reason = one_line(r.reason)
    line = f"  turn {r.turn:>3}  {path}  {r.action} {r.priority} {r.guard}  {reason}"
    return line if against == _SAME else f"{line}  [against: {against}]"


def _unmatched(records: list[DecisionRecord]) -> Iterator[str]:
    if len(records) == 1:
        yield _step_line(records[0], None)
    elif records:
        first, last = records[0].turn, records[-1].turn
        yield (
            f"  turns {first:>3}-{last}  {len(records)} decisions under the policy, "
            "none under --against"
        )


def _diff_of(
    result: ReplayResult, against: ReplayResult | None, marks: dict[int, str | None]
) -> Iterator[str]:
    """`--only-diff`: a differing run's header, the steps that differ, and its exits if
    they differ; not every step of the run."""
    yield f"== {result.source} run {result.run} ({result.format}): {len(marks)} step(s) differ"
    unmatched: list[DecisionRecord] = []  # steps --against never reached, told in one line
    for index, record in enumerate(result.decisions):
        if index in marks and marks[index] is None:
            unmatched.append(record)
            continue
        yield from _unmatched(unmatched)
        unmatched = []
        if index in marks:
            yield _step_line(record, marks[index])
    yield from _unmatched(unmatched)
    theirs = None if against is None else against.exit_reason
    if against is not None and result.exit_reason != theirs:
        yield f"  exit: {result.exit_reason} under the policy, {theirs} under --against"


def _summary_line(result: ReplayResult) -> str:
    stops = one_line("; ".join(result.stops) or "none")
    return (
        f"summary: exit={result.exit_reason} recorded_end={result.recorded_end} "
        f"turns={result.steps} tool_calls={result.tool_calls} episodes={len(result.episode_exits)} "
        f"not_replayed={result.not_replayed} missing_results={result.missing_results} "
        f"stops: {stops}"
    )


class Progress:
    """A progress line on stderr: runs replayed and files done, redrawn at most every
    `interval` seconds.

    It draws on a terminal (one line, rewritten in place, erased at the end) unless `quiet`,
    and anywhere when `forced` (`--progress`): off a terminal, one plain line per update
    and a last one at the end. Never on stdout.
    """

    def __init__(
        self,
        total: int,
        stream: Any = None,
        *,
        forced: bool = False,
        quiet: bool = False,
        interval: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.done = 0
        self.runs = 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = forced or (self.tty and not quiet)
        self.interval = interval if self.tty else max(interval, 1.0)
        self.clock = clock
        self.last = -float("inf")
        self.shown = 0
        """Characters of the line now on the terminal (0: none)."""
        self.closed = False

    def run_done(self) -> None:
        """Count one replayed run (a file replayed here reports each run as it goes)."""
        self.runs += 1
        self._draw()

    def advance(self, runs: int = 0) -> None:
        """Count one finished file, and `runs` runs it held that were not counted yet."""
        self.done += 1
        self.runs += runs
        self._draw(force=self.done == self.total)

    def line(self) -> str:
        """What the progress line says now."""
        return f"replayed {self.runs} run(s), {self.done}/{self.total} files"

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        if self.tty:
            text = self.line()
            self.stream.write("\r" + text.ljust(self.shown))
            self.shown = len(text)
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def clear(self) -> None:
        """Erase the line on a terminal before other output is written there."""
        if self.shown:
            self.stream.write("\r" + " " * self.shown + "\r")
            self.stream.flush()
            self.shown = 0

    def close(self) -> None:
        """Erase the line (a terminal), or write the final count once (elsewhere, when forced)."""
        if self.enabled and not self.tty and not self.closed:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
        self.closed = True
        self.clear()


CHUNK_BYTES = 1 << 20
"""Small files go to a worker together, in file order, up to about this many bytes a task."""
AHEAD = 16
"""Tasks queued per worker: enough that no worker idles behind a slow file, few enough that
the outcomes waiting to be printed in order stay a handful (memory does not grow with the
number of files)."""


def chunks(jobs: list[Job]) -> Iterator[list[Job]]:
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
