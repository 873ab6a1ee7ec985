"""Replaying the real recorded runs through the default policy: healthy runs stay healthy."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import agentfsm as af
from agentfsm._replay.engine import ReplayResult, replay_run
from agentfsm._replay.trajectories import (
    ModelOutput,
    RecordedRun,
    UserMessage,
    expand_paths,
    read_runs,
)
from tests.processes import python

LOOPING = {"doom_loop", "no_progress"}


def _runs(directory: Path) -> list[RecordedRun]:
    runs: list[RecordedRun] = []
    for path, _ in expand_paths([str(directory)]):
        if Path(path).name != "preds.json":
            for run in read_runs(path):
                run.steps = list(run.steps)
                runs.append(run)
    return runs


def _replayed(directory: Path) -> list[ReplayResult]:
    return [replay_run(run) for run in _runs(directory)]


def _longest_identical_streak(run: RecordedRun) -> int:
    """Longest run of identical consecutive calls, user messages ignored (SOURCES.md's rule)."""
    best = streak = 0
    previous = None
    for step in run.steps:
        if isinstance(step, ModelOutput):
            for call in step.turn.tool_calls:
                key = (call.name, json.dumps(call.arguments, sort_keys=True))
                streak = streak + 1 if key == previous else 1
                previous = key
                best = max(best, streak)
    return best


class TestHealthyRuns:
    """tau-bench and mini-swe-agent never stop for a loop under the default policy."""

    def test_tau_bench_never_stops_for_a_loop(self, corpus: Path) -> None:
        """No tau-bench run ends with DOOM_LOOP or NO_PROGRESS."""
        results = _replayed(corpus / "tau-bench")
        looping = {r.run: r.stops for r in results if r.exit_reason in LOOPING}
        assert len(results) == 200
        assert looping == {}

    def test_mini_swe_agent_never_stops_for_a_loop(self, corpus: Path) -> None:
        """No mini-swe-agent run ends with DOOM_LOOP or NO_PROGRESS."""
        results = _replayed(corpus / "mini-swe-agent-deepseek")
        looping = {r.run: r.stops for r in results if r.exit_reason in LOOPING}
        assert len(results) == 38
        assert looping == {}

    def test_tau_bench_conversations_are_episodes(self, corpus: Path) -> None:
        """A user message after a final answer opens a new episode; the summary counts them all."""
        (run,) = [r for r in _runs(corpus / "tau-bench") if r.id == "task-0/trial-0"]
        result = replay_run(run)
        users_after_text = sum(isinstance(s, UserMessage) for s in run.steps)
        assert 1 < len(result.episode_exits) <= users_after_text
        assert result.steps == sum(isinstance(s, ModelOutput) for s in run.steps)


class TestLoopingRuns:
    """ToolBench's unvalidated search trees hold the only real doom loops of the corpus."""

    def test_five_identical_calls_in_a_row_are_flagged(self, corpus: Path) -> None:
        """Every ToolBench run with 5 identical consecutive calls ends with DOOM_LOOP."""
        runs = _runs(corpus / "toolbench")
        looping = [run for run in runs if _longest_identical_streak(run) >= 5]
        assert looping, "the corpus should hold at least one 5-in-a-row run"
        results = {run.id: replay_run(run) for run in looping}
        assert {run_id: r.exit_reason for run_id, r in results.items()} == {
            run_id: "doom_loop" for run_id in results
        }


class TestRecordedEnd:
    """The recording's own end is reported beside the controller's."""

    def test_mini_swe_submission_awaits_its_missing_result(self, corpus: Path) -> None:
        """A run replayed to its `Submitted` end has no exit reason: results are still awaited."""
        results = _replayed(corpus / "mini-swe-agent-deepseek")
        ends = Counter((r.recorded_end, r.exit_reason) for r in results if r.not_replayed == 0)
        assert all(end != "Submitted" or exit_reason is None for end, exit_reason in ends)

    @pytest.mark.parametrize("name", ["basic.json", "wrong_initial_state.json"])
    def test_openhands_finish_is_reported(self, corpus: Path, name: str) -> None:
        """An OpenHands run ending on its finish tool reports `finish` as the recorded end."""
        (run,) = read_runs(corpus / "openhands" / "tests" / "runtime" / "trajs" / name)
        result = replay_run(run)
        assert result.recorded_end == "finish"
        assert result.steps == result.tool_calls


class TestNoCyclicGarbage:
    """Replay frees what it built by reference counting, so the CLI may run the collector rarely."""

    # The count runs in a fresh interpreter: the collector is one per process, so in a test
    # worker the threads other tests left running (servers, Ray, DBOS pollers) add their
    # own cycles to whatever `gc.collect()` finds while it is disabled here.
    _COUNT = """
import gc, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.replay.test_replay_corpus import _runs
from agentfsm._replay.engine import replay_run

corpus = Path(sys.argv[2])
runs = _runs(corpus / "tau-bench") + _runs(corpus / "mini-swe-agent-deepseek")
gc.collect()
gc.disable()
results = [replay_run(run) for run in runs]
garbage = gc.collect()
print(len(results), sum(r.episodes for r in results), garbage)
"""

    def test_replaying_the_corpus_leaves_no_cycles_behind(self, corpus: Path) -> None:
        """Hundreds of replayed runs and their Controllers leave under 100 objects in cycles."""

        root = Path(__file__).resolve().parents[2]
        done = python("-c", self._COUNT, str(root), str(corpus), timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        runs, episodes, garbage = (int(word) for word in done.stdout.split())
        assert runs >= 100
        assert episodes >= 100
        assert garbage < 100, f"{garbage} objects were only freed by the cyclic collector"


LADDER = af.Policy(loops=True)
"""The loop ladder's defaults: warn at 3 calls of one intent in a row, ask at 4, stop at 5."""

HEALTHY = ("tau-bench", "mini-swe-agent-deepseek", "openhands")


def _rungs(result: ReplayResult) -> list[str]:
    """The reasons of the decisions where the ladder spoke (a warning, an ask, a stop)."""
    return [
        d.reason
        for d in result.decisions
        if "loop warning" in d.reason or "of the same intent in a row" in d.reason
    ]


class TestLoopLadderOnTheCorpus:
    """Loops by intent on the 257 real runs: no healthy run is warned, asked or stopped."""

    def test_no_healthy_run_meets_a_rung(self, corpus: Path) -> None:
        """tau-bench, mini-swe-agent and OpenHands (242 runs): the ladder never fires and no
        run ends DOOM_LOOP or NO_PROGRESS; the longest streak of one intent is 2."""
        runs = [run for source in HEALTHY for run in _runs(corpus / source)]
        assert len(runs) == 242
        # The margin: no healthy run makes even three calls of one intent in a row.
        assert max(_longest_streak(run, LADDER) for run in runs) == 2
        results = [replay_run(run, LADDER) for run in runs]
        assert {r.run: _rungs(r) for r in results if _rungs(r)} == {}
        assert [r.run for r in results if r.exit_reason in LOOPING] == []

    def test_the_toolbench_streaks_are_still_stopped(self, corpus: Path) -> None:
        """Every ToolBench run with 5 identical calls in a row is warned, asked, then stopped
        DOOM_LOOP by the ladder's defaults; no other ToolBench run is stopped for a loop."""
        runs = _runs(corpus / "toolbench")
        assert len(runs) == 15
        results = {
            run.id: (replay_run(run, LADDER), _longest_identical_streak(run)) for run in runs
        }
        stopped = {i for i, (r, _) in results.items() if r.exit_reason == "doom_loop"}
        assert stopped == {i for i, (_, streak) in results.items() if streak >= 5}
        assert stopped
        for run_id in stopped:
            said = _rungs(results[run_id][0])
            actions = [d.action for d in results[run_id][0].decisions]
            assert any("loop warning: " in s for s in said)
            assert "ask_human" in actions
            assert "would be the 5th call of the same intent in a row" in said[-1]
            assert "to go on" in said[-1]


def _longest_streak(run: RecordedRun, policy: af.Policy) -> int:
    """Longest run of calls of one intent in a row, user messages ignored."""
    assert policy.loops is not None
    best = streak = 0
    previous = None
    for step in run.steps:
        if isinstance(step, ModelOutput):
            for call in step.turn.tool_calls:
                key = policy.loops.key(call)
                streak = streak + 1 if key == previous else 1
                previous = key
                best = max(best, streak)
    return best
