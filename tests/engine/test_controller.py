"""The Controller's contract, behaviour by behaviour (DESIGN.md, "The public contract")."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
import structlog

import agentfsm as af
from agentfsm.exceptions import InvalidInputError, PayloadError, UnknownCallIdError
from agentfsm.testing import EventCapture, call, turn

A, X = af.Action, af.ExitReason


def weather(**args: Any) -> af.ToolCall:
    return call("get_weather", args or {"latitude": 31.2, "longitude": 121.5}, id="c1")


def openai_body(message: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def tool_message(*calls: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ],
    }


class TestToolCalls:
    def test_valid_calls_are_executed_then_results_continue(self) -> None:
        """Valid tool calls give EXECUTE_TOOLS (P1); their results give CONTINUE (P1)."""
        ctl = af.Controller()
        d = ctl.on_model_output(turn(calls=[weather()]))
        assert (d.action, d.priority, d.layer) == (A.EXECUTE_TOOLS, "P1", 1)
        assert [c.id for c in d.tool_calls] == ["c1"]
        assert ctl.state == "execute"
        d = ctl.on_tool_results([af.ToolResult(call_id="c1", content="sunny")])
        assert (d.action, d.priority) == (A.CONTINUE, "P1")
        assert ctl.state == "await_model"

    @pytest.mark.parametrize("finish", ["stop", "unknown", "", "end_turn", "length_not"])
    def test_tool_calls_run_whatever_the_finish_reason_says(self, finish: str) -> None:
        """Tool calls under stop, unknown or an odd finish reason still run; P7 says so."""
        d = af.Controller().on_model_output(turn(calls=[weather()], finish=finish))
        assert d.action is A.EXECUTE_TOOLS
        assert d.priority == "P7"
        assert "structure wins" in d.reason

    def test_an_openai_body_with_stop_and_tool_calls_executes(self) -> None:
        """An OpenAI-compatible body that says stop with tool_calls executes them (P7)."""
        body = openai_body(tool_message(("call_1", "get_weather", '{"latitude": 1}')), "stop")
        d = af.Controller().on_model_output(body)
        assert d.action is A.EXECUTE_TOOLS
        assert d.priority == "P7"
        assert d.tool_calls[0].arguments == {"latitude": 1}

    def test_missing_ids_are_issued_and_the_reason_says_so(self) -> None:
        """Calls without ids get deterministic ids, unique in the run, named in the reason."""
        ctl = af.Controller()
        d = ctl.on_model_output(turn(calls=[call("a"), call("b")]))
        ids = [c.id for c in d.tool_calls]
        assert ids == ["afsm_1_0", "afsm_1_1"]
        assert "issued id 'afsm_1_0'" in d.reason
        d = ctl.on_tool_results([af.ToolResult(call_id=i, content=i) for i in ids])
        d = ctl.on_model_output(turn(calls=[call("a", {"x": 1})]))
        assert d.tool_calls[0].id == "afsm_2_0"

    def test_a_duplicate_id_in_one_turn_is_reissued_for_the_later_call(self) -> None:
        """Two calls with one id: the first keeps it, the second gets a new one."""
        d = af.Controller().on_model_output(turn(calls=[call("a", id="x"), call("b", id="x")]))
        assert [c.id for c in d.tool_calls] == ["x", "afsm_1_1"]
        assert "repeated id 'x'" in d.reason

    def test_an_undeclared_tool_is_not_executed_and_the_model_gets_an_error(self) -> None:
        """With declared tools, a call to another name becomes an error result, not a run."""
        ctl = af.Controller(tools=["get_weather"])
        d = ctl.on_model_output(turn(calls=[call("rm_rf", id="bad"), weather()]))
        assert d.action is A.EXECUTE_TOOLS
        assert [c.name for c in d.tool_calls] == ["get_weather"]
        assert [(r.call_id, r.is_error) for r in d.results] == [("bad", True)]
        assert "unknown tool 'rm_rf'" in d.results[0].content

    def test_only_undeclared_calls_feed_the_errors_back(self) -> None:
        """When every call is refused, the decision is CONTINUE (P5) with the error results."""
        d = af.Controller(tools=["get_weather"]).on_model_output(turn(calls=[call("nope", id="n")]))
        assert (d.action, d.priority) == (A.CONTINUE, "P5")
        assert d.results[0].call_id == "n"

    def test_arguments_are_checked_against_the_declared_schema(self) -> None:
        """A call whose arguments miss a required field is refused with the schema's complaint."""
        spec = {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"latitude": {"type": "number"}, "longitude": {"type": "number"}},
                "required": ["latitude", "longitude"],
            },
        }
        d = af.Controller(tools=[spec]).on_model_output(turn(calls=[call("get_weather", {}, "c")]))
        assert d.action is A.CONTINUE
        assert "missing required argument 'latitude'" in d.results[0].content

    def test_a_callable_tool_validates_arguments_by_its_signature(self) -> None:
        """A Python function declared as a tool checks argument types by its annotations."""

        def get_weather(latitude: float, longitude: float) -> str:
            return f"{latitude},{longitude}"

        ctl = af.Controller(tools=[get_weather])
        d = ctl.on_model_output(turn(calls=[call("get_weather", {"latitude": "north"}, "c")]))
        assert d.action is A.CONTINUE
        assert "latitude" in d.results[0].content


