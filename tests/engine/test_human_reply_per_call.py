"""A human answers each asked call on its own: yes, no with its own text, or yes with edits.

`on_human_reply` takes one bool for every asked call, or a mapping `{call_id: bool}`.
Approved calls run with the turn's allowed calls; each declined call gets its own
rejection text. Edited arguments are a new call for the policy: the arguments that
run are the arguments checked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._replay.engine import divergence, replay_run
from agentfsm._replay.trace import TraceWriter
from agentfsm._replay.trajectories import read_runs
from agentfsm._report import build
from agentfsm.exceptions import InvalidInputError
from agentfsm.testing import call, turn
from tests.strategies import one_argument_tool

A, X = af.Action, af.ExitReason
DELETE = one_argument_tool("delete_file", "delete a file", "path", additionalProperties=False)
LS = {"name": "ls", "description": "list", "parameters": {"type": "object", "properties": {}}}
GUARDED = af.Policy(
    permissions={"delete_file": "ask", "ls": "allow"},
    permission_rules=["deny delete_file(path=/etc/*)"],
)


def asked_three(policy: af.Policy = GUARDED, **options: Any) -> af.Controller:
    """A controller asking about d1 and d3, with the allowed ls call l2 between them.

    Its clock stands still, so two dumps differ only by what an input changed.
    """
    ctl = af.Controller(policy, [DELETE, LS], clock=lambda: 0.0, **options)
    calls = [
        call("delete_file", {"path": "/tmp/a"}, id="d1"),
        call("ls", {}, id="l2"),
        call("delete_file", {"path": "/tmp/b"}, id="d3"),
    ]
    decision = ctl.on_model_output(turn(calls=calls))
    assert decision.action is A.ASK_HUMAN
    assert [c.id for c in decision.tool_calls] == ["d1", "d3"]
    return ctl


def ids(calls: list[af.ToolCall]) -> list[str]:
    return [c.id for c in calls]


class TestPerCallAnswers:
    """Each asked call carries its own answer into the decision and its result."""

    def test_one_approved_one_declined_runs_the_approved_with_the_allowed(self) -> None:
        """d1 yes, d3 no: d1 and l2 run in turn order, d3 gets its own rejection text."""
        ctl = asked_three()
        decision = ctl.on_human_reply({"d1": True, "d3": False}, messages={"d3": "keep b"})
        assert decision.action is A.EXECUTE_TOOLS
        assert ids(decision.tool_calls) == ["d1", "l2"]
        assert [(r.call_id, r.is_error, r.content) for r in decision.results] == [
            ("d3", True, "declined by the human: keep b")
        ]
        assert [ctl.may_run(i) for i in ("d1", "l2", "d3")] == [True, True, False]

    def test_each_declined_call_has_its_own_text_else_the_message_else_none(self) -> None:
        """messages[id] first, then message, then the plain decline text."""
        ctl = asked_three()
        decision = ctl.on_human_reply({"d1": False, "d3": False}, "not now", messages={"d1": "no"})
        texts = {r.call_id: r.content for r in decision.results}
        assert texts["d1"] == "declined by the human: no"
        assert texts["d3"] == "declined by the human: not now"
        assert texts["l2"].startswith("not executed: the human declined delete_file, delete_file")
        assert decision.action is A.CONTINUE
        ctl = asked_three()
        decision = ctl.on_human_reply({"d1": False, "d3": True})
        assert [r.content for r in decision.results] == ["declined by the human"]

    def test_all_declined_with_only_their_own_texts_goes_back_to_the_model(self) -> None:
        """Each call's own text is something for the model: CONTINUE, not HUMAN_DECLINED."""
        decision = asked_three().on_human_reply({"d1": False, "d3": False}, messages={"d3": "no"})
        assert decision.action is A.CONTINUE
        assert decision.exit_reason is None

    def test_a_declined_call_is_never_answered_as_a_success(self) -> None:
        """The rejection text comes back as an error result, never as a successful one."""
        ctl = asked_three()
        decision = ctl.on_human_reply({"d1": True, "d3": False}, messages={"d3": "ok, skip it"})
        (result,) = decision.results
        assert result.is_error
        assert "ok, skip it" in str(result.content)

    @pytest.mark.parametrize("answer", [True, False])
    def test_one_answer_for_all_equals_the_same_answer_per_call(self, answer: bool) -> None:
        """All approved is approved=True; all declined is approved=False (HUMAN_DECLINED)."""
        one = asked_three().on_human_reply(answer)
        each = asked_three().on_human_reply({"d1": answer, "d3": answer})
        assert each == one
        if not answer:
            assert each.exit_reason is X.HUMAN_DECLINED

    def test_an_approved_call_s_own_text_reaches_the_model_as_the_note(self) -> None:
        """A text on an approved call is the decision's note, naming the call."""
        ctl = asked_three()
        decision = ctl.on_human_reply(True, messages={"d1": "careful"})
        assert decision.note == "on delete_file (d1): careful"

    def test_the_trace_records_each_answer_and_edit(self, tmp_path: Path) -> None:
        """The human_reply event holds the mapping, the texts and the edits."""
        path = tmp_path / "t.jsonl"
        with TraceWriter(path) as writer:
            ctl = asked_three(observers=[writer])
            ctl.on_human_reply(
                {"d1": True, "d3": False},
                messages={"d3": "no"},
                arguments={"d1": {"path": "/tmp/c"}},
            )
        events = [json.loads(line) for line in path.read_text().splitlines()]
        (reply,) = [e for e in events if e["event"] == "human_reply"]
        assert reply["approved"] == {"d1": True, "d3": False}
        assert reply["messages"] == {"d3": "no"}
        assert reply["arguments"] == {"d1": {"path": "/tmp/c"}}
        (run,) = list(read_runs(path))
        assert divergence(run, replay_run(run)) is None
        page = build([str(path)]).html
        assert "d1 approved, d3 declined" in page


