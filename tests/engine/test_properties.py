"""Property tests: fuzz provider signals through the Controller and check the invariants.

Payloads are real OpenAI chat-completions bodies with every finish reason a
provider sends (and some none does), tool calls present, absent, truncated,
invalid JSON, with missing or duplicate ids, and arbitrary usage numbers.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import agentfsm as af

A = af.Action
DECLARED = ["get_weather", "search", "write_file"]
DENIED = "write_file"
NAMES = [*DECLARED, "undeclared_tool"]

finish_reasons = st.one_of(
    st.sampled_from(["stop", "tool_calls", "length", "unknown", "", "content_filter", "end_turn"]),
    st.none(),
    st.text(max_size=12),
)
arguments = st.dictionaries(
    st.sampled_from(["q", "latitude", "path"]), st.integers(-5, 5) | st.text(max_size=5), max_size=2
)


@st.composite
def raw_arguments(draw: st.DrawFn) -> str:
    """Argument text: a JSON object, a cut prefix of one, garbage, null or a non-object."""
    text = json.dumps(draw(arguments))
    kind = draw(st.sampled_from(["object", "object", "object", "cut", "garbage", "null", "list"]))
    if kind == "cut":
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    return {"object": text, "garbage": "{not json", "null": "null", "list": "[1, 2]"}[kind]


@st.composite
def tool_call_dicts(draw: st.DrawFn) -> dict[str, Any]:
    """One OpenAI tool call, its id possibly missing or empty."""
    call: dict[str, Any] = {
        "type": "function",
        "function": {"name": draw(st.sampled_from(NAMES)), "arguments": draw(raw_arguments())},
    }
    ident = draw(st.sampled_from(["call_a", "call_b", "", None, "fresh"]))
    if ident == "fresh":
        ident = f"call_{draw(st.integers(0, 10**6))}"
    if ident is not None:
        call["id"] = ident
    return call


@st.composite
def payloads(draw: st.DrawFn) -> dict[str, Any]:
    """An OpenAI chat-completions body with fuzzed signals."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": draw(st.sampled_from(["", None, "ok", "Done."])),
    }
    calls = draw(st.lists(tool_call_dicts(), max_size=3))
    keep_empty_list = draw(st.booleans())
    if calls or keep_empty_list:
        message["tool_calls"] = calls
    body: dict[str, Any] = {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": draw(finish_reasons)}],
    }
    if draw(st.booleans()):
        body["usage"] = {
            "prompt_tokens": draw(st.integers(0, 10**6)),
            "completion_tokens": draw(st.integers(0, 10**5)),
        }
    return body


REPEATED_CALL: dict[str, Any] = {
    "id": "chatcmpl-x",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                        "id": "call_a",
                    }
                ],
            },
            "finish_reason": "stop",
        }
    ],
}
"""A body the deep profile found: the same complete call, given again and again."""


def policy() -> af.Policy:
    return af.Policy(max_turns=8, permissions={DENIED: "deny", "search": "allow"})


def runnable(turn: af.ModelTurn) -> bool:
    """Whether the turn has a call the contract says must run: complete, declared, allowed."""
    return any(c.complete and c.name in DECLARED and c.name != DENIED for c in turn.tool_calls)


def check(decision: af.Decision, turn: af.ModelTurn | None) -> None:
    """The invariants every single decision keeps."""
    if decision.action in (A.FINAL, A.STOP):
        assert decision.exit_reason is not None
    if decision.action is A.FINAL:
        assert decision.exit_reason is af.ExitReason.COMPLETED
    for call in decision.tool_calls if decision.action is A.EXECUTE_TOOLS else []:
        assert call.name in DECLARED
        assert call.name != DENIED
        assert call.complete
    if turn is None:
        return
    if turn.truncated or turn.finish_reason is af.FinishReason.LENGTH:
        assert decision.action is not A.EXECUTE_TOOLS
        assert decision.action is not A.FINAL
    if runnable(turn) and decision.action is not A.EXECUTE_TOOLS:
        # A call the model repeats past `repeat_threshold` is refused, and with the default
        # on_repeat="feedback" the refusal goes back to the model as its error result.
        refused_as_repeats = (
            decision.action is A.CONTINUE
            and bool(decision.results)
            and all(r.is_error and "in a row" in str(r.content) for r in decision.results)
        )
        assert decision.priority in ("P0", "P6") or refused_as_repeats, decision