class TestResults:
    def test_a_missing_result_is_synthesized_and_named(self) -> None:
        """A call id without a result gets an error result the host must send; reason says so."""
        ctl = af.Controller()
        ctl.on_model_output(turn(calls=[call("a", id="1"), call("b", id="2")]))
        d = ctl.on_tool_results([af.ToolResult(call_id="1", content="ok")])
        assert (d.action, d.priority) == (A.CONTINUE, "P5")
        assert [r.call_id for r in d.results] == ["2"]
        assert d.results[0].is_error
        assert "no result for call 2" in d.reason

    def test_a_result_for_an_unknown_id_raises_and_changes_nothing(self) -> None:
        """A result for an id never asked for raises UnknownCallIdError; the state is unchanged."""
        ctl = af.Controller()
        ctl.on_model_output(turn(calls=[call("a", id="1")]))
        with pytest.raises(UnknownCallIdError, match=r"'zzz'.*never asked for"):
            ctl.on_tool_results([af.ToolResult(call_id="zzz", content="?")])
        assert ctl.state == "execute"
        d = ctl.on_tool_results([af.ToolResult(call_id="1", content="ok")])
        assert d.action is A.CONTINUE

    def test_error_results_are_fed_back_until_the_bound(self) -> None:
        """Error results give CONTINUE (P5) until max_consecutive_tool_errors ends the run."""
        ctl = af.Controller(af.Policy(max_consecutive_tool_errors=2))
        ctl.on_model_output(turn(calls=[call("a", {"i": 1}, "1")]))
        d = ctl.on_tool_results([af.ToolResult(call_id="1", content="boom", is_error=True)])
        assert (d.action, d.priority) == (A.CONTINUE, "P5")
        ctl.on_model_output(turn(calls=[call("a", {"i": 2}, "2")]))
        d = ctl.on_tool_results([af.ToolResult(call_id="2", content="boom", is_error=True)])
        assert (d.action, d.exit_reason) == (A.STOP, X.TOOL_ERRORS)

    def test_a_malformed_result_names_what_was_expected(self) -> None:
        """A result that is not a ToolResult raises InvalidInputError; the state is unchanged."""
        ctl = af.Controller()
        ctl.on_model_output(turn(calls=[call("a", id="1")]))
        with pytest.raises(InvalidInputError, match=r"tool result #0 .*call_id"):
            ctl.on_tool_results([{"content": "no id"}])
        assert ctl.state == "execute"
        assert ctl.on_tool_results([{"call_id": "1", "content": "ok"}]).action is A.CONTINUE

    def test_results_are_taken_only_while_executing(self) -> None:
        """Results while awaiting the model raise InvalidInputError naming both states."""
        with pytest.raises(InvalidInputError, match="await_model"):
            af.Controller().on_tool_results([])