class TestEditedArguments:
    """The arguments that run are the arguments checked."""

    def test_an_edit_a_deny_rule_stops_does_not_run(self) -> None:
        """deny delete_file(path=/etc/*): approving d1 edited to /etc/passwd does not run it."""
        ctl = asked_three()
        decision = ctl.on_human_reply(True, arguments={"d1": {"path": "/etc/passwd"}})
        assert ids(decision.tool_calls) == ["l2", "d3"]
        (refused,) = decision.results
        assert refused.call_id == "d1"
        assert refused.is_error
        assert "edited arguments may not run" in str(refused.content)
        assert "permission denied" in str(refused.content)
        assert not ctl.may_run("d1")
        assert not ctl.claim("d1", "delete_file", {"path": "/etc/passwd"})
        assert "/etc/passwd" not in json.dumps(ctl.dump()["run"]["pending"])

    def test_the_only_approved_call_refused_sends_the_reason_to_the_model(self) -> None:
        """With nothing left to run, the run goes back to the model with the refusal."""
        ctl = af.Controller(GUARDED, [DELETE, LS])
        ctl.on_model_output(turn(calls=[call("delete_file", {"path": "/tmp/a"}, id="d1")]))
        decision = ctl.on_human_reply(True, arguments={"d1": {"path": "/etc/shadow"}})
        assert decision.action is A.CONTINUE
        assert decision.tool_calls == []
        assert decision.results[0].call_id == "d1"
        assert decision.results[0].is_error

    def test_an_edit_that_breaks_the_schema_does_not_run(self) -> None:
        """An edit with an argument the declared tool does not take gets why, and no run."""
        ctl = asked_three()
        decision = ctl.on_human_reply(True, arguments={"d3": {"path": "/tmp/b", "force": True}})
        assert ids(decision.tool_calls) == ["d1", "l2"]
        assert "invalid arguments for 'delete_file'" in str(decision.results[0].content)

    def test_an_edit_the_policy_asks_about_is_approved_by_this_answer(self) -> None:
        """The human saw the edited arguments: the call runs with them, and only with them."""
        ctl = asked_three()
        decision = ctl.on_human_reply(True, arguments={"d1": {"path": "/tmp/z"}})
        assert [c.arguments for c in decision.tool_calls] == [
            {"path": "/tmp/z"},
            {},
            {"path": "/tmp/b"},
        ]
        assert ctl.may_run("d1", "delete_file", {"path": "/tmp/z"})
        assert not ctl.may_run("d1", "delete_file", {"path": "/tmp/a"})
        assert ctl.dump()["run"]["pending"][0] == {**ctl.pending_calls[0].model_dump(), "id": "d1"}
        assert ctl.dump()["run"]["pending"][0]["arguments"] == {"path": "/tmp/z"}

    def test_a_dump_after_an_edited_approval_loads_with_the_edited_call_cleared(self) -> None:
        """The edited call, which the policy asks about, stays approved through dump and load."""
        ctl = asked_three()
        ctl.on_human_reply({"d1": True, "d3": False}, arguments={"d1": {"path": "/tmp/z"}})
        data = json.loads(json.dumps(ctl.dump()))
        loaded = af.Controller.load(data, tools=[DELETE, LS], clock=lambda: 0.0)
        assert loaded.state == "execute"
        assert loaded.may_run("d1", "delete_file", {"path": "/tmp/z"})
        assert not loaded.may_run("d3")

    def test_an_edit_runs_as_given_then_the_host_s_dict_changes_nothing(self) -> None:
        """The edit is copied: changing the host's dict afterwards does not change the call."""
        ctl = asked_three()
        edit: dict[str, Any] = {"path": "/tmp/z"}
        ctl.on_human_reply(True, arguments={"d1": edit})
        edit["path"] = "/etc/passwd"
        assert ctl.pending_calls[0].arguments == {"path": "/tmp/z"}

    def test_an_edit_turned_into_a_denied_call_is_refused_without_declared_tools(self) -> None:
        """With any tool name accepted, the rules still judge the edited call."""
        ctl = af.Controller(GUARDED)
        ctl.on_model_output(turn(calls=[call("delete_file", {"path": "/tmp/a"}, id="d1")]))
        decision = ctl.on_human_reply({"d1": True}, arguments={"d1": {"path": "/etc/hosts"}})
        assert decision.tool_calls == []
        assert not ctl.may_run("d1")

    def test_dump_and_load_mid_ask_then_a_per_call_reply_decides_as_live(self) -> None:
        """A run saved while asking, loaded, then answered call by call, decides as the live run."""
        live = asked_three()
        data = json.loads(json.dumps(live.dump()))
        loaded = af.Controller.load(data, tools=[DELETE, LS], clock=lambda: 0.0)
        answer: dict[str, Any] = {
            "approved": {"d1": True, "d3": False},
            "messages": {"d3": "no"},
            "arguments": {"d1": {"path": "/tmp/q"}},
        }
        first = live.on_human_reply(**answer)
        assert loaded.on_human_reply(**answer) == first
        assert loaded.dump() == live.dump()
        results = [af.ToolResult(call_id=i, content="ok") for i in ("d1", "l2")]
        assert loaded.on_tool_results(results) == live.on_tool_results(results)


