"""End to end: spans recorded live by pydantic-ai and the Agents SDK, replayed under a new policy
by `python -m agentfsm replay` and `report` in a real subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.processes import python

pytestmark = pytest.mark.xdist_group("span-recordings")  # one worker records them once

FORMATS = {
    "pydantic_ai_v5.jsonl": "otel-genai",
    "agents_otel_chat.jsonl": "otel-genai",
    "agents_chat.jsonl": "openai-agents-trace",
    "agents_responses.jsonl": "openai-agents-trace",
}
"""Recordings of pydantic-ai's spans, OpenTelemetry's Agents SDK instrumentation and the Agents
SDK's own export, with the format each is read as."""
RECORDINGS = list(FORMATS)
DENY_ETC = "deny delete_file(path^=/etc/*)"
BLIND = [
    "pydantic_ai_v5_no_content.jsonl",
    "agents_otel_no_content.jsonl",
    "agents_chat_no_content.jsonl",
]


@pytest.fixture
def policies(tmp_path: Path) -> tuple[Path, Path]:
    """The policy the team ran under (anything goes) and a new one asking before /etc is touched."""
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"permission_rules": ["allow *"]}))
    new = tmp_path / "new.toml"
    new.write_text('permission_rules = ["allow *", "ask delete_file(path^=/etc/*)"]\n')
    return old, new


class TestReplayUnderANewPolicy:
    @pytest.mark.parametrize("name", RECORDINGS)
    def test_the_new_policy_asks_before_the_delete(
        self, name: str, span_recordings: Path, policies: tuple[Path, Path]
    ) -> None:
        """The first turn executed both calls under the old policy and asks a human under the
        new one; replay exits 1 and the summary names the run and the turn."""
        old, new = policies
        path = span_recordings / name
        done = python("-m", "agentfsm", "replay", path, "--policy", old, "--against", new)
        assert done.returncode == 1, done.stderr
        out = done.stdout
        assert "== divergence: 1 run(s) compared, 1 differ" in out
        assert "turn 1: execute_tools" in out
        assert "ask_human P6 NeedsApproval() under --against" in out
        asked = next(line for line in out.splitlines() if "[against: ask_human]" in line)
        assert "delete_file, read_file" in asked

    def test_one_screen_says_which_calls_a_new_deny_stops(
        self, span_recordings: Path, tmp_path: Path
    ) -> None:
        """Every recording of both frameworks under a new `deny delete_file(path^=/etc/*)`: the
        turn still executes read_file, so no action differs, yet each run differs (exit 1) and
        the impact names the flip, the tool, the rule on each side and an example."""
        old = tmp_path / "old.json"
        old.write_text(json.dumps({"permission_rules": ["allow *"]}))
        new = tmp_path / "new.json"
        new.write_text(json.dumps({"permission_rules": ["allow *", DENY_ETC]}))
        files = [span_recordings / n for n in RECORDINGS]
        done = python("-m", "agentfsm", "replay", *files, "--policy", old, "--against", new)
        assert done.returncode == 1, done.stderr
        summary = done.stdout[done.stdout.index("== divergence") :].splitlines()
        assert len(summary) <= 40  # one screen, however many runs
        assert f"{len(RECORDINGS)} run(s) compared, {len(RECORDINGS)} differ" in summary[0]
        impact = summary[summary.index(next(x for x in summary if x.startswith("== impact"))) :]
        flips = f"  ALLOW -> DENY  {len(RECORDINGS)}   e.g. delete_file("
        assert impact[1].startswith(flips)
        assert f"    delete_file  allow -> deny  {len(RECORDINGS)}" in impact
        assert (
            f"    allow -> deny  {len(RECORDINGS)}  rule 'allow *' -> rule '{DENY_ETC}'" in impact
        )

    def test_json_lines_name_the_format_and_the_difference(
        self, span_recordings: Path, policies: tuple[Path, Path]
    ) -> None:
        """`--json` over both frameworks' files: one line per run with its format, then totals."""
        old, new = policies
        files = [span_recordings / n for n in RECORDINGS]
        done = python(
            "-m", "agentfsm", "replay", *files, "--policy", old, "--against", new, "--json"
        )
        assert done.returncode == 1, done.stderr
        *runs, totals = [json.loads(line) for line in done.stdout.splitlines()]
        assert [r["format"] for r in runs] == list(FORMATS.values())
        assert all(r["differs"] for r in runs)
        assert all(r["first_difference"]["turn"] == 1 for r in runs)
        assert totals["totals"]["runs"] == len(FORMATS)

    @pytest.mark.parametrize("name", BLIND)
    def test_without_content_a_deny_on_the_path_asks(
        self, name: str, span_recordings: Path, tmp_path: Path
    ) -> None:
        """Arguments not recorded: `deny delete_file(path^=/etc/*)` cannot be evaluated, so the
        replay asks and says why; it never lets the call through unchecked."""
        policy = tmp_path / "deny.json"
        policy.write_text(json.dumps({"permission_rules": ["deny delete_file(path^=/etc/*)"]}))
        done = python("-m", "agentfsm", "replay", span_recordings / name, "--policy", policy)
        assert done.returncode == 0, done.stderr
        first = next(line for line in done.stdout.splitlines() if "turn   1" in line)
        assert "ask_human" in first
        assert "names argument 'path', which this call does not have" in first

    def test_the_report_page_reads_the_recordings(
        self, span_recordings: Path, policies: tuple[Path, Path], tmp_path: Path
    ) -> None:
        """`agentfsm report` writes one page for both frameworks' recordings and marks the
        difference under the new policy."""
        old, new = policies
        page = tmp_path / "report.html"
        files = [span_recordings / n for n in RECORDINGS]
        done = python(
            "-m", "agentfsm", "report", *files, "--policy", old, "--against", new, "-o", page
        )
        assert done.returncode == 1, done.stderr  # written; --against decided otherwise
        html = page.read_text()
        assert "delete_file" in html
        assert "ask_human" in html
        for name in RECORDINGS:
            assert name in html

    def test_a_broken_recording_exits_2_naming_file_and_line(
        self, span_recordings: Path, tmp_path: Path
    ) -> None:
        """A recording with a line that is not an OTLP request: exit 2, file and line on stderr."""
        path = tmp_path / "spans.jsonl"
        path.write_text((span_recordings / "pydantic_ai_v5.jsonl").read_text() + "[1, 2]\n")
        count = len(path.read_text().splitlines())
        done = python("-m", "agentfsm", "replay", path)
        assert done.returncode == 2
        assert f"{path}:{count}: expected a JSON object, got list" in done.stderr