class TestAnswers:
    def test_a_text_answer_is_final(self) -> None:
        """A non-empty answer without tool calls ends the run as COMPLETED (P3)."""
        ctl = af.Controller()
        d = ctl.on_model_output(turn("It is sunny."))
        assert (d.action, d.priority, d.exit_reason) == (A.FINAL, "P3", X.COMPLETED)
        assert ctl.done
        assert ctl.exit_reason is X.COMPLETED

    @pytest.mark.parametrize("finish", ["unknown", "", "weird_reason"])
    def test_unknown_finish_with_text_is_final_not_a_loop(self, finish: str) -> None:
        """An unrecognised finish reason with a text answer ends; it does not loop."""
        d = af.Controller().on_model_output(turn("done", finish=finish))
        assert d.action is A.FINAL

    def test_an_empty_answer_is_not_final_and_cannot_loop_forever(self) -> None:
        """Empty answers give CONTINUE (P4), and in a row they end as NO_PROGRESS."""
        ctl = af.Controller(af.Policy(no_progress_threshold=3))
        actions = [ctl.on_model_output(turn("", finish="unknown")).action for _ in range(3)]
        assert actions == [A.CONTINUE, A.CONTINUE, A.STOP]
        assert ctl.exit_reason is X.NO_PROGRESS

    def test_a_verifier_can_refuse_an_answer(self) -> None:
        """A failing completion check keeps the run going with the verifier's words."""

        def cites_source(snap: af.RunSnapshot) -> str | None:
            out = snap.output
            return None if out and "source:" in out.text else "no source cited"

        ctl = af.Controller(af.Policy(verifiers=(cites_source,)))
        d = ctl.on_model_output(turn("It is sunny."))
        assert (d.action, d.priority, d.reason) == (A.CONTINUE, "P4", "no source cited")
        assert ctl.on_model_output(turn("Sunny. source: met office")).action is A.FINAL

    def test_on_incomplete_ask_asks_the_user(self) -> None:
        """With on_incomplete="ask", an incomplete answer asks the human; the reply continues."""
        ctl = af.Controller(af.Policy(on_incomplete="ask"))
        d = ctl.on_model_output(turn(""))
        assert d.action is A.ASK_HUMAN
        d = ctl.on_human_reply(approved=True, message="try again")
        assert d.action is A.CONTINUE

    def test_pause_turn_calls_the_model_again(self) -> None:
        """Anthropic pause_turn is not final: CONTINUE (P4)."""
        d = af.Controller().on_model_output(turn("searching...", finish="pause"))
        assert (d.action, d.priority) == (A.CONTINUE, "P4")

    def test_refusal_and_content_filter_end_the_run_but_never_as_completed(self) -> None:
        """Refusal and filtering are STOP with their own exit reasons."""
        d = af.Controller().on_model_output(turn("I can't help with that.", finish="refusal"))
        assert (d.action, d.exit_reason, d.priority) == (A.STOP, X.REFUSAL, "P6")
        d = af.Controller().on_model_output(turn("", finish="content_filter"))
        assert (d.action, d.exit_reason) == (A.STOP, X.CONTENT_FILTER)

    def test_openai_refusal_field_under_stop_is_a_refusal(self) -> None:
        """OpenAI's message.refusal with finish_reason stop ends as REFUSAL."""
        body = openai_body({"role": "assistant", "content": None, "refusal": "No."}, "stop")
        assert af.Controller().on_model_output(body).exit_reason is X.REFUSAL

    def test_a_provider_error_without_calls_stops(self) -> None:
        """An error finish without output ends as PROVIDER_ERROR."""
        d = af.Controller().on_model_output(turn("", finish="error"))
        assert (d.action, d.exit_reason) == (A.STOP, X.PROVIDER_ERROR)


class TestRecovery:
    def test_a_truncated_tool_block_is_retried_never_executed(self) -> None:
        """A length-cut turn with a tool call is RETRY (P0) and suggests more tokens."""
        cut = af.ToolCall(id="c", name="w", raw_arguments='{"lat', error="truncated JSON")
        d = af.Controller().on_model_output(turn(calls=[cut], finish="length", truncated=True))
        assert (d.action, d.priority) == (A.RETRY, "P0")
        assert d.tool_calls == []
        assert d.adjust == {"max_tokens_factor": 2}

    def test_length_with_complete_calls_still_retries(self) -> None:
        """Even complete-looking calls from a length-cut turn are not executed."""
        d = af.Controller().on_model_output(turn(calls=[weather()], finish="length"))
        assert d.action is A.RETRY

    def test_a_truncated_answer_is_retried_not_final(self) -> None:
        """A truncated text answer is RETRY, not FINAL."""
        d = af.Controller().on_model_output(turn("The weather tomorrow is", finish="length"))
        assert d.action is A.RETRY

    def test_unparseable_arguments_are_retried(self) -> None:
        """A call whose arguments are not JSON is RETRY (P0) naming the call."""
        bad = af.ToolCall(id="c", name="w", raw_arguments="{nope", error="invalid JSON")
        d = af.Controller().on_model_output(turn(calls=[bad]))
        assert (d.action, d.priority) == (A.RETRY, "P0")
        assert "'w'" in d.reason

    def test_retries_are_bounded(self) -> None:
        """After max_retries recoveries in a row the run ends as UNRECOVERABLE_OUTPUT."""
        ctl = af.Controller(af.Policy(max_retries=2))
        decisions = [ctl.on_model_output(turn("cut", finish="length")) for _ in range(3)]
        assert [d.action for d in decisions] == [A.RETRY, A.RETRY, A.STOP]
        assert ctl.exit_reason is X.UNRECOVERABLE_OUTPUT
        assert [d.adjust for d in decisions] == [{"max_tokens_factor": 2}] * 2 + [{}]

    def test_a_good_output_resets_the_retry_count(self) -> None:
        """Retries count in a row: a usable output in between resets them."""
        ctl = af.Controller(af.Policy(max_retries=1))
        assert ctl.on_model_output(turn("cut", finish="length")).action is A.RETRY
        ctl.on_model_output(turn(calls=[weather()]))
        ctl.on_tool_results([af.ToolResult(call_id="c1", content="ok")])
        assert ctl.on_model_output(turn("cut", finish="length")).action is A.RETRY