def _deep(levels: int) -> dict[str, Any]:
    """A JSON object `levels` deep."""
    value: Any = "x"
    for _ in range(levels - 1):
        value = [value]
    return {"path": value}


def _cycle() -> dict[str, Any]:
    """An object that holds itself."""
    value: dict[str, Any] = {}
    value["path"] = value
    return value


class _Broken(Mapping[str, Any]):
    """A mapping whose every read raises a non-agentfsm error."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("broken")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("broken")

    def __len__(self) -> int:
        raise RuntimeError("broken")


BAD_ANSWERS: list[tuple[Any, dict[str, Any]]] = [
    ({"d1": True}, {}),  # d3 has no answer
    ({"d1": True, "d3": False, "x": True}, {}),  # an unknown id
    ({"d1": 1, "d3": True}, {}),  # not a bool
    ({"d1": True, "d3": None}, {}),
    ({"l2": True, "d1": True, "d3": True}, {}),  # l2 is allowed, not asked
    ("yes", {}),
    (None, {}),
    (True, {"messages": {"l2": "x"}}),
    (True, {"messages": {"d1": 3}}),
    (True, {"messages": ["d1"]}),
    ({"d1": True, "d3": False}, {"arguments": {"d3": {"path": "/tmp/x"}}}),  # declined
    (True, {"arguments": {"d1": ["/tmp"]}}),
    (True, {"arguments": {"d1": {"path": float("nan")}}}),
    (True, {"arguments": {"d1": {1: "x"}}}),
    (True, {"arguments": {"d1": {"path": object()}}}),
    (True, {"message": 5}),
    ({1: True, "d1": True, "d3": True}, {}),  # a key that is not a call id
    (True, {"arguments": "d1"}),  # not a mapping
    (True, {"arguments": {"d1": _deep(101)}}),  # nested deeper than MAX_DEPTH
    (True, {"arguments": {"d1": _cycle()}}),
    (_Broken(), {}),  # a mapping whose items raise
    (True, {"messages": _Broken()}),
    (True, {"arguments": {"d1": _Broken()}}),
]


def bad_replies() -> st.SearchStrategy[tuple[Any, dict[str, Any]]]:
    """Replies that do not fit the asked calls d1 and d3: each is refused whole."""
    ids_ = st.sampled_from(["d1", "d3", "l2", "x", ""]) | st.text(max_size=3) | st.integers()
    not_bool = st.none() | st.integers() | st.text(max_size=2) | st.floats()
    answers = st.dictionaries(ids_, st.booleans() | not_bool, max_size=4).filter(
        lambda m: set(m) != {"d1", "d3"} or any(type(v) is not bool for v in m.values())
    )
    not_json = st.sampled_from(
        [float("inf"), object(), {2: 1}, b"x", {"a": {1}}, _deep(101)["path"], _cycle(), _Broken()]
    )
    edits = st.fixed_dictionaries({"d1": st.fixed_dictionaries({"path": not_json})})
    return st.one_of(
        st.tuples(answers, st.just({})),
        st.tuples(
            st.just(True),
            st.fixed_dictionaries(
                {
                    "messages": st.dictionaries(
                        st.sampled_from(["l2", "x"]), st.text(max_size=2), min_size=1
                    )
                }
            ),
        ),
        st.tuples(st.just(True), st.fixed_dictionaries({"arguments": edits})),
        st.tuples(
            st.just({"d1": False, "d3": True}),
            st.fixed_dictionaries({"arguments": st.just({"d1": {"path": "/tmp/y"}})}),
        ),
    )


class TestBadReplies:
    """A reply that does not fit the asked calls raises InvalidInputError and changes nothing."""

    @pytest.mark.parametrize(("approved", "options"), BAD_ANSWERS)
    def test_a_bad_reply_is_refused_and_the_run_is_unchanged(
        self, approved: Any, options: dict[str, Any]
    ) -> None:
        """Each listed bad reply raises InvalidInputError; the same good reply then works."""
        ctl = asked_three()
        before = ctl.dump()
        with pytest.raises(InvalidInputError):
            ctl.on_human_reply(approved, **options)
        assert ctl.dump() == before
        assert ctl.on_human_reply({"d1": True, "d3": True}).action is A.EXECUTE_TOOLS

    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(reply=bad_replies())
    def test_any_bad_mapping_leaves_the_controller_unchanged(
        self, reply: tuple[Any, dict[str, Any]]
    ) -> None:
        """Random bad mappings: InvalidInputError, the dump as before, then a good reply runs."""
        approved, options = reply
        ctl = asked_three()
        before = ctl.dump()
        with pytest.raises(InvalidInputError):
            ctl.on_human_reply(approved, **options)
        assert ctl.dump() == before
        assert ctl.state == "await_human"


PATHS = st.sampled_from(["/tmp/a", "/tmp/b", "/etc/passwd", "/etc/x/../y", "/srv/k"])


class TestEveryAskedCallGetsItsOwnAnswer:
    """The property: whatever the per-call answers and edits, each asked call ends one way."""

    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def test_each_asked_call_runs_as_checked_or_is_answered_with_its_own_text(
        self, data: st.DataObject
    ) -> None:
        """Approved: runs with the arguments that passed the policy, or gets why not; declined:
        its own text; nothing denied by the rule ever runs."""
        ctl = asked_three()
        answers = {i: data.draw(st.booleans(), label=i) for i in ("d1", "d3")}
        texts = data.draw(st.dictionaries(st.sampled_from(["d1", "d3"]), st.text(max_size=4)))
        yes = [i for i, a in answers.items() if a]
        edits = data.draw(
            st.dictionaries(st.sampled_from(yes), st.fixed_dictionaries({"path": PATHS}))
            if yes
            else st.just({})
        )
        decision = ctl.on_human_reply(answers, messages=texts, arguments=edits)
        running = {c.id: c for c in decision.tool_calls}
        results = {r.call_id: r for r in decision.results}
        for call_id, approved in answers.items():
            assert (call_id in running) != (call_id in results)
            if not approved:
                text = texts.get(call_id)
                said = f": {text}" if text else ""
                assert results[call_id].content == f"declined by the human{said}"
            elif call_id in running:
                assert running[call_id].arguments == edits.get(
                    call_id, {"path": "/tmp/a" if call_id == "d1" else "/tmp/b"}
                )
        for c in decision.tool_calls:
            assert not str((c.arguments or {}).get("path", "")).startswith("/etc/")
        assert ("l2" in running) == bool(yes)
