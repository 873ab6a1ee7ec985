"""Where replays differ, summed over every run: the verdict of each run, the summary printed
at the end of `agentfsm replay`, its `--json` totals object and its `--junit` report.

A run differs when `--against` decided otherwise at some step (or ended otherwise), or,
replayed under the policy its agentfsm trace recorded, when it diverges from the recording.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from agentfsm._cli._text import one_line
from agentfsm._replay.engine import DecisionRecord, JudgedCall, ReplayResult, compare, keyed

__all__ = ["STILL_WAITING", "Impact", "Totals", "Verdict", "junit_xml", "verdict_of"]

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
    rules: str = ""
    """The run's first call judged otherwise, with the rule that decided it under each
    policy ("" when no call flips)."""

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


NOT_REACHED = "not reached"
"""A call's verdict under a policy whose replay of the run ended before the call came."""
_SOURCE_CHARS = 70
"""Characters of a deciding rule the summary shows."""


@dataclass(slots=True)
class Impact:
    """The calls `--against` judges otherwise, counted by transition, tool and deciding rule.

    Each run is replayed under each policy with the other as its shadow, so every call a
    replay reaches carries its verdict and what decided it. Calls are matched by model turn
    and call id; a call only one replay reached is `not reached` under the other. Counts
    and one example per group only: it stays small however many runs are compared, and it
    crosses from a worker process whole.
    """

    calls: int = 0
    """Calls judged under at least one policy."""
    flips: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(verdict under the policy, verdict under --against): calls."""
    tools: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """(tool, before, after): calls."""
    rules: Counter[tuple[str, str, str, str]] = field(default_factory=Counter)
    """(before, after, rule under the policy, rule under --against): calls."""
    examples: dict[tuple[str, ...], tuple[str, str, int]] = field(default_factory=dict)
    """The first call of each group above, where it was (file, run, turn) and what it was."""

    def add_run(self, where: str, mine: list[JudgedCall], theirs: list[JudgedCall]) -> str:
        """Count one run's calls; return its first flip in one line ("" when none flips)."""
        other = {(c.turn, c.call_id): c for c in theirs}
        first = ""
        seen = set()
        for call in mine:
            key = (call.turn, call.call_id)
            seen.add(key)
            match = other.get(key)
            after = NOT_REACHED if match is None else match.verdict
            line = self._count(where, call, match, call.verdict, after)
            first = first or line
        for call in theirs:
            if (call.turn, call.call_id) not in seen:
                line = self._count(where, call, None, NOT_REACHED, call.verdict, reached=False)
                first = first or line
        return first

    def _count(
        self,
        where: str,
        call: JudgedCall,
        match: JudgedCall | None,
        before: str,
        after: str,
        *,
        reached: bool = True,
    ) -> str:
        self.calls += 1
        if before == after:
            return ""
        mine = _source(call.source) if reached else "-"
        theirs = "-" if match is None and reached else _source((match or call).source)
        groups = (
            (before, after),
            (call.tool, before, after),
            (before, after, mine, theirs),
        )
        self.flips[groups[0]] += 1
        self.tools[groups[1]] += 1
        self.rules[groups[2]] += 1
        example = (call.call, where, call.turn)
        for group in groups:
            self.examples.setdefault(group, example)
        return one_line(
            f"{call.call}: {before} ({mine}) under the policy, {after} ({theirs}) under --against"
        )

    def merge(self, other: Impact) -> None:
        """Add the counts of another file's impact."""
        self.calls += other.calls
        self.flips.update(other.flips)
        self.tools.update(other.tools)
        self.rules.update(other.rules)
        for group, example in other.examples.items():
            self.examples.setdefault(group, example)

    def as_json(self) -> dict[str, Any]:
        """The `impact` object of the `--json` totals line: every group, none cut."""
        return {
            "calls": self.calls,
            "flipped": sum(self.flips.values()),
            "flips": [
                {"from": a, "to": b, "calls": n, "example": _example(self.examples[(a, b)])}
                for (a, b), n in self.flips.most_common()
            ],
            "by_tool": [
                {
                    "tool": t,
                    "from": a,
                    "to": b,
                    "calls": n,
                    "example": _example(self.examples[(t, a, b)]),
                }
                for (t, a, b), n in self.tools.most_common()
            ],
            "by_rule": [
                {
                    "from": a,
                    "to": b,
                    "rule": r,
                    "against_rule": q,
                    "calls": n,
                    "example": _example(self.examples[(a, b, r, q)]),
                }
                for (a, b, r, q), n in self.rules.most_common()
            ],
        }

    def summary(self, shown: int = 8) -> Iterator[str]:
        """The impact block of the text summary, at most `shown` lines per part."""
        flipped = sum(self.flips.values())
        yield f"== impact: {self.calls} call(s) judged, {flipped} judged otherwise under --against"
        if not flipped:
            return
        for (a, b), n in self.flips.most_common():
            example = _example(self.examples[(a, b)], short=True)
            yield f"  {a.upper()} -> {b.upper()}  {n}   e.g. {example}"
        yield "  by tool:"
        yield from _top(self.tools, shown, lambda k, n: f"    {k[0]}  {k[1]} -> {k[2]}  {n}")
        yield "  by deciding rule (under the policy -> under --against):"
        yield from _top(
            self.rules,
            shown,
            lambda k, n: (
                f"    {k[0]} -> {k[1]}  {n}  {k[2]} -> {k[3]}\n"
                f"      e.g. {_example(self.examples[k], short=True)}"
            ),
        )


