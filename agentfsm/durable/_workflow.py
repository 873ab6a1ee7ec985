"""The agent loop as a DBOS workflow: every model call and every tool call is a recorded step.

The workflow rebuilds its Controller from the start each time DBOS runs it (a
first run, or a recovery after a crash). Steps that were recorded return their
recorded outputs instead of running again, so the Controller sees the same
inputs in the same order and makes the same decisions, with no state of its own
to save. A run that asks a human publishes what it asks (`DBOS.set_event`) and
waits for the answer with `DBOS.recv_async`: a coroutine on DBOS's event loop,
not a thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from dbos import DBOS

from agentfsm._engine.controller import Controller
from agentfsm._model.approvals import SCOPES
from agentfsm._model.types import Action, Decision, ExitReason, ModelTurn, ToolCall, ToolResult
from agentfsm._runner.executor import _cut, describe, result_of
from agentfsm._runner.retry import is_transient
from agentfsm.durable._conversation import Conversation
from agentfsm.durable._registry import DEFAULT_MAX_TOKENS, agent_named
from agentfsm.durable._serializer import failure_text
from agentfsm.exceptions import AgentFSMError, CheckpointError, RunError
from agentfsm.states._approvals import scope_of

__all__ = [
    "HUMAN_TOPIC",
    "INTERRUPTED",
    "RUNS_QUEUE",
    "WAITING_KEY",
    "WORKFLOW_NAME",
    "agent_run",
    "idempotency_key",
    "load_litellm",
    "question_id",
    "use_wall_clock",
]

WORKFLOW_NAME = "agentfsm.durable.run"
"""The DBOS name of the agent workflow."""
RUNS_QUEUE = "agentfsm.runs"
"""The DBOS queue a `Client` puts its runs on; every worker takes runs from it."""
HUMAN_TOPIC = "agentfsm.human"
"""The `DBOS.send` topic a human's answer travels on."""
WAITING_KEY = "agentfsm.waiting"
"""The workflow event that holds what the run asks a human, or None when it waits for nothing."""
_WAIT_CHUNK = 86_400.0
"""Seconds of one `recv` when the wait has no limit: it is renewed until the answer arrives."""
_AWAITING_HOST = frozenset({Action.EXECUTE_TOOLS, Action.HANDOFF, Action.ASK_HUMAN})
INTERRUPTED = (
    "interrupted: the run stopped (its worker died) while tool {name!r} was running, so this "
    "call may or may not have taken effect; it was not run again (the tool is not declared "
    "idempotent). Check its effect before calling it again."
)
"""The result of an at-most-once call that a recovered run finds started but unfinished."""
MAX_RESULT_CHARS = 50_000
"""A tool's result or error text longer than this is cut, as the executor cuts by default."""
NOT_CLEARED = "not run: the controller did not clear call {id!r} ({name}) to run now"
_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agentfsm_durable_key", default=None
)