class TestBudgets:
    def test_the_last_turn_may_still_answer(self) -> None:
        """A final answer on the last allowed turn is COMPLETED, not MAX_TURNS."""
        ctl = af.Controller(af.Policy(max_turns=2))
        ctl.on_model_output(turn(calls=[weather()]))
        ctl.on_tool_results([af.ToolResult(call_id="c1", content="ok")])
        assert ctl.on_model_output(turn("done")).exit_reason is X.COMPLETED

    def test_tool_calls_on_the_last_turn_stop_without_running(self) -> None:
        """Calls on the last turn would never be read: STOP with MAX_TURNS, nothing executed."""
        ctl = af.Controller(af.Policy(max_turns=1))
        d = ctl.on_model_output(turn(calls=[weather()]))
        assert (d.action, d.exit_reason, d.priority) == (A.STOP, X.MAX_TURNS, "P6")
        assert d.tool_calls == []

    def test_a_retry_on_the_last_turn_stops(self) -> None:
        """A retry needs another model call, so on the last turn it is MAX_TURNS."""
        ctl = af.Controller(af.Policy(max_turns=1))
        assert ctl.on_model_output(turn("cut", finish="length")).exit_reason is X.MAX_TURNS

    def test_max_tool_calls_stops_before_running_too_many(self) -> None:
        """Calls that would pass max_tool_calls are not run: STOP with MAX_TOOL_CALLS."""
        ctl = af.Controller(af.Policy(max_tool_calls=1))
        d = ctl.on_model_output(turn(calls=[call("a", id="1"), call("b", id="2")]))
        assert (d.action, d.exit_reason) == (A.STOP, X.MAX_TOOL_CALLS)

    @pytest.mark.parametrize(
        ("policy", "usage", "cost", "reason"),
        [
            (af.Policy(max_tokens=100), (90, 20), None, X.TOKEN_BUDGET),
            (af.Policy(max_cost=0.01), (1, 1), 0.02, X.COST_BUDGET),
            (af.Policy(max_context_tokens=50), (60, 1), None, X.CONTEXT_EXHAUSTED),
            (af.Policy(max_seconds=0), (1, 1), None, X.DEADLINE),
        ],
    )
    def test_budgets_stop_before_another_call(
        self, policy: af.Policy, usage: tuple[int, int], cost: float | None, reason: af.ExitReason
    ) -> None:
        """Token, cost, context and wall-time budgets stop a run that wants to go on."""
        d = af.Controller(policy).on_model_output(turn(calls=[weather()], usage=usage, cost=cost))
        assert (d.action, d.exit_reason) == (A.STOP, reason)

    def test_extra_guards_compose_with_the_policy(self) -> None:
        """A guard given directly stops the run with its own exit reason and repr."""
        from agentfsm.guards import MaxToolCalls, TokenBudget

        policy = af.Policy(guards=[TokenBudget(10) | MaxToolCalls(100)])
        assert policy == af.Policy(guards=["TokenBudget(10) | MaxToolCalls(100)"])
        d = af.Controller(policy).on_model_output(turn(calls=[weather()], usage=(20, 1)))
        assert d.exit_reason is X.TOKEN_BUDGET
        assert d.guard == "TokenBudget(10) | MaxToolCalls(100)"
        assert d.fired == "TokenBudget(10)"


