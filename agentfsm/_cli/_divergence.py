"""Where replays differ, summed over every run: the verdict of each run, the summary printed
at the end of `agentfsm replay`, its `--json` totals object and its `--junit` report.

A run differs when `--against` decided otherwise at some step (or ended otherwise), or,
replayed under the policy its agentfsm trace recorded, when it diverges from the recording.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from agentfsm._cli._text import one_line
from agentfsm._replay.engine import DecisionRecord, ReplayResult, compare, keyed

__all__ = ["STILL_WAITING", "Totals", "Verdict", "junit_xml", "verdict_of"]

STILL_WAITING = "still_waiting"
"""The exit reason counted for a run whose recording ended while the controller waited."""


class Verdict(NamedTuple):
    """One replayed run: whether it differs, and its first differing step (picklable)."""

    source: str
    run: str
    differs: bool
    turn: int | None
    """The model turn of the first differing decision (None: only the exit differs)."""
    action: str | None
    """The decision there under the policy (None: it made none there)."""
    against_action: str | None
    """The decision there under `--against` (None: it made none, or no `--against`)."""
    detail: str
    """The first difference in one line ("" when the run does not differ)."""
    exit_reason: str | None
    against_exit: str | None
    compared: bool
    """Whether a second policy replayed the run (`--against`)."""

    def first_difference(self) -> dict[str, Any]:
        """The `first_difference` object of the run's `--json` line."""
        return {
            "turn": self.turn,
            "action": self.action,
            "against_action": self.against_action,
            "detail": self.detail,
        }


def verdict_of(result: ReplayResult, against: ReplayResult | None, diverged: str | None) -> Verdict:
    """The verdict on one run replayed under a policy (and `against`, when given)."""
    base = (result.source, result.run)
    exits = (result.exit_reason, None if against is None else against.exit_reason)
    compared = against is not None
    if against is None or not compare(result, against).differs:
        if diverged is not None:
            return Verdict(*base, True, None, None, None, diverged, *exits, compared)
        return Verdict(*base, False, None, None, None, "", *exits, compared)
    mine, theirs = keyed(result.decisions), keyed(against.decisions)
    other = dict(theirs)
    for key, record in mine:
        found = other.get(key)
        if found is None or found.action != record.action:
            return _at(base, exits, record, found)
    ours = {key for key, _ in mine}
    for key, record in theirs:
        if key not in ours:
            return _at(base, exits, None, record)
    detail = f"exit {exits[0] or STILL_WAITING} under the policy, {exits[1] or STILL_WAITING} "
    return Verdict(*base, True, None, None, None, detail + "under --against", *exits, True)


def _at(
    base: tuple[str, str],
    exits: tuple[str | None, str | None],
    mine: DecisionRecord | None,
    theirs: DecisionRecord | None,
) -> Verdict:
    record = mine if mine is not None else theirs
    turn = None if record is None else record.turn
    detail = f"turn {turn}: {_said(mine)} under the policy, {_said(theirs)} under --against"
    return Verdict(
        *base,
        True,
        turn,
        None if mine is None else mine.action,
        None if theirs is None else theirs.action,
        one_line(detail),
        *exits,
        True,
    )


def _said(record: DecisionRecord | None) -> str:
    if record is None:
        return "no decision"
    end = f" ({record.exit_reason})" if record.exit_reason else ""
    return f"{record.action}{end} {record.priority} {record.guard}"


@dataclass(slots=True)
class Totals:
    """Counts over every run replayed: how many, how many differ, exits under each policy."""

    runs: int = 0
    files: int = 0
    differing: list[Verdict] = field(default_factory=list)
    exits: Counter[str] = field(default_factory=Counter)
    against_exits: Counter[str] = field(default_factory=Counter)
    compared: bool = False

    def add(self, verdicts: Iterable[Verdict]) -> None:
        """Count the verdicts of one file."""
        self.files += 1
        for verdict in verdicts:
            self.runs += 1
            self.exits[verdict.exit_reason or STILL_WAITING] += 1
            if verdict.compared:
                self.compared = True
                self.against_exits[verdict.against_exit or STILL_WAITING] += 1
            if verdict.differs:
                self.differing.append(verdict)

    def as_json(self) -> str:
        """The `--json` totals line: `{"totals": {...}}`."""
        totals = {
            "files": self.files,
            "runs": self.runs,
            "differ": len(self.differing),
            "exit_reasons": dict(sorted(self.exits.items())),
            "against_exit_reasons": dict(sorted(self.against_exits.items())),
        }
        return json.dumps({"totals": totals}, ensure_ascii=False)

    def summary(self) -> Iterator[str]:
        """The text summary printed after the runs."""
        verb = "compared" if self.compared else "replayed"
        yield f"== divergence: {self.runs} run(s) {verb}, {len(self.differing)} differ"
        for v in self.differing:
            yield f"  {v.source} run {v.run}: {v.detail}"
        yield f"  exit reasons under the policy: {_counts(self.exits)}"
        if self.compared:
            yield f"  exit reasons under --against: {_counts(self.against_exits)}"


def _counts(counts: Counter[str]) -> str:
    return ", ".join(f"{reason} {n}" for reason, n in sorted(counts.items())) or "none"


def junit_xml(verdicts: Iterable[Verdict], errors: list[str], skipped: list[str]) -> bytes:
    """A JUnit XML report: one testcase per run, failed when its decisions differ.

    Bad input (`--keep-going`) adds one testcase with an `error` element per bad line or
    file, and a file of unknown format found in a directory one `skipped` testcase.
    """
    suite = ET.Element("testsuite", name="agentfsm replay")
    counts = Counter[str]()
    for v in verdicts:
        name = one_line(f"run {v.run}")
        case = ET.SubElement(suite, "testcase", classname=one_line(v.source), name=name)
        counts["tests"] += 1
        if v.differs:
            counts["failures"] += 1
            failure = ET.SubElement(case, "failure", message=v.detail, type="divergence")
            failure.text = (
                f"{v.detail}\nexit under the policy: {v.exit_reason or STILL_WAITING}"
                + (
                    f"\nexit under --against: {v.against_exit or STILL_WAITING}"
                    if v.compared
                    else ""
                )
            )
    for error in errors:
        case = ET.SubElement(suite, "testcase", classname="agentfsm._replay", name="bad input")
        ET.SubElement(case, "error", message=error, type="bad_input")
        counts["tests"] += 1
        counts["errors"] += 1
    for path in skipped:
        case = ET.SubElement(suite, "testcase", classname=one_line(path), name="unknown format")
        ET.SubElement(case, "skipped", message="not a recorded run of a known format")
        counts["tests"] += 1
        counts["skipped"] += 1
    for name in ("tests", "failures", "errors", "skipped"):
        suite.set(name, str(counts[name]))
    root = ET.Element("testsuites", {k: suite.get(k, "0") for k in ("tests", "failures", "errors")})
    root.append(suite)
    ET.indent(root)
    text: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return text + b"\n"
