"""No one else holds the argument structures the Controller's record keeps.

A tool that edits the argument dict it was given, or a host that edits a decision's calls,
must not rewrite the run's record: the decision, the pending calls, a dump and every
later permission check keep the call the policy checked.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._runner.executor import Executor, tool
from tests.strategies import arguments

POLICY = af.Policy(permission_rules=["deny edit(path=/etc/*)"])


def edit_turn(args: dict[str, Any]) -> af.ModelTurn:
    return af.ModelTurn(
        tool_calls=[af.ToolCall(id="e1", name="edit", arguments=args)],
        finish_reason=af.FinishReason.TOOL_CALLS,
    )


def containers(value: Any) -> list[Any]:
    """Every dict and list inside `value`, `value` first."""
    found: list[Any] = []
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            found.append(item)
            todo.extend(item.values())
        elif isinstance(item, list):
            found.append(item)
            todo.extend(item)
    return found


def mutate(target: Any, how: int) -> None:
    """Change a dict or list in place: add, replace, remove or clear."""
    if isinstance(target, dict):
        if how == 0 or not target:
            target["path"] = "/etc/passwd"
        elif how == 1:
            target.pop(next(iter(target)))
        else:
            target.clear()
    elif how == 0 or not target:
        target.append("/etc/passwd")
    elif how == 1:
        target[0] = {"path": "/etc/passwd"}
    else:
        target.clear()


def handed_out(
    ctl: af.Controller, d: af.Decision, where: str, given_args: dict[str, Any]
) -> dict[str, Any] | None:
    """The arguments of the call as one of the ways out (or in) holds them."""
    if where == "decision":
        return d.tool_calls[0].arguments
    if where == "pending":
        return ctl.pending_calls[0].arguments
    if where == "last_output":
        assert ctl.last_output is not None
        return ctl.last_output.tool_calls[0].arguments
    return given_args


class TestToolsGetCopies:
    """The Executor hands each tool its own copy of the arguments."""

    def test_a_tool_that_edits_its_arguments_changes_nothing_of_the_run(self) -> None:
        """A tool edits the nested dict it was given: decision, pending calls and dump stay."""

        def edit(path: str, options: dict[str, Any]) -> str:
            """Edit a file."""
            options["path"] = "/etc/passwd"
            options["backup"].append("/etc/shadow")
            return "edited"

        ctl = af.Controller(POLICY, tools=[edit], clock=lambda: 0.0)
        d = ctl.on_model_output(edit_turn({"path": "/tmp/a", "options": {"backup": []}}))
        before = ctl.dump()
        results = Executor([edit]).run(d, controller=ctl)
        assert [r.content for r in results] == ["edited"]
        assert ctl.dump() == before
        assert d.tool_calls[0].arguments == {"path": "/tmp/a", "options": {"backup": []}}
        assert ctl.pending_calls[0].arguments == {"path": "/tmp/a", "options": {"backup": []}}

    def test_each_retry_of_an_idempotent_tool_gets_fresh_arguments(self) -> None:
        """A retried tool that edited its arguments in a failed attempt sees the originals."""
        seen: list[list[str]] = []

        @tool(idempotent=True)
        def flaky(items: list[str]) -> str:
            """Fail once after editing the list."""
            seen.append(list(items))
            items.append("again")
            if len(seen) == 1:
                raise RuntimeError("try again")
            return "ok"

        calls = [af.ToolCall(id="f1", name="flaky", arguments={"items": ["a"]})]
        results = Executor([flaky], retry_attempts=2).run(calls)
        assert [r.content for r in results] == ["ok"]
        assert seen == [["a"], ["a"]]


class TestHostsGetCopies:
    """Every call the Controller hands out is a copy; its own input is copied when taken."""

    def test_editing_a_decisions_call_does_not_clear_the_edited_call(self) -> None:
        """A host rewrites the cleared call's path to a denied one: the record keeps the
        checked call, and the edited call is not the one cleared."""
        ctl = af.Controller(POLICY, clock=lambda: 0.0)
        d = ctl.on_model_output(edit_turn({"path": "/tmp/a", "options": {"keep": [1]}}))
        before = ctl.dump()
        assert d.tool_calls[0].arguments is not None
        d.tool_calls[0].arguments["path"] = "/etc/passwd"
        d.tool_calls[0].arguments["options"]["keep"].append(2)
        assert ctl.dump() == before
        assert ctl.pending_calls[0].arguments == {"path": "/tmp/a", "options": {"keep": [1]}}
        assert not ctl.may_run("e1", "edit", d.tool_calls[0].arguments)
        assert ctl.may_run("e1", "edit", {"path": "/tmp/a", "options": {"keep": [1]}})

    def test_editing_the_turn_given_changes_nothing_of_the_run(self) -> None:
        """The host's own ModelTurn, edited after it was routed, is not the record."""
        args: dict[str, Any] = {"path": "/tmp/a", "also": [{"path": "/tmp/b"}]}
        ctl = af.Controller(POLICY, clock=lambda: 0.0)
        ctl.on_model_output(edit_turn(args))
        before = ctl.dump()
        args["also"][0]["path"] = "/etc/passwd"
        assert ctl.dump() == before
        restored = af.Controller.load(ctl.dump(), policy=POLICY)
        assert restored.may_run("e1", "edit", {"path": "/tmp/a", "also": [{"path": "/tmp/b"}]})

    @given(how=st.integers(0, 2), provider=st.sampled_from(["anthropic", "ollama"]))
    def test_editing_a_raw_payloads_argument_object_changes_nothing(
        self, how: int, provider: str
    ) -> None:
        """An argument object inside a raw body (Anthropic's `input`, Ollama's `arguments`),
        edited after it was routed, is not the record: `normalize` copies it."""
        args: dict[str, Any] = {"path": "/tmp/a", "also": [{"path": "/tmp/b"}]}
        body: dict[str, Any]
        if provider == "anthropic":
            block = {"type": "tool_use", "id": "e1", "name": "edit", "input": args}
            body = {"type": "message", "role": "assistant", "content": [block]}
            body["stop_reason"] = "tool_use"
        else:
            call = {"function": {"name": "edit", "arguments": args}}
            body = {
                "model": "m",
                "message": {"role": "assistant", "content": "", "tool_calls": [call]},
            }
            body["done"], body["done_reason"] = True, "stop"
        ctl = af.Controller(POLICY, clock=lambda: 0.0)
        d = ctl.on_model_output(body)
        assert d.action is af.Action.EXECUTE_TOOLS
        before = ctl.dump()
        for target in containers(args):
            mutate(target, how)
        assert ctl.dump() == before
        call_id = d.tool_calls[0].id
        assert ctl.may_run(call_id, "edit", {"path": "/tmp/a", "also": [{"path": "/tmp/b"}]})

    def test_editing_a_result_given_changes_nothing_of_the_run(self) -> None:
        """The run remembers results (for the no-progress check): not the host's object."""
        content: dict[str, Any] = {"rows": [1, 2]}
        ctl = af.Controller(POLICY, clock=lambda: 0.0)
        ctl.on_model_output(edit_turn({"path": "/tmp/a"}))
        ctl.on_tool_results([af.ToolResult(call_id="e1", content=content)])
        before = ctl.dump()
        content["rows"].append(3)
        assert ctl.dump() == before

    @given(
        args=arguments().map(lambda a: {"path": "/tmp/a", "options": a}),
        where=st.sampled_from(["decision", "pending", "last_output", "given"]),
        pick=st.integers(0, 50),
        how=st.integers(0, 2),
        ask=st.booleans(),
    )
    def test_no_edit_of_a_handed_out_structure_reaches_the_record(
        self, args: dict[str, Any], where: str, pick: int, how: int, ask: bool
    ) -> None:
        """Any edit (add, replace, remove, clear) of any dict or list nested in arguments
        handed out (a decision's calls, the pending calls, the last output) or given (the
        host's turn), awaiting results or a human: the dump, the pending calls and
        `may_run` of the checked call stay as they were."""
        policy = af.Policy(
            permission_rules=["deny edit(path=/etc/*)", *(["ask edit"] if ask else [])]
        )
        given_args = copy.deepcopy(args)
        ctl = af.Controller(policy, clock=lambda: 0.0)
        d = ctl.on_model_output(edit_turn(given_args))
        before, pending = ctl.dump(), ctl.pending_calls
        handed = handed_out(ctl, d, where, given_args)
        found = containers(handed)
        mutate(found[pick % len(found)], how)
        assert ctl.dump() == before
        assert ctl.pending_calls == pending
        assert [c.arguments for c in pending] == [args]
        if not ask:
            assert ctl.may_run("e1", "edit", args)
        else:
            assert ctl.on_human_reply(approved=True).tool_calls[0].arguments == args