class TestRepetition:
    def loop(self, ctl: af.Controller, n: int) -> list[af.Decision]:
        decisions = []
        for i in range(n):
            d = ctl.on_model_output(turn(calls=[call("search", {"q": "x"}, f"c{i}")]))
            decisions.append(d)
            if d.action is not A.EXECUTE_TOOLS:
                break
            ctl.on_tool_results([af.ToolResult(call_id=f"c{i}", content="same result")])
        return decisions

    def test_the_third_identical_call_is_not_executed(self) -> None:
        """With on_repeat="stop" the third identical call in a row stops the run (DOOM_LOOP, P6)."""
        decisions = self.loop(af.Controller(af.Policy(on_repeat="stop")), 5)
        assert [d.action for d in decisions] == [A.EXECUTE_TOOLS, A.EXECUTE_TOOLS, A.STOP]
        assert (decisions[-1].exit_reason, decisions[-1].priority) == (X.DOOM_LOOP, "P6")
        assert "3rd identical call" in decisions[-1].reason

    def test_on_repeat_ask_asks_a_human_with_the_calls(self) -> None:
        """With on_repeat="ask" the third call waits for approval and runs if approved."""
        ctl = af.Controller(af.Policy(on_repeat="ask"))
        d = self.loop(ctl, 3)[-1]
        assert d.action is A.ASK_HUMAN
        assert [c.id for c in d.tool_calls] == ["c2"]
        d = ctl.on_human_reply(approved=True)
        assert d.action is A.EXECUTE_TOOLS

    def test_a_user_message_resets_the_streak(self) -> None:
        """A user message between identical calls starts the count again."""
        ctl = af.Controller()
        self.loop(ctl, 2)
        assert ctl.on_user_message("please retry") is None
        assert self.loop(ctl, 2)[-1].action is A.EXECUTE_TOOLS

    def test_different_arguments_are_not_a_repeat(self) -> None:
        """Calls that differ in arguments never trip the doom-loop guard."""
        ctl = af.Controller()
        for i in range(6):
            d = ctl.on_model_output(turn(calls=[call("search", {"q": i}, f"c{i}")]))
            assert d.action is A.EXECUTE_TOOLS
            ctl.on_tool_results([af.ToolResult(call_id=f"c{i}", content=f"r{i}")])

    def test_ping_pong_with_identical_results_is_no_progress(self) -> None:
        """A, B, A, B... with the same results each time ends as NO_PROGRESS."""
        ctl = af.Controller(af.Policy(no_progress_threshold=3))
        for i in range(10):
            name = "a" if i % 2 == 0 else "b"
            d = ctl.on_model_output(turn(calls=[call(name, {}, f"c{i}")]))
            if d.action is not A.EXECUTE_TOOLS:
                break
            d = ctl.on_tool_results([af.ToolResult(call_id=f"c{i}", content=name)])
            if d.action is A.STOP:
                break
        assert d.exit_reason is X.NO_PROGRESS
        assert i == 4


class TestPermissions:
    def test_denied_calls_get_an_error_result_and_others_run(self) -> None:
        """A denied tool is never in EXECUTE_TOOLS; the model gets a denial."""
        ctl = af.Controller(af.Policy(permissions={"delete_file": "deny"}))
        d = ctl.on_model_output(turn(calls=[call("delete_file", {}, "d"), weather()]))
        assert [c.name for c in d.tool_calls] == ["get_weather"]
        assert "permission denied" in d.results[0].content

    def test_on_deny_stop_ends_the_run(self) -> None:
        """With on_deny="stop", a denied call ends the run as PERMISSION_DENIED."""
        policy = af.Policy(permissions={"*": "deny"}, on_deny="stop")
        d = af.Controller(policy).on_model_output(turn(calls=[weather()]))
        assert (d.action, d.exit_reason) == (A.STOP, X.PERMISSION_DENIED)

    def test_ask_waits_for_approval_then_runs(self) -> None:
        """An "ask" tool gives ASK_HUMAN with the call; approval executes it."""
        ctl = af.Controller(af.Policy(permissions={"get_weather": "ask"}))
        d = ctl.on_model_output(turn(calls=[weather()]))
        assert (d.action, [c.id for c in d.tool_calls]) == (A.ASK_HUMAN, ["c1"])
        assert ctl.state == "await_human"
        d = ctl.on_human_reply(approved=True)
        assert (d.action, [c.id for c in d.tool_calls]) == (A.EXECUTE_TOOLS, ["c1"])

    def test_declining_without_a_message_stops(self) -> None:
        """A plain decline ends the run as HUMAN_DECLINED."""
        ctl = af.Controller(af.Policy(permission=lambda c: "ask"))
        ctl.on_model_output(turn(calls=[weather()]))
        d = ctl.on_human_reply(approved=False)
        assert (d.action, d.exit_reason) == (A.STOP, X.HUMAN_DECLINED)

    def test_declining_with_a_message_tells_the_model(self) -> None:
        """A decline with a message continues, with the message in the calls' error results."""
        ctl = af.Controller(af.Policy(permission=lambda c: "ask"))
        ctl.on_model_output(turn(calls=[weather()]))
        d = ctl.on_human_reply(approved=False, message="use Celsius")
        assert d.action is A.CONTINUE
        assert d.results[0].content == "declined by the human: use Celsius"