def _top(counts: Counter[Any], shown: int, line: Any) -> Iterator[str]:
    ranked = counts.most_common()
    for key, n in ranked[:shown]:
        yield from str(line(key, n)).split("\n")
    if len(ranked) > shown:
        rest = sum(n for _, n in ranked[shown:])
        more = len(ranked) - shown
        yield f"    and {more} more group(s), {rest} call(s) (--json lists every one)"


_REFUSED = re.compile(r"^permission denied: .* may not run \((.*)\)$", re.DOTALL)


def _source(text: str) -> str:
    """What decided, in short: a denial's wording around its rule is left out."""
    refused = _REFUSED.match(text)
    return _cut(one_line(refused.group(1) if refused else text or "?"), _SOURCE_CHARS)


def _example(example: tuple[str, str, int], *, short: bool = False) -> str:
    call, where, turn = example
    if short:
        return f"{_cut(call, 70)} at {_short(where, 50)} turn {turn}"
    return f"{call} at {where} turn {turn}"


def _short(where: str, limit: int = 60) -> str:
    """A long file path's end, which names the file: the summary keeps to one screen."""
    return where if len(where) <= limit else "..." + where[-(limit - 3) :]


def _cut(text: str, limit: int = 110) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(slots=True)
class Totals:
    """Counts over every run replayed: how many, how many differ, exits under each policy."""

    runs: int = 0
    files: int = 0
    differing: list[Verdict] = field(default_factory=list)
    exits: Counter[str] = field(default_factory=Counter)
    against_exits: Counter[str] = field(default_factory=Counter)
    compared: bool = False
    impact: Impact | None = None
    """The calls judged otherwise, over every file (with `--against`)."""

    def add_impact(self, impact: Impact | None) -> None:
        """Count one file's impact."""
        if impact is None:
            return
        if self.impact is None:
            self.impact = Impact()
        self.impact.merge(impact)

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
        if self.impact is not None:
            totals["impact"] = self.impact.as_json()
        return json.dumps({"totals": totals}, ensure_ascii=False)

    def summary(self) -> Iterator[str]:
        """The text summary printed after the runs."""
        verb = "compared" if self.compared else "replayed"
        yield f"== divergence: {self.runs} run(s) {verb}, {len(self.differing)} differ"
        for v in self.differing[:RUNS_SHOWN]:
            yield f"  {_short(v.source)} run {v.run}: {v.detail}"
        if len(self.differing) > RUNS_SHOWN:
            rest = len(self.differing) - RUNS_SHOWN
            yield f"  and {rest} more differing run(s) (--json or --junit names every one)"
        yield f"  exit reasons under the policy: {_counts(self.exits)}"
        if self.compared:
            yield f"  exit reasons under --against: {_counts(self.against_exits)}"
        if self.impact is not None:
            yield from self.impact.summary()


RUNS_SHOWN = 10
"""Differing runs the text summary names before it only counts the rest: one screen."""


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
            message = f"{v.detail}; first call judged otherwise: {v.rules}" if v.rules else v.detail
            failure = ET.SubElement(case, "failure", message=message, type="divergence")
            failure.text = f"{message}\nexit under the policy: {v.exit_reason or STILL_WAITING}" + (
                f"\nexit under --against: {v.against_exit or STILL_WAITING}" if v.compared else ""
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
