"""The contract additions: stop, steering, host-decided ends, conversations, repeat feedback."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

import agentfsm as af
from agentfsm.exceptions import AgentFSMError, InvalidInputError

A, X = af.Action, af.ExitReason


def call(name: str, cid: str, **arguments: Any) -> af.ToolCall:
    return af.ToolCall(id=cid, name=name, arguments=arguments)


def calls_turn(*calls: af.ToolCall, output_tokens: int = 5) -> af.ModelTurn:
    usage = af.Usage(input_tokens=10, output_tokens=output_tokens)
    return af.ModelTurn(
        tool_calls=list(calls), finish_reason=af.FinishReason.TOOL_CALLS, usage=usage
    )


def answer(text: str = "done") -> af.ModelTurn:
    usage = af.Usage(input_tokens=10, output_tokens=5)
    return af.ModelTurn(text=text, finish_reason=af.FinishReason.STOP, usage=usage)


class Events:
    """Collects the controller's events."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def __call__(self, event: Mapping[str, Any]) -> None:
        self.items.append(dict(event))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.items if e["event"] == name]


class TestStop:
    """`ctl.stop(reason, message)` ends a run from outside."""

    def test_stop_while_awaiting_the_model_is_interrupted(self) -> None:
        """The default reason is INTERRUPTED, the action STOP, and the trace ends the run."""
        events = Events()
        ctl = af.Controller(observers=[events])
        d = ctl.stop(message="the user pressed stop")
        assert (d.action, d.exit_reason, d.state) == (A.STOP, X.INTERRUPTED, af.State.END)
        assert "the user pressed stop" in d.reason
        assert ctl.done
        assert ctl.exit_reason is X.INTERRUPTED
        assert events.named("transition")[-1]["dst"] == "end"
        assert events.named("decision")[-1]["exit_reason"] == "interrupted"

    def test_stop_with_pending_calls_answers_each_of_them(self) -> None:
        """Calls still pending get one error result each in the decision."""
        ctl = af.Controller()
        ctl.on_model_output(calls_turn(call("a", "1"), call("b", "2")))
        d = ctl.stop(X.DEADLINE)
        assert d.exit_reason is X.DEADLINE
        assert [(r.call_id, r.is_error) for r in d.results] == [("1", True), ("2", True)]

    def test_a_string_reason_is_read_as_an_exit_reason(self) -> None:
        """`stop("provider_error")` is `stop(ExitReason.PROVIDER_ERROR)`."""
        assert af.Controller().stop("provider_error").exit_reason is X.PROVIDER_ERROR

    def test_stopping_an_ended_run_raises_and_changes_nothing(self) -> None:
        """A second stop is an InvalidInputError; the first end stays."""
        ctl = af.Controller()
        ctl.stop()
        with pytest.raises(InvalidInputError, match="already ended"):
            ctl.stop(X.DEADLINE)
        assert ctl.exit_reason is X.INTERRUPTED

    @pytest.mark.parametrize("reason", ["bored", 3, None])
    def test_an_unknown_reason_raises_before_anything_changes(self, reason: Any) -> None:
        """A reason that is no ExitReason raises AgentFSMError naming it; the run goes on."""
        ctl = af.Controller()
        with pytest.raises(AgentFSMError, match="not an ExitReason"):
            ctl.stop(reason)
        assert not ctl.done


class TestSteering:
    """A user message while results are pending skips what did not run."""

    def test_calls_without_results_are_skipped_and_the_model_is_next(self) -> None:
        """The missing results say "skipped: a user message arrived" and travel in `results`."""
        events = Events()
        ctl = af.Controller(observers=[events])
        ctl.on_model_output(calls_turn(call("a", "1"), call("b", "2"), call("c", "3")))
        assert ctl.on_user_message("stop, use the other file") is None
        d = ctl.on_tool_results([af.ToolResult(call_id="1", content="ran")])
        assert d.action is A.CONTINUE
        assert [(r.call_id, r.content) for r in d.results] == [
            ("2", "skipped: a user message arrived"),
            ("3", "skipped: a user message arrived"),
        ]
        assert "user message" in d.reason
        assert events.named("user_message")[-1]["text"] == "stop, use the other file"

    def test_no_results_at_all_skips_every_call(self) -> None:
        """Giving no result after the message answers each call once."""
        ctl = af.Controller()
        ctl.on_model_output(calls_turn(call("a", "1")))
        ctl.on_user_message("never mind")
        d = ctl.on_tool_results([])
        assert [r.call_id for r in d.results] == ["1"]

    def test_skipped_calls_are_not_tool_errors(self) -> None:
        """Skips do not count toward the consecutive tool-error limit."""
        ctl = af.Controller(af.Policy(max_consecutive_tool_errors=1))
        ctl.on_model_output(calls_turn(call("a", "1")))
        ctl.on_user_message("wait")
        assert ctl.on_tool_results([]).action is A.CONTINUE

    def test_without_a_message_a_missing_result_is_still_an_error(self) -> None:
        """The skip text is only for calls a user message skipped."""
        ctl = af.Controller()
        ctl.on_model_output(calls_turn(call("a", "1")))
        d = ctl.on_tool_results([])
        assert "no result was returned" in d.results[0].content

    def test_a_user_message_must_be_text(self) -> None:
        """A non-str message raises InvalidInputError."""
        with pytest.raises(InvalidInputError, match="must be a str"):
            af.Controller().on_user_message(None)  # type: ignore[arg-type]