class TestHandoff:
    def test_a_handoff_call_delegates_and_the_result_comes_back(self) -> None:
        """A call to a handoff name is HANDOFF (P2); the delegate's answer continues."""
        ctl = af.Controller(af.Policy(handoffs=frozenset({"transfer_to_billing"})))
        d = ctl.on_model_output(turn(calls=[call("transfer_to_billing", {}, "h")]))
        assert (d.action, d.priority) == (A.HANDOFF, "P2")
        d = ctl.on_tool_results([af.ToolResult(call_id="h", content="refunded")])
        assert d.action is A.CONTINUE


class TestBadInput:
    def test_an_unrecognisable_payload_raises_and_changes_nothing(self) -> None:
        """A payload no normalizer reads raises PayloadError; the controller can carry on."""
        ctl = af.Controller()
        with pytest.raises(PayloadError):
            ctl.on_model_output({"hello": "world"})
        assert (ctl.state, ctl.turn) == ("await_model", 0)
        assert ctl.on_model_output(turn("ok")).action is A.FINAL

    def test_nothing_is_taken_after_the_end(self) -> None:
        """After the end every input raises InvalidInputError."""
        ctl = af.Controller()
        ctl.on_model_output(turn("done"))
        with pytest.raises(InvalidInputError, match="'end'"):
            ctl.on_model_output(turn("again"))

    def test_errors_pickle_with_their_context(self) -> None:
        """A run error keeps its message, state and turn through pickle."""
        ctl = af.Controller()
        ctl.on_model_output(turn("done"))
        with pytest.raises(InvalidInputError) as info:
            ctl.on_model_output(turn("again"))
        copy = pickle.loads(pickle.dumps(info.value))
        assert (copy.state, copy.turn, str(copy)) == ("end", 1, str(info.value))


class TestEvents:
    def test_every_transition_is_one_event_with_flat_keys(self) -> None:
        """Observers get one transition event per edge, then the decision."""
        capture = EventCapture()
        ctl = af.Controller(run_id="r1", observers=[capture])
        ctl.on_model_output(turn(calls=[weather()]))
        assert capture.transitions == [
            ("await_model", "parse"),
            ("parse", "validate"),
            ("validate", "budget_check"),
            ("budget_check", "execute"),
        ]
        last = capture.named("transition")[-1]
        assert last["guard"] == "HasToolCalls()"
        assert (last["priority"], last["layer"], last["run_id"], last["turn"]) == ("P1", 1, "r1", 1)
        assert capture.named("decision")[0]["action"] == "execute_tools"
        assert capture.named("run_started")[0]["policy"]["max_turns"] == 50

    def test_structlog_gets_the_events_once_the_application_configured_it(self) -> None:
        """With structlog configured by the application, transitions are logged."""
        try:
            with structlog.testing.capture_logs() as logs:
                af.Controller().on_model_output(turn("done"))
        finally:
            structlog.reset_defaults()  # leave structlog unconfigured for the other tests
        events = [e for e in logs if e["event"] == "transition"]
        assert [(e["src"], e["dst"]) for e in events][-1] == ("verify", "end")


class TestEngines:
    def test_the_transitions_engine_decides_the_same(self) -> None:
        """Driving the shared transitions machine gives the same decisions as the compiled walk."""
        script = [
            turn(calls=[weather()], finish="stop"),
            [af.ToolResult(call_id="c1", content="sunny")],
            turn("cut", finish="length"),
            turn("Sunny tomorrow."),
        ]
        decisions = []
        for engine in ("compiled", "transitions"):
            ctl = af.Controller(engine=engine)
            for item in script:
                d = (
                    ctl.on_tool_results(item)
                    if isinstance(item, list)
                    else ctl.on_model_output(item)
                )
                decisions.append((d.action, d.priority, d.guard, d.reason, d.path))
        assert decisions[:4] == decisions[4:]