class TestFuzzedRuns:
    @settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
    @given(st.lists(payloads(), min_size=1, max_size=12), st.lists(st.booleans(), max_size=12))
    @example([REPEATED_CALL] * 3, [])  # the third identical call is refused with feedback
    def test_every_run_ends_within_max_turns_and_keeps_the_invariants(
        self, outputs: list[dict[str, Any]], errors: list[bool]
    ) -> None:
        """Whatever the provider sends, no exception escapes, and the run ends by max_turns."""
        ctl = af.Controller(policy(), tools=DECLARED)
        outstanding: set[str] = set()
        feed = iter(outputs)
        for step in range(100):
            payload = next(feed, None) or {
                "choices": [
                    {"message": {"role": "assistant", "content": ""}, "finish_reason": None}
                ]
            }
            turn = af.normalize(payload)
            assert not outstanding
            decision = ctl.on_model_output(payload)
            check(decision, turn)
            while decision.action in (A.EXECUTE_TOOLS, A.ASK_HUMAN):
                if decision.action is A.ASK_HUMAN:
                    decision = ctl.on_human_reply(approved=bool(step % 2))
                else:
                    outstanding = {c.id for c in decision.tool_calls}
                    results = [
                        af.ToolResult(
                            call_id=c.id,
                            content=f"r{i}",
                            is_error=errors[i % len(errors)] if errors else False,
                        )
                        for i, c in enumerate(decision.tool_calls)
                    ]
                    decision = ctl.on_tool_results(results)
                    outstanding.clear()
                check(decision, None)
            if decision.action in (A.FINAL, A.STOP):
                break
        assert ctl.done, "the run did not end"
        assert ctl.turn <= 8
        assert ctl.exit_reason is not None


