"""The loop ladder through the Controller: a model that paraphrases a call k times meets the
rungs where they are configured; a repeat whose result changed never does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._replay.engine import replay_run
from agentfsm._replay.trajectories import read_runs
from agentfsm.guards import LoopLadder, ToolLoops

_WORDS = ["asyncio", "timeout", "python", "cancel"]
_BASE: dict[str, dict[str, Any]] = {
    "bash": {"command": "grep -n needle src/app.py", "timeout": 30},
    "search": {"query": " ".join(_WORDS), "limit": 10},
    "read_file": {"path": "src/app.py", "offset": 0},
}
"""One call per tool; `paraphrases` rewrites each without changing its intent."""
_LADDER_TOOLS = {"read_file": ToolLoops(volatile=["offset"])}


@st.composite
def paraphrases(draw: st.DrawFn, tool: str) -> dict[str, Any]:
    """The base call of `tool` said another way: keys reordered, spaces added, numbers as
    floats, shell words quoted, query words shuffled and recased, the volatile offset moved."""
    args = dict(_BASE[tool])
    space = " " * draw(st.integers(1, 3))
    if tool == "bash":
        words = args["command"].split()
        quoted = [draw(st.sampled_from([w, f"'{w}'", f'"{w}"'])) for w in words]
        args["command"] = draw(st.sampled_from(["", " "])) + space.join(quoted)
        args["timeout"] = draw(st.sampled_from([30, 30.0]))
    elif tool == "search":
        words = draw(st.permutations(_WORDS))
        args["query"] = space.join(draw(st.sampled_from([w, w.upper(), w.title()])) for w in words)
        args["limit"] = draw(st.sampled_from([10, 10.0, 1e1]))
    else:
        args["offset"] = draw(st.integers(0, 10_000))
        args["path"] = draw(st.sampled_from(["src/app.py", " src/app.py "]))
    keys = draw(st.permutations(list(args)))
    return {key: args[key] for key in keys}


@st.composite
def ladders(draw: st.DrawFn, lowest: int = 2) -> LoopLadder:
    """Rungs in order, each one to three calls above the last."""
    warn = draw(st.integers(lowest, 4))
    ask = warn + draw(st.integers(1, 2))
    stop = ask + draw(st.integers(1, 2))
    return LoopLadder(warn=warn, ask=ask, stop=stop, tools=_LADDER_TOOLS)


def _call(ctl: af.Controller, i: int, tool: str, args: dict[str, Any]) -> af.Decision:
    call = af.ToolCall(id=f"c{i}", name=tool, arguments=args)
    return ctl.on_model_output(af.ModelTurn(tool_calls=[call], finish_reason="tool_calls"))


def _answer(ctl: af.Controller, decision: af.Decision, i: int, content: str) -> af.Decision:
    if decision.action is af.Action.ASK_HUMAN:
        decision = ctl.on_human_reply(approved=True)
    assert decision.action is af.Action.EXECUTE_TOOLS, decision
    return ctl.on_tool_results([af.ToolResult(call_id=f"c{i}", content=content)])


class TestParaphrasedRepeats:
    @settings(max_examples=60, deadline=None)
    @given(st.data(), ladders(), st.sampled_from(sorted(_BASE)))
    def test_the_rungs_fire_where_configured(
        self, data: st.DataObject, ladder: LoopLadder, tool: str
    ) -> None:
        """Call k of one intent, each a new paraphrase with the same result: runs silently
        below `warn`, runs with a warning for the model from `warn`, asks a human from `ask`,
        and stops the run as DOOM_LOOP at `stop`, with a reason that says how to go on."""
        ctl = af.Controller(af.Policy(loops=ladder))
        for k in range(1, ladder.stop + 1):
            decision = _call(ctl, k, tool, data.draw(paraphrases(tool)))
            if k < ladder.warn:
                assert decision.action is af.Action.EXECUTE_TOOLS
                assert decision.note is None
            elif k < ladder.ask:
                assert decision.action is af.Action.EXECUTE_TOOLS
                assert decision.note is not None
                assert decision.note.startswith(f"loop warning: {tool}(")
                assert f"is call {k} of the same intent in a row" in decision.reason
            elif k < ladder.stop:
                assert decision.action is af.Action.ASK_HUMAN
                assert decision.guard == "LoopRung('ask')"
            else:
                assert decision.action is af.Action.STOP
                assert decision.exit_reason is af.ExitReason.DOOM_LOOP
                assert "to go on: send a user message" in decision.reason
                return
            _answer(ctl, decision, k, "the same result")

    @settings(max_examples=60, deadline=None)
    @given(st.data(), ladders(lowest=3), st.sampled_from(sorted(_BASE)), st.integers(3, 12))
    def test_a_repeat_whose_result_changed_never_climbs(
        self, data: st.DataObject, ladder: LoopLadder, tool: str, k: int
    ) -> None:
        """The same paraphrased call k times, each answered with a new result (polling a job,
        paging a file): progress, so no rung ever fires."""
        ctl = af.Controller(af.Policy(loops=ladder))
        for i in range(1, k + 1):
            decision = _call(ctl, i, tool, data.draw(paraphrases(tool)))
            assert decision.action is af.Action.EXECUTE_TOOLS, decision.reason
            assert decision.note is None
            _answer(ctl, decision, i, f"result {i}")

    def test_a_user_message_starts_the_count_again(self) -> None:
        """After a stop rung is near, a user message resets the count: the next call runs."""
        ctl = af.Controller(af.Policy(loops={"warn": 2, "ask": 0, "stop": 3}))
        for i in range(1, 3):
            _answer(ctl, _call(ctl, i, "search", _BASE["search"]), i, "same")
        ctl.on_user_message("try once more, the index was rebuilt")
        decision = _call(ctl, 3, "search", _BASE["search"])
        assert decision.action is af.Action.EXECUTE_TOOLS
        assert decision.note is None

    def test_without_a_ladder_paraphrases_are_not_repeats(self) -> None:
        """The exact comparison stays the default: reordered words are another call."""
        ctl = af.Controller(af.Policy(repeat_threshold=2, on_repeat="stop"))
        for i, query in enumerate(["a b c", "c b a", "b a c"], 1):
            decision = _call(ctl, i, "search", {"query": query})
            assert decision.action is af.Action.EXECUTE_TOOLS
            _answer(ctl, decision, i, "same")


class TestDenials:
    def _denied(self, policy: af.Policy, times: int) -> af.Decision:
        ctl = af.Controller(policy)
        decision = None
        for i in range(times):
            decision = _call(ctl, i, "rm", {"path": f"f{i}"})
            if ctl.done:
                break
        assert decision is not None
        return decision

    def test_denials_are_tool_errors_by_default(self) -> None:
        """Five denied rounds in a row end TOOL_ERRORS under the default policy."""
        policy = af.Policy(permissions={"rm": "deny"})
        assert self._denied(policy, 5).exit_reason is af.ExitReason.TOOL_ERRORS

    def test_a_policy_can_say_denials_are_not_tool_errors(self) -> None:
        """With `denials_are_tool_errors=False`, 40 denials in a row never end the run."""
        policy = af.Policy(permissions={"rm": "deny"}, denials_are_tool_errors=False)
        decision = self._denied(policy, 40)
        assert decision.action is af.Action.CONTINUE
        assert decision.exit_reason is None


class TestSaved:
    def test_a_loaded_controller_keeps_the_ladder_and_the_count(self) -> None:
        """Dumped after two calls of one intent and loaded from JSON, the run warns at the 3rd
        and stops at the 4th, as the original would."""
        ctl = af.Controller(af.Policy(loops={"warn": 3, "ask": 0, "stop": 4}))
        for i, query in enumerate(["a b", "b a"]):
            _answer(ctl, _call(ctl, i, "search", {"query": query}), i, "same")
        loaded = af.Controller.load(json.loads(json.dumps(ctl.dump())))
        assert loaded.dump()["policy"] == ctl.dump()["policy"]
        warned = _call(loaded, 2, "search", {"query": "B  A"})
        assert warned.note is not None
        _answer(loaded, warned, 2, "same")
        assert _call(loaded, 3, "search", {"query": "a b"}).exit_reason is af.ExitReason.DOOM_LOOP


class TestAcrossPaths:
    @settings(max_examples=15, deadline=None)
    @given(
        st.data(),
        ladders(),
        st.sampled_from(sorted(_BASE)),
        st.lists(st.booleans(), min_size=3, max_size=9),
    )
    def test_live_loaded_and_replayed_runs_decide_alike(
        self,
        tmp_path_factory: pytest.TempPathFactory,
        data: st.DataObject,
        ladder: LoopLadder,
        tool: str,
        changes: list[bool],
    ) -> None:
        """Paraphrases of one call, each answered with the last result or (True) a new one: the
        live Controller, a Controller dumped and loaded before every input, and the replay of
        the run as a plain OpenAI message list make the same decisions, rung for rung."""
        said = [data.draw(paraphrases(tool)) for _ in changes]
        contents = [f"result {sum(changes[: i + 1])}" for i in range(len(changes))]
        policy = af.Policy(loops=ladder)
        live, moved = _walk(af.Controller(policy), said, tool, contents, reload=False)
        loaded, _ = _walk(af.Controller(policy), said, tool, contents, reload=True)
        assert loaded == live
        path = tmp_path_factory.mktemp("ladder") / "run.json"
        path.write_text(json.dumps(_messages(tool, said[: len(moved)], contents)))
        (run,) = read_runs(path)
        replayed = replay_run(run, policy)
        # A message list records no finish reason (the replay names that conflict, P7), so
        # the replay is compared by action and by the ladder's own guards.
        assert [(d.action, _rung(d.guard)) for d in replayed.decisions if d.turn] == [
            (a.value, _rung(g)) for a, g in live
        ]


def _rung(guard: str) -> str:
    return guard if guard.startswith("LoopRung") else ""


def _walk(
    ctl: af.Controller, said: list[dict[str, Any]], tool: str, contents: list[str], *, reload: bool
) -> tuple[list[tuple[af.Action, str]], list[int]]:
    """Every decision's action and guard, and the calls made, until the run stops."""
    seen: list[tuple[af.Action, str]] = []
    made: list[int] = []
    for i, args in enumerate(said):
        if reload:
            ctl = af.Controller.load(json.loads(json.dumps(ctl.dump())))
        decision = _call(ctl, i, tool, args)
        made.append(i)
        seen.append((decision.action, decision.guard))
        if ctl.done:
            break
        if decision.action is af.Action.ASK_HUMAN:
            decision = ctl.on_human_reply(approved=True)
            seen.append((decision.action, decision.guard))
        decision = ctl.on_tool_results([af.ToolResult(call_id=f"c{i}", content=contents[i])])
        seen.append((decision.action, decision.guard))
    return seen, made


def _messages(tool: str, said: list[dict[str, Any]], contents: list[str]) -> list[dict[str, Any]]:
    """The run as an OpenAI chat message list, as a host would have logged it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i, args in enumerate(said):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": tool, "arguments": json.dumps(args)},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": contents[i]})
    return messages