class TestFinalTools:
    """A tool whose result ends the run as COMPLETED."""

    def test_the_final_tools_result_is_the_answer(self) -> None:
        """`Policy(final_tools=["submit"])`: the submit result ends the run with its content."""
        ctl = af.Controller(af.Policy(final_tools=["submit"]))
        d = ctl.on_model_output(calls_turn(call("submit", "s", patch="diff")))
        assert d.action is A.EXECUTE_TOOLS
        d = ctl.on_tool_results([af.ToolResult(call_id="s", content="diff --git a b")])
        assert (d.action, d.exit_reason) == (A.FINAL, X.COMPLETED)
        assert d.answer == "diff --git a b"
        assert (d.guard, d.path) == ("AnswerComplete()", ("execute", "verify", "end"))

    def test_a_failed_final_tool_does_not_end_the_run(self) -> None:
        """An error result from the final tool goes back to the model."""
        ctl = af.Controller(af.Policy(final_tools=["submit"]))
        ctl.on_model_output(calls_turn(call("submit", "s")))
        d = ctl.on_tool_results([af.ToolResult(call_id="s", content="tests fail", is_error=True)])
        assert d.action is A.CONTINUE

    def test_a_final_tool_that_is_a_handoff_ends_the_run_with_the_delegates_answer(
        self,
    ) -> None:
        """A handoff that is also a final tool (LangGraph's return_direct delegate): the
        delegate's answer ends the run; the model is not called again. It used to go back to
        the model, whose next call then ran."""
        ctl = af.Controller(af.Policy(handoffs=["research"], final_tools=["research"]))
        d = ctl.on_model_output(calls_turn(call("research", "h", task="find it")))
        assert d.action is A.HANDOFF
        d = ctl.on_tool_results([af.ToolResult(call_id="h", content="found it")])
        assert (d.action, d.exit_reason, d.answer) == (A.FINAL, X.COMPLETED, "found it")
        assert (d.guard, d.path) == ("AnswerComplete()", ("handoff", "verify", "end"))

    def test_an_answer_carries_its_text(self) -> None:
        """A FINAL from a model answer has the text as its answer."""
        assert af.Controller().on_model_output(answer("42")).answer == "42"

    def test_a_bare_name_is_one_tool(self) -> None:
        """`final_tools="submit"` names one tool, not six letters."""
        assert af.Policy(final_tools="submit").final_tools == frozenset({"submit"})


class TestConversations:
    """After FINAL a user message opens the next episode of the same run."""

    def test_turns_go_on_and_max_turns_counts_per_episode(self) -> None:
        """Two episodes of two turns each fit `max_turns=2`; turn numbers keep counting."""
        events = Events()
        ctl = af.Controller(af.Policy(max_turns=2), observers=[events])
        for episode in range(3):
            d = ctl.on_model_output(calls_turn(call("look", f"l{episode}", n=episode)))
            assert d.action is A.EXECUTE_TOOLS
            ctl.on_tool_results([af.ToolResult(call_id=f"l{episode}", content=str(episode))])
            d = ctl.on_model_output(answer(f"answer {episode}"))
            assert d.action is A.FINAL
            assert ctl.on_user_message(f"and then {episode}?") is None
            assert not ctl.done
        assert ctl.turn == 6
        assert [e["episode"] for e in events.named("episode_started")] == [2, 3, 4]

    def test_budgets_count_over_the_conversation(self) -> None:
        """The token budget keeps counting across episodes."""
        ctl = af.Controller(af.Policy(max_tokens=40))
        assert ctl.on_model_output(answer()).action is A.FINAL  # 15 tokens
        ctl.on_user_message("more")
        assert ctl.on_model_output(answer()).action is A.FINAL  # 30: an answer needs no budget
        ctl.on_user_message("more")
        d = ctl.on_model_output(calls_turn(call("a", "1")))  # 45 > 40
        assert d.exit_reason is X.TOKEN_BUDGET

    def test_an_interrupted_run_continues_with_the_next_message(self) -> None:
        """After stop(INTERRUPTED), the user's next message continues the conversation."""
        ctl = af.Controller()
        ctl.stop()
        assert ctl.on_user_message("sorry, go on") is None
        assert ctl.state == "await_model"

    def test_a_run_stopped_by_a_limit_does_not_continue(self) -> None:
        """A user message after a STOP for a limit raises and leaves the end as it was."""
        ctl = af.Controller(af.Policy(max_turns=1))
        ctl.on_model_output(calls_turn(call("a", "1")))
        with pytest.raises(InvalidInputError, match="max_turns"):
            ctl.on_user_message("again")
        assert ctl.exit_reason is X.MAX_TURNS