class ControllerMachine(RuleBasedStateMachine):
    """Random sequences of outputs, results, human replies, user messages, stops and episodes."""

    def __init__(self) -> None:
        super().__init__()
        self.ctl = af.Controller(policy(), tools=DECLARED)
        self.last: af.Decision | None = None
        self.base = 0  # the turn before the current episode

    @precondition(lambda self: self.ctl.state == "await_model")
    @rule(payload=payloads())
    def model_output(self, payload: dict[str, Any]) -> None:
        self.last = self.ctl.on_model_output(payload)
        check(self.last, af.normalize(payload))

    @precondition(lambda self: self.ctl.state in ("execute", "handoff"))
    @rule(keep=st.lists(st.booleans(), min_size=3, max_size=3), error=st.booleans())
    def tool_results(self, keep: list[bool], error: bool) -> None:
        calls = self.ctl.pending_calls
        results = [
            af.ToolResult(call_id=c.id, content="r", is_error=error)
            for c, k in zip(calls, keep, strict=False)
            if k
        ]
        self.last = self.ctl.on_tool_results(results)
        check(self.last, None)
        assert {r.call_id for r in self.last.results if r.is_error} >= {
            c.id for c, k in zip(calls, keep, strict=False) if not k
        }

    @precondition(lambda self: self.ctl.state == "execute")
    @rule()
    def unknown_result(self) -> None:
        before = (self.ctl.state, self.ctl.turn)
        try:
            self.ctl.on_tool_results([af.ToolResult(call_id="never-asked", content="?")])
        except af.exceptions.UnknownCallIdError:
            pass
        else:
            raise AssertionError("an unknown call id was accepted")
        assert (self.ctl.state, self.ctl.turn) == before

    @precondition(lambda self: self.ctl.state == "await_human")
    @rule(approved=st.booleans(), message=st.none() | st.just("go on"))
    def human_reply(self, approved: bool, message: str | None) -> None:
        self.last = self.ctl.on_human_reply(approved, message)
        check(self.last, None)

    @precondition(lambda self: self.ctl.state == "await_model")
    @rule()
    def user_message(self) -> None:
        assert self.ctl.on_user_message("please continue") is None

    @precondition(lambda self: self.ctl.state in ("execute", "handoff"))
    @rule()
    def steer(self) -> None:
        pending = {c.id for c in self.ctl.pending_calls}
        assert self.ctl.on_user_message("change of plan") is None
        self.last = self.ctl.on_tool_results([])
        check(self.last, None)
        assert {r.call_id for r in self.last.results} >= pending

    @precondition(lambda self: not self.ctl.done)
    @rule()
    def stop(self) -> None:
        pending = {c.id for c in self.ctl.pending_calls}
        self.last = self.ctl.stop(message="the user pressed stop")
        check(self.last, None)
        assert self.last.exit_reason is af.ExitReason.INTERRUPTED
        assert {r.call_id for r in self.last.results} == pending

    @precondition(
        lambda self: (
            self.ctl.done
            and self.ctl.exit_reason in (af.ExitReason.COMPLETED, af.ExitReason.INTERRUPTED)
        )
    )
    @rule()
    def follow_up(self) -> None:
        self.base = self.ctl.turn
        assert self.ctl.on_user_message("and then?") is None
        assert self.ctl.state == "await_model"

    @precondition(lambda self: self.ctl.done)
    @rule()
    def next_run(self) -> None:
        self.ctl = af.Controller(policy(), tools=DECLARED)
        self.base = 0

    @invariant()
    def bounded_and_explained(self) -> None:
        assert self.ctl.turn - self.base <= 8
        assert self.ctl.state in {s.value for s in af.State}
        if self.ctl.done:
            assert self.ctl.exit_reason is not None
        if self.ctl.state == "await_model" and self.ctl.turn - self.base >= 8:
            raise AssertionError("an episode awaits a ninth model output")


TestControllerMachine = ControllerMachine.TestCase
TestControllerMachine.settings = settings(stateful_step_count=30, deadline=None)


def _summary(decision: af.Decision) -> tuple[object, ...]:
    return (decision.action, decision.priority, decision.guard, decision.reason, decision.path)


class TestEnginesAgree:
    @settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
    @given(st.lists(payloads(), min_size=1, max_size=8), st.lists(st.booleans(), max_size=8))
    def test_the_compiled_walk_decides_as_the_transitions_machine(
        self, outputs: list[dict[str, Any]], errors: list[bool]
    ) -> None:
        """The per-phase compiled table and the shared transitions machine agree on every input."""
        runs: list[list[tuple[object, ...]]] = []
        for engine in ("compiled", "transitions"):
            ctl = af.Controller(policy(), tools=DECLARED, engine=engine)
            seen: list[tuple[object, ...]] = []
            for i, payload in enumerate(outputs):
                if ctl.done:
                    break
                decision = ctl.on_model_output(payload)
                seen.append(_summary(decision))
                while decision.action in (A.EXECUTE_TOOLS, A.ASK_HUMAN):
                    if decision.action is A.ASK_HUMAN:
                        decision = ctl.on_human_reply(approved=i % 2 == 0)
                    else:
                        flags = errors or [False]
                        decision = ctl.on_tool_results(
                            [
                                af.ToolResult(
                                    call_id=c.id, content="r", is_error=flags[k % len(flags)]
                                )
                                for k, c in enumerate(decision.tool_calls)
                            ]
                        )
                    seen.append(_summary(decision))
            runs.append(seen)
        assert runs[0] == runs[1]