def load_litellm() -> Any:
    """Import litellm without its network price-map fetch."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


@DBOS.step(
    name="agentfsm.durable.model",
    retries_allowed=True,
    max_attempts=3,
    interval_seconds=0.5,
    should_retry=is_transient,
)
async def model_step(agent_name: str, request: dict[str, Any]) -> dict[str, Any]:
    """Call the model once through litellm; the recorded output is the normalized turn."""
    from agentfsm.providers import normalize

    agent = agent_named(agent_name)
    options = {**agent.request_options(), **request}
    response = await load_litellm().acompletion(**options)
    return normalize(response, provider="litellm").model_dump(mode="json")


@DBOS.step(name="agentfsm.durable.started")
async def started_step(call_ids: list[str], attempt: str) -> dict[str, Any]:
    """Record that the at-most-once calls `call_ids` start now, in the execution `attempt`.

    A recovered run reads back the attempt of the execution that recorded it: another
    execution's attempt means these calls may have run already.
    """
    return {"calls": call_ids, "attempt": attempt}


@DBOS.step(name="agentfsm.durable.tool")
async def tool_step(agent_name: str, call: dict[str, Any], key: str, interrupted: bool) -> Any:
    """Run one tool call; an exception becomes an error result, recorded like any result.

    `interrupted` (an at-most-once call started by an earlier execution) runs nothing:
    the result says the call may or may not have taken effect.
    """
    agent = agent_named(agent_name)
    tool = ToolCall.model_validate(call)
    if interrupted:
        return _error(tool, INTERRUPTED.format(name=tool.name))
    spec = (agent.specs or {}).get(tool.name)
    if spec is None or spec.fn is None:
        return _error(tool, f"no implementation for tool {tool.name!r}")
    token = _KEY.set(key)
    try:
        if inspect.iscoroutinefunction(spec.fn):
            value = await spec.fn(**(tool.arguments or {}))
        else:
            # to_thread copies the context: the thread reads the same idempotency key.
            value = await asyncio.to_thread(spec.fn, **(tool.arguments or {}))
    except Exception as exc:
        # The executor's wording: a tool's __str__ that raises leaves its message out, never
        # fails the step; a huge message is cut like a huge result.
        return _error(tool, _cut(describe(exc), MAX_RESULT_CHARS))
    finally:
        _KEY.reset(token)
    # As the runner makes it: a value JSON cannot hold, or nested too deep, is the call's error.
    return result_of(tool, value, MAX_RESULT_CHARS).model_dump(mode="json")


def question_id(run_id: str, number: int) -> str:
    """The id of a run's `number`th question to a human (from 1): `<run id>/q<number>`.

    The same on every execution of the run (a recovered run asks its questions again in
    the same order), and never the same for two questions, of this run or another.
    """
    return f"{run_id}/q{number}"


def idempotency_key() -> str:
    """The idempotency key of the durable tool call running now: `<run id>:<turn>:<call id>`.

    The same on every run of the call (a recovered run re-runs an idempotent tool with
    it), and different for every call of every run: pass it to an API that deduplicates
    requests (a payment's `Idempotency-Key`). The turn is part of it because a model may
    reuse a call id in a later turn.

    Raises:
        RunError: called outside a tool that a durable run is running.
    """
    key = _KEY.get()
    if key is None:
        raise RunError("idempotency_key() is only known inside a tool run by a durable run")
    return key


def _error(call: ToolCall, text: str) -> dict[str, Any]:
    return ToolResult(call_id=call.id, name=call.name, content=text, is_error=True).model_dump(
        mode="json"
    )


_WALL_CLOCK: list[Callable[[], float]] = [time.time]
"""The wall clock the recorded clock steps read (one slot): `time.time` unless a test process
gave its own with `use_wall_clock`, so that no test waits for real time to pass."""


def use_wall_clock(clock: Callable[[], float]) -> None:
    """Read the run's wall time from `clock` in this process from now on (for tests)."""
    _WALL_CLOCK[0] = clock


@DBOS.step(name="agentfsm.durable.clock")
async def clock_step() -> float:
    """The wall time, recorded: a recovered run reads the times its first pass read."""
    return _WALL_CLOCK[0]()


@DBOS.workflow(name=WORKFLOW_NAME)
async def agent_run(agent_name: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Run one agent to its end; the result holds the decisions and the controller's events."""
    run_id = DBOS.workflow_id
    assert run_id is not None  # always set inside a workflow
    return await _Loop(agent_name, run_id, messages).run()


def _refused(call: ToolCall) -> ToolResult:
    return ToolResult(
        call_id=call.id,
        name=call.name,
        content=NOT_CLEARED.format(id=call.id, name=call.name),
        is_error=True,
    )


class _Loop:
    """One run: the Controller, the conversation, and what the result reports."""

    def __init__(self, agent_name: str, run_id: str, messages: list[dict[str, Any]]) -> None:
        self.agent = agent_named(agent_name)
        self.run_id = run_id
        self.events: list[dict[str, Any]] = []
        self.started_at = 0.0
        self.elapsed = 0.0
        """The run's time, from recorded clock steps: `max_seconds` counts the whole run,
        across recoveries, and a recovery decides with the times the first pass read."""
        specs = self.agent.specs
        self.ctl = Controller(
            self.agent.policy,
            tools=None if specs is None else list(specs.values()),
            run_id=run_id,
            observers=[self._record],
            clock=self._clock,
            shadow=self.agent.shadow,
        )
        self.talk = Conversation(messages)
        self.decisions: list[Decision] = []
        self.notes: list[str] = []
        """Notes for the model, sent once the round of their decision settles."""
        self.max_tokens: int | None = None
        self.text = ""
        self.error: str | None = None
        self.questions = 0
        """Questions asked so far: a recovered run counts them again, so their ids hold."""
        self.attempt = uuid.uuid4().hex
        """This execution of the run: a recorded `started` step of another one means its
        calls were interrupted. It decides nothing else, so replays stay deterministic."""

    def _record(self, event: Mapping[str, Any]) -> None:
        self.events.append(dict(event))

    def _clock(self) -> float:
        return self.elapsed

    async def _tick(self) -> None:
        """Read the recorded wall time before an input, for the Controller's clock."""
        self.elapsed = max(0.0, await clock_step() - self.started_at)

    async def run(self) -> dict[str, Any]:
        self.started_at = await clock_step()
        while not self.ctl.done:
            request: dict[str, Any] = {"messages": list(self.talk.messages)}
            if self.max_tokens is not None:
                request["max_tokens"] = self.max_tokens
            try:
                data = await model_step(self.agent.name, request)
            except CheckpointError:  # the database was edited: the run must not go on
                raise
            except Exception as exc:  # the provider failed and the step's retries did not help
                self.error = failure_text(exc)
                break
            turn = ModelTurn.model_validate(data)
            self.agent.progress("model", self.run_id, {"turn": self.ctl.turn + 1})
            await self._tick()
            decision = self.ctl.on_model_output(turn)
            self.talk.output(self.ctl.last_output)
            self.text = turn.text or self.text
            decision = self._settle(decision, turn)
            while decision.action in _AWAITING_HOST:
                if decision.action is Action.ASK_HUMAN:
                    decision = await self._ask(decision)
                else:
                    decision = await self._execute(decision)
        return self._result()

    def _settle(self, decision: Decision, turn: ModelTurn | None = None) -> Decision:
        self.decisions.append(decision)
        if decision.note:
            self.notes.append(decision.note)
        self.talk.answer(decision.results)
        if decision.adjust.get("max_tokens_factor") and turn is not None:
            used = turn.usage.output_tokens if turn.usage else 0
            base = self.max_tokens or used or DEFAULT_MAX_TOKENS
            self.max_tokens = int(base * decision.adjust["max_tokens_factor"])
        if decision.action in _AWAITING_HOST:
            return decision
        if decision.action is Action.RETRY:
            self.talk.drop()
        self.talk.settle()
        # A note (a human's with an approval, the loop ladder's warning) reaches the model
        # after the results of the calls its decision ran, as a user message.
        for note in self.notes:
            self.talk.user(note)
        self.notes = []
        return decision

    async def _execute(self, decision: Decision) -> Decision:
        calls = decision.tool_calls
        # The one permission check, by call id, right before anything runs.
        cleared = [c for c in calls if self.ctl.may_run(c.id, c.name, c.arguments or {})]
        once = [c.id for c in cleared if c.name in self.agent.once]
        fresh = True
        if once:
            started = await started_step(once, self.attempt)
            fresh = started.get("attempt") == self.attempt
        # Parallel calls are concurrent steps; DBOS numbers them in the order they are given.
        outputs = await asyncio.gather(
            *(self._tool(c, interrupted=not fresh and c.id in once) for c in cleared)
        )
        ran = {c.id: ToolResult.model_validate(o) for c, o in zip(cleared, outputs, strict=True)}
        results = [ran[c.id] if c.id in ran else _refused(c) for c in calls]
        self.talk.answer(results)
        await self._tick()
        return self._settle(self.ctl.on_tool_results(results))

    async def _tool(self, call: ToolCall, *, interrupted: bool) -> dict[str, Any]:
        key = f"{self.run_id}:{self.ctl.turn}:{call.id}"
        payload = call.model_dump(mode="json")
        output: dict[str, Any] = await tool_step(self.agent.name, payload, key, interrupted)
        self.agent.progress("tool", self.run_id, {"call_id": call.id, "name": call.name})
        return output

    async def _ask(self, decision: Decision) -> Decision:
        self.questions += 1
        question = question_id(self.run_id, self.questions)
        asked = {
            "question": question,
            "turn": self.ctl.turn,
            "reason": decision.reason,
            "tool_calls": [c.model_dump(mode="json") for c in decision.tool_calls],
            # What `reply(remember=)` takes for them (docs/approvals.md): a host may offer it.
            "scopes": list(SCOPES) if decision.tool_calls else [],
        }
        await DBOS.set_event_async(WAITING_KEY, asked)
        self.agent.progress("ask_human", self.run_id, asked)
        approved, message, scope = await self._answer(question)
        await DBOS.set_event_async(WAITING_KEY, None)
        if not decision.tool_calls and message:
            self.talk.user(message)
        await self._tick()
        # The scope holds for each asked call (docs/approvals.md); stored with the run.
        remember = {c.id: scope for c in decision.tool_calls} if approved and scope else None
        return self._settle(self.ctl.on_human_reply(approved, message, remember=remember))

    async def _answer(self, question: str) -> tuple[bool, str | None, Any]:
        """Wait for the answer to `question`; no answer in time declines.

        A reply naming another question (one asked earlier, declined when its time ran
        out, and answered late) is dropped: it never approves what the run asks now.
        """
        limit = self.agent.human_timeout
        while True:
            reply = await DBOS.recv_async(HUMAN_TOPIC, timeout_seconds=limit or _WAIT_CHUNK)
            if reply is None:
                if limit is not None:
                    return False, None, None
                continue
            if isinstance(reply, dict) and reply.get("question") == question:
                message = reply.get("message")
                # Anything not understood declines: fail closed.
                text = message if isinstance(message, str) else None
                return reply.get("approved") is True, text, _scope(reply.get("remember"))

    def _result(self) -> dict[str, Any]:
        exit_reason = self.ctl.exit_reason
        if self.error is not None:
            exit_reason = ExitReason.PROVIDER_ERROR
        return {
            "run_id": self.run_id,
            "exit_reason": (exit_reason or ExitReason.INTERRUPTED).value,
            "text": self.text,
            "turns": self.ctl.turn,
            "error": self.error,
            "decisions": [d.model_dump(mode="json") for d in self.decisions],
            "messages": self.talk.messages,
            "events": self.events,
        }


def _scope(value: object) -> object:
    """A reply's `remember` scope as the run reads it back: one `scope_of` takes, else None
    (a scope it cannot read remembers nothing: fail closed)."""
    if value is None:
        return None
    try:
        scope_of(value, "remember")
    except AgentFSMError:
        return None
    return value