class TestRepeatFeedback:
    """`on_repeat="feedback"` refuses the repeated call and lets the model try again."""

    def loop(self, ctl: af.Controller, n: int, result: Any = "same") -> list[af.Decision]:
        decisions = []
        for i in range(n):
            d = ctl.on_model_output(calls_turn(call("status", f"c{i}", job="7")))
            decisions.append(d)
            if d.action is A.EXECUTE_TOOLS:
                content = result(i) if callable(result) else result
                ctl.on_tool_results([af.ToolResult(call_id=f"c{i}", content=content)])
            elif d.action is not A.CONTINUE:
                break
        return decisions

    def test_the_third_identical_call_gets_an_error_result_and_the_run_goes_on(self) -> None:
        """The repeated call is not executed; an error result says why; the action is CONTINUE."""
        ctl = af.Controller(af.Policy(on_repeat="feedback"))
        decisions = self.loop(ctl, 3)
        assert [d.action for d in decisions] == [A.EXECUTE_TOOLS, A.EXECUTE_TOOLS, A.CONTINUE]
        (result,) = decisions[-1].results
        assert result.is_error
        assert result.content.startswith("not executed: status(")

    def test_a_model_that_ignores_the_feedback_ends_as_a_doom_loop(self) -> None:
        """By default two more repeats after the feedback end the run as DOOM_LOOP."""
        decisions = self.loop(af.Controller(), 10)
        assert [d.action for d in decisions] == [
            *[A.EXECUTE_TOOLS] * 2,
            *[A.CONTINUE] * 2,
            A.STOP,
        ]
        assert decisions[-1].exit_reason is X.DOOM_LOOP

    def test_feedback_is_bounded_by_the_tool_error_limit(self) -> None:
        """Refused repeats are tool errors: a low error limit ends the run first."""
        ctl = af.Controller(af.Policy(on_repeat="feedback", max_consecutive_tool_errors=2))
        decisions = self.loop(ctl, 10)
        assert decisions[-1].exit_reason is X.TOOL_ERRORS
        assert sum(d.action is A.EXECUTE_TOOLS for d in decisions) == 2

    @pytest.mark.parametrize("on_repeat", ["stop", "feedback", "ask"])
    def test_polling_whose_results_change_is_not_a_repeat(self, on_repeat: str) -> None:
        """The same status call answered differently each time runs as often as needed."""
        ctl = af.Controller(af.Policy(on_repeat=on_repeat))
        decisions = self.loop(ctl, 8, result=lambda i: f"{i * 10}% done")
        assert all(d.action is A.EXECUTE_TOOLS for d in decisions)

    def test_feedback_is_a_valid_policy_value(self) -> None:
        """An unknown on_repeat value is refused."""
        with pytest.raises(Exception, match="on_repeat"):
            af.Policy(on_repeat="complain")


class TestCharge:
    """A sub-agent's usage is charged to the parent's budgets."""

    def test_charged_tokens_count_toward_the_budget(self) -> None:
        """Tokens charged while a call runs stop the run at the next decision."""
        ctl = af.Controller(af.Policy(max_tokens=100))
        ctl.on_model_output(calls_turn(call("delegate", "d")))
        ctl.charge(af.Usage(input_tokens=80, output_tokens=20, cost=0.01))
        d = ctl.on_tool_results([af.ToolResult(call_id="d", content="child done")])
        assert d.exit_reason is X.TOKEN_BUDGET

    def test_charge_takes_a_usage(self) -> None:
        """Anything but a Usage raises InvalidInputError."""
        with pytest.raises(InvalidInputError, match="Usage"):
            af.Controller().charge({"input_tokens": 3})  # type: ignore[arg-type]
