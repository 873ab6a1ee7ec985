"""The Controller: embed the loop's decisions in an agent you already have.

The host calls the model and runs the tools; the controller says what to do
next and why. It does no I/O: every decision is a walk over the compiled
route table, evaluating pure guards on one frozen snapshot per input.
"""

from __future__ import annotations

import functools
import math
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple, ParamSpec, TypeVar, cast

from agentfsm._engine import _remember
from agentfsm._engine._answers import Reply, read_reply, split
from agentfsm._engine.events import Emitter, Observer, as_observers
from agentfsm._engine.machine import TransitionsEngine, shared_machine
from agentfsm._engine.persistence import dump_run, load_run
from agentfsm._engine.policy import Policy, as_policy, as_shadow, check_against_tools
from agentfsm._engine.routes import WAITING, Route, RouteTable
from agentfsm._model._checked import listed, read, replaced
from agentfsm._model._errors import at_call
from agentfsm._model.approvals import Approval
from agentfsm._model.copies import own_call, own_turn
from agentfsm._model.ledger import Account
from agentfsm._model.run_state import Run, Step
from agentfsm._model.snapshot import RunSnapshot, default_snapshot
from agentfsm._model.tools import ToolSpec, tool_specs
from agentfsm._model.types import (
    Action,
    Decision,
    ExitReason,
    FinishReason,
    ModelTurn,
    Priority,
    State,
    ToolCall,
    ToolResult,
    Usage,
    unchecked_decision,
)
from agentfsm.exceptions import (
    AgentFSMError,
    CheckpointError,
    DataError,
    DefinitionError,
    InvalidInputError,
)
from agentfsm.guards import Hit, SignalConflict
from agentfsm.states import ENTRY
from agentfsm.states.execute import collect

__all__ = ["Controller"]

_INTENT = frozenset({Priority.P1, Priority.P2, Priority.P3, Priority.P4})
_ACTION_AT = {
    State.EXECUTE: Action.EXECUTE_TOOLS,
    State.HANDOFF: Action.HANDOFF,
    State.AWAIT_HUMAN: Action.ASK_HUMAN,
}


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _atomic(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Make a public input all or nothing, one at a time: a failed call leaves the run as it was.

    The call runs under the controller's lock, so one Controller shared by
    threads serializes their inputs instead of losing updates. The run's
    fields are saved before (a tuple of references: states replace a field,
    they never change one in place) and put back when anything raises, be it
    a guard, a verifier, a permission hook, an observer or the trace writer,
    so the host can fix the cause and give the same input again.
    """

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        ctl: Controller = args[0]  # type: ignore[assignment]
        with ctl._lock:
            run, last = ctl._run, ctl._last
            saved = run.save()
            try:
                return method(*args, **kwargs)
            except AgentFSMError as exc:
                ctl._undo(run, saved, last, exc)
                error = exc
            except BaseException as exc:
                ctl._undo(run, saved, last, exc)
                raise
        # agentfsm's own error says what was wrong with the input; the frames of the
        # states and guards it passed through are not the user's to read. What caused it
        # (a hook's or observer's own exception) keeps its whole traceback.
        raise error.with_traceback(None)

    return wrapper


class Controller:
    """Decide what an agent does after each model output, tool result or human reply.

    A Controller may be shared by threads: each input is routed under a lock,
    one at a time. Every input is all or nothing: when it raises (a bad
    argument, or a guard, verifier, hook or observer that fails) the run is
    left exactly as it was before the call.

    Args:
        policy: Limits and routing choices; `Policy()` when omitted. A mapping
            is read as a policy file's content (`{"max_turns": 3}`).
        tools: `None` accepts any tool name; otherwise the declared tools (names,
            OpenAI-style function specs, or Python callables).
        run_id: An id for events and traces; a random one when omitted.
        observers: Callables that receive every event, in order.
        engine: `"compiled"` walks the route table directly (the fast path);
            `"transitions"` lets the shared `transitions` machine pick every
            edge (the reference, for debugging; about 4x slower per step).
        clock: Seconds on a monotonic clock, read once per input for the run's
            elapsed time (`max_seconds`); `time.monotonic` when omitted. Replay
            and durable runs pass the recorded time, so a time budget decides
            again exactly as it did live.
        identify: The identity of a tool by name now (an MCP tool's pin), which remembered
            approvals are bound to; by default the digest of the declared tool's definition
            (None for a run that declares no tools). See docs/approvals.md.
        shadow: A candidate policy judged beside `policy`, recorded, never enforced.
        ledger: This run's account in its run tree's `Ledger`: spend charged below it
            reaches this run's budgets at once, and the snapshot's `tree` says what the
            tree has left (the `TreeBudget()` guard stops the run when it is spent).
    """

    @at_call
    def __init__(
        self,
        policy: Policy | Mapping[str, Any] | None = None,
        tools: Iterable[Any] | None = None,
        *,
        run_id: str | None = None,
        observers: Iterable[Observer] = (),
        engine: Literal["compiled", "transitions"] = "compiled",
        clock: Callable[[], float] | None = None,
        shadow: Policy | Mapping[str, Any] | None = None,
        identify: Callable[[str], str | None] | None = None,
        ledger: Account | None = None,
    ) -> None:
        self.policy = as_policy(policy)
        if ledger is not None and not isinstance(ledger, Account):
            raise DefinitionError(f"ledger must be a ledger Account, not {type(ledger).__name__}")
        clock = _as_clock(clock)
        if identify is not None and not callable(identify):
            raise DefinitionError(f"identify must be a callable or None, not {identify!r:.60}")
        if engine not in ("compiled", "transitions"):
            raise DefinitionError(f"engine must be 'compiled' or 'transitions', not {engine!r}")
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise DefinitionError(f"run_id must be a non-empty str or None, not {run_id!r}")
        observers = as_observers(observers)
        specs = tool_specs(tools)
        check_against_tools(self.policy, specs)  # a rule that can never match is an error
        self.shadow = as_shadow(shadow, specs)
        self._rows = _compiled(self.policy.routes)
        shared_machine(self.policy.routes)  # validated and shared: built once per route table
        self._run = Run(
            run_id or uuid.uuid4().hex[:12],
            self.policy,
            specs,
            clock,
            self.shadow,
            ledger,
        )
        self._run.identify = identify
        self._engine: TransitionsEngine | None = None
        # The latest model output as routed, and the run's own copies of its calls: a turn the
        # host built is kept as given (its calls equal the copies when routed), and one holding
        # the copies is made only when something reads it (`_routed`), not on every step.
        self._last: tuple[ModelTurn, list[ToolCall]] | None = None
        self._lock = threading.RLock()
        self._fired: list[tuple[Route, Hit]] = []
        # The calls started by `claim`, with the pending-call dict they were claimed in: a
        # new decision makes a new dict, so a call cleared again may be claimed again.
        self._claims: tuple[dict[str, ToolCall], set[str]] = ({}, set())
        if engine == "transitions":
            self._engine = TransitionsEngine(self.policy.routes)
            weakref.finalize(self, self._engine.close)
        # Built from the defaults, not validated: replay makes a Controller per recorded run.
        self._base = default_snapshot(self._run.run_id)
        self._events = Emitter(self._run.run_id, observers)
        if self._events.active:
            shadowed = None if self.shadow is None else self.shadow.to_json()
            self._events.started(self.policy.to_json(), _declared(self._run.specs), shadowed)
        if ledger is not None:
            # Spend below this run (a child's turns) reaches its budgets while the child runs.
            ledger.listen(self._charged_below)

    # -- what the host can read -------------------------------------------------

    @property
    def state(self) -> State:
        """The current state: a `State`, which compares equal to its name (`"execute"`)."""
        return self._run.state

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self._run.run_id

    @property
    def turn(self) -> int:
        """Model outputs seen so far, retries included."""
        return self._run.turn

    @property
    def done(self) -> bool:
        """Whether the run has ended."""
        return self._run.state is State.END

    @property
    def exit_reason(self) -> ExitReason | None:
        """Why the run ended, once it has."""
        return self._run.exit_reason

    @property
    def ledger(self) -> Account | None:
        """This run's account in its run tree's ledger, when it was given one."""
        return self._run.tree

    @property
    def turns_left(self) -> int:
        """Model turns the current episode has left under `max_turns`."""
        run = self._run
        return max(self.policy.max_turns - (run.turn - run.episode_start), 0)

    @property
    def pending_calls(self) -> list[ToolCall]:
        """Calls awaiting results (or a human's approval); copies: editing them changes nothing."""
        run = self._run
        return [own_call(c) for c in (list(run.pending.values()) or run.pending_approval)]

    def may_run(
        self, call_id: str, name: str | None = None, arguments: Mapping[str, Any] | None = None
    ) -> bool:
        """Say whether the call with this id may execute now: the one permission check.

        True only while the call awaits its result: the last decision cleared it to run
        (EXECUTE_TOOLS, HANDOFF, or a human's approval) and no result was given for it yet.
        Denied, refused, to-be-approved, unknown and already answered calls are False. When
        `name` or `arguments` are given they must equal the cleared call's, so a path that
        executes what a framework holds cannot run another call under a cleared id.
        Every path that executes a call asks this, by call id, never by position.
        """
        if not isinstance(call_id, str):
            raise InvalidInputError(f"call_id must be a str, not {type(call_id).__name__}")
        if name is not None and not isinstance(name, str):
            raise InvalidInputError(f"name must be a str or None, not {type(name).__name__}")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise InvalidInputError(
                f"arguments must be a mapping or None, not {type(arguments).__name__}"
            )
        with self._lock:
            run = self._run
            if run.state not in (State.EXECUTE, State.HANDOFF):
                return False
            call = run.pending.get(call_id)
            if call is None or call_id in run.refused:
                return False
            if name is not None and name != call.name:
                return False
            return arguments is None or _same_arguments(arguments, call.arguments or {})

    def claim(
        self, call_id: str, name: str | None = None, arguments: Mapping[str, Any] | None = None
    ) -> bool:
        """Say whether the call may start now, and mark it started: True once per cleared call.

        `may_run`, plus a claim made under the controller's lock: the first claim of a
        cleared call is True, every later claim of it False until a new decision clears it
        again. A path that starts a call claims it right then, so the same decision given
        twice (two threads, two tasks, a retry) runs each call at most once. `may_run` is
        unchanged by a claim: the call still awaits its result.
        """
        with self._lock:
            if not self.may_run(call_id, name, arguments):
                return False
            pending, started = self._claims
            if pending is not self._run.pending:
                started = set()
                self._claims = (self._run.pending, started)
            if call_id in started:
                return False
            started.add(call_id)
            return True

    @property
    def last_output(self) -> ModelTurn | None:
        """The latest model output as routed: normalized, with every call id issued.

        A copy of the run's record: editing its calls' arguments changes nothing.
        """
        last = self._routed()
        return None if last is None else own_turn(last)

    def _routed(self) -> ModelTurn | None:
        """The latest model output with the run's own calls (the record `dump` and replies read)."""
        if self._last is None:
            return None
        turn, calls = self._last
        # Made on each read, not kept: `last_output` reads it without the lock, and writing it
        # back could put an older output over a newer one.
        return turn if turn.tool_calls is calls else replaced(turn, {"tool_calls": calls})

    @property
    def tools(self) -> dict[str, ToolSpec] | None:
        """The declared tools by name, or None when any name is accepted."""
        return self._run.specs

    def add_observer(self, observer: Observer) -> None:
        """Send every later event to `observer` too."""
        self._events.observers.append(*as_observers((observer,)))

    # -- remembered approvals (docs/approvals.md) --------------------------------------

    @property
    def approvals(self) -> tuple[Approval, ...]:
        """The remembered approvals that are live now: used up, expired ones are left out."""
        with self._lock:
            run = self._run
            return _remember.live(run.approvals, _remember.now_of(run), run.episode)

    @_atomic
    def grant(
        self,
        tool: str,
        *,
        scope: str | Mapping[str, Any] = "conversation",
        pattern: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        identity: str | None = None,
        source: str = "host",
    ) -> Approval:
        """Remember an approval given out of band (an approvals file, a settings page).

        It covers later calls of `tool` that the policy would ask about, as an answer's
        `remember` does: with these exact `arguments`, or matching `pattern` (the rules'
        argument syntax, `"*"` for any arguments), within `scope` (`uses=N`, `seconds=T`,
        `run`, `conversation`, `deployment`). It is bound to the tool's identity now (or
        `identity`, e.g. an MCP tool's pin). Traced as `approval_granted`.

        Raises:
            InvalidInputError: a bad tool, scope, pattern or arguments; nothing changes.
        """
        run = self._run
        approval = _remember.grant(
            run,
            tool,
            scope=scope,
            pattern=pattern,
            arguments=arguments,
            identity=identity,
            source=source,
        )
        run.approvals = (*run.approvals, approval)
        run.approval_count += 1
        if self._events.active:
            self._events.record(
                "approval_granted", run.turn, approval=approval.model_dump(mode="json")
            )
        return approval

    @_atomic
    def revoke(self, approval_id: str) -> Approval:
        """Forget the remembered approval `approval_id`: it covers nothing from now on.

        Traced as `approval_revoked`. Raises InvalidInputError when the run holds no
        approval of that id (nothing changes).
        """
        run = self._run
        approval = _remember.revoke(run, approval_id)
        if self._events.active:
            self._events.record(
                "approval_revoked", run.turn, approval=approval.model_dump(mode="json")
            )
        return approval

    # -- save and restore -----------------------------------------------------------

    @_atomic
    def dump(self) -> dict[str, Any]:
        """Return the whole state of the run as JSON-compatible data; `load` restores it.

        Observers are not part of it. Code (a permission hook, verifiers, function
        guards, callable tools) is recorded by name and must be given again to `load`.
        """
        engine = "compiled" if self._engine is None else "transitions"
        return dump_run(self._run, self.policy, self._routed(), engine, self.shadow)

    @classmethod
    @at_call
    def load(
        cls,
        data: Mapping[str, Any],
        *,
        policy: Policy | None = None,
        tools: Iterable[Any] | None = None,
        observers: Iterable[Observer] = (),
        clock: Callable[[], float] | None = None,
        shadow: Policy | None = None,
        identify: Callable[[str], str | None] | None = None,
    ) -> Controller:
        """Restore a run from `dump()`'s data; it decides exactly as the original would.

        Args:
            data: What `dump()` returned (after any JSON round trip).
            policy: The live policy, required when the saved one holds code; it must
                equal the saved policy.
            tools: The live tools, required when the saved ones include callables.
            observers: Callables that receive every later event.
            clock: The clock of the restored run (see `Controller`); the time the
                run had already used is kept.
            shadow: The live shadow policy, required when the saved one holds code; it
                must equal the saved shadow. A run saved without a shadow may be given
                one: it changes no decision.
            identify: The tools' identities now (see `Controller`): a remembered approval
                covers a call only while its tool's identity is the one it was granted for.

        Raises:
            CheckpointError: another state-format version, a corrupted or impossible
                state, or a policy or tools that differ from the saved ones.
        """
        clock = _as_clock(clock)
        if shadow is not None and not isinstance(shadow, Policy):
            raise CheckpointError(f"shadow must be an agentfsm.Policy, not {type(shadow).__name__}")
        loaded = load_run(data, policy=policy, tools=tools, clock=clock, shadow=shadow)
        ctl = cls(
            loaded.policy,
            run_id=loaded.run.run_id,
            engine=loaded.engine,
            clock=clock,
            shadow=loaded.shadow,
            identify=identify,
        )
        loaded.run.identify = identify
        ctl._run = loaded.run
        last = loaded.last_output
        ctl._last = None if last is None else (last, last.tool_calls)
        ctl._events.observers.extend(as_observers(observers))
        return ctl

    def __reduce__(self) -> tuple[Any, ...]:
        if self._events.observers:
            raise CheckpointError(
                f"run {self.run_id}: a Controller with observers does not pickle (a trace "
                "writer holds an open file); pickle ctl.dump() and pass the observers again "
                "to Controller.load(data, observers=...)",
                run_id=self.run_id,
            )
        specs = self._run.specs
        tools = None
        if specs is not None:
            tools = [
                s.fn or {"name": s.name, "description": s.description, "parameters": s.parameters}
                for s in specs.values()
            ]
        load = functools.partial(
            Controller.load, policy=self.policy, tools=tools, shadow=self.shadow
        )
        return (load, (self.dump(),))

    # -- inputs -------------------------------------------------------------------

    @_atomic
    def on_model_output(self, output: ModelTurn | Mapping[str, Any] | Any) -> Decision:
        """Route one model output: a ModelTurn, or any payload `normalize` reads."""
        if self._run.state is not State.AWAIT_MODEL:
            raise self._wrong_state((State.AWAIT_MODEL,), "a model output")
        # parse.enter fills in the counters; the edge out of await_model reads nothing.
        step = Step(self._base, output)
        decision = self._route(step)
        self._last = None if step.output is None else (step.output, step.calls)
        return decision

    @_atomic
    def on_tool_results(self, results: Iterable[ToolResult | Mapping[str, Any] | Any]) -> Decision:
        """Route the results of the calls the last decision asked for.

        Each result is a `ToolResult`, a dict of its fields, an OpenAI tool message dict
        (`{"role": "tool", "tool_call_id", "content"}`, or a legacy `function` message, which
        answers the pending call of that name) or a LangChain `ToolMessage`.
        """
        if self._run.state not in (State.EXECUTE, State.HANDOFF):
            raise self._wrong_state((State.EXECUTE, State.HANDOFF), "tool results")
        run = self._run
        items = self._results(results)
        step = Step(run.snapshot(self._base, "tool_results", collect(run, items)))
        # What the host gave, dumped only if anyone listens: replay synthesizes the rest.
        return self._route(step, ("tool_results", {"results": items}))

    def _results(self, results: object) -> list[ToolResult]:
        """The host's results as ToolResults, in the order given."""
        if type(results) is list:
            for r in results:
                if type(r) is not ToolResult:
                    break
            else:
                return results
        elif not _is_sequence(results):
            raise InvalidInputError(
                "results must be a list of ToolResult (or of mappings with call_id, content, "
                f"is_error), not {type(results).__name__}",
                state=self._run.state.value,
                turn=self._run.turn,
            )
        return [
            r if isinstance(r, ToolResult) else self._as_result(i, r)
            for i, r in enumerate(cast(Iterable[Any], results))
        ]

    def _undo(
        self,
        run: Run,
        saved: tuple[Any, ...],
        last: tuple[ModelTurn, list[ToolCall]] | None,
        exc: BaseException,
    ) -> None:
        """Put the run back as it was before a failed input."""
        run.restore(saved)
        self._run, self._last = run, last
        if isinstance(exc, AttributeError | TypeError):
            _check_hits(self._fired, exc)  # a guard that answered something else than a Hit

    def _as_result(self, index: int, item: object) -> ToolResult:
        # Tool messages as chat histories hold them: OpenAI tool/function dicts, ToolMessage.
        from agentfsm.providers._frameworks import tool_result  # the normalizers load lazily

        message = tool_result(item, self._run.pending)
        if message is not None:
            return message
        try:
            return ToolResult.model_validate(item)
        except DataError as exc:
            problems = listed(exc.details["problems"])
            raise InvalidInputError(
                f"tool result #{index} is not a ToolResult (call_id, content, is_error): "
                + problems,
                state=self._run.state.value,
                turn=self._run.turn,
            ) from exc

    @_atomic
    def on_human_reply(
        self,
        approved: bool | Mapping[str, bool],
        message: str | None = None,
        *,
        messages: Mapping[str, str] | None = None,
        arguments: Mapping[str, Mapping[str, Any]] | None = None,
        remember: Mapping[str, str | Mapping[str, Any]] | None = None,
    ) -> Decision:
        """Route a human's answer to an ASK_HUMAN decision: one answer for all, or one per call.

        Approved calls run with the turn's allowed calls, in turn order; each declined
        call gets an error result with its own text. When every asked call is declined,
        nothing of the turn runs (without any text, the run ends HUMAN_DECLINED).

        Args:
            approved: True or False for every call awaiting approval, or a mapping
                `{call_id: bool}` whose keys are exactly their ids (the ASK_HUMAN
                decision's `tool_calls`).
            message: What the human said: with an approval, the decision's `note` for the
                model; the text of each declined call that has none of its own.
            messages: Each asked call's own text, by call id: a declined call's rejection
                text; on an approved call, a note for the model.
            arguments: Edited arguments of approved calls, by call id, each a JSON object.
                The edited call is checked as a new call (schema, permissions): denied or
                invalid, it does not run and gets an error result saying why; one the
                policy would ask about is approved by this answer. The call that runs, the
                decision, the trace and `dump()` hold the edited arguments, under the same id.
            remember: Scopes of approved calls, by call id, that the answer also holds for
                later calls of the same tool (`"once"`, `"uses=N"`, `"seconds=T"`, `"run"`,
                `"conversation"`, `"deployment"`, or `{"scope": ..., "pattern": ...}` to
                cover arguments matching a pattern): see `Controller.approvals` and
                docs/approvals.md. A declined call remembers nothing.

        Raises:
            InvalidInputError: not awaiting a human, or a reply that does not fit the asked
                calls (a missing or unknown id, a value of the wrong type); the run is unchanged.
        """
        if self._run.state is not State.AWAIT_HUMAN:
            raise self._wrong_state((State.AWAIT_HUMAN,), "a human reply")
        run = self._run
        reply = read_reply(run, approved, message, messages, arguments)
        # The turn's refused calls were answered in the ASK_HUMAN decision: not again here.
        last = self._routed()
        rejected = _refused(run, last)
        calls, answered = split(run, reply, message, last)
        rejected += answered
        remembered = _remember.from_reply(run, remember, calls, run.pending_approval)
        said = self._said(reply, message, calls)
        if said:
            run.last_call, run.streak = None, 0
        # An approved handoff (alone in its turn) hands off: it is not a tool to execute.
        handing = tuple(c for c in calls if c.name in run.policy.handoffs)
        snap = run.snapshot(
            self._base,
            "human_reply",
            {
                "executable": () if handing else calls,
                "handoffs": handing,
                "rejected": tuple(rejected),
                "human_approved": reply.approved,
                "human_message": said,
            },
        )
        record = reply.record(approved, message) if self._events.active else None
        if remembered:
            run.approvals = (*run.approvals, *remembered)
            run.approval_count += len(remembered)
            if record is not None:
                record["remember"] = list(remembered)  # dumped with the event
        # Answered: the snapshot holds the calls now, so none is left awaiting approval (a dump
        # taken after the reply would otherwise hold approvals in execute or end).
        run.pending_approval, run.pending_rejected, run.pending_allowed = (), (), ()
        run.refused = {}
        return self._route(Step(snap), None if record is None else ("human_reply", record))

    def _said(self, reply: Reply, message: str | None, calls: tuple[ToolCall, ...]) -> str | None:
        """What the human said for the model: `message`, with each approved call's own text.

        A decline that says nothing is a plain decline (HUMAN_DECLINED); any text, the
        message or a call's own, goes back to the model instead.
        """
        if not reply.approved:
            texts = [t for t in reply.texts.values() if t]
            return "; ".join(texts) if texts and not message else message
        runs = {c.id: c.name for c in calls}
        notes = [f"on {runs[i]} ({i}): {t}" for i, t in reply.texts.items() if t and i in runs]
        if not notes:
            return message
        return "; ".join([message, *notes] if message else notes)

    @_atomic
    def on_user_message(self, text: str) -> Decision | None:
        """Record a user message; it resets the repeated-call streak.

        While awaiting the model nothing is decided (None). While awaiting a
        human, the message is the human's reply: it approves a clarification
        and declines pending calls with that message. While results are
        pending (steering), it returns None and the calls the host then gives
        no result for are answered "skipped: a user message arrived" in the
        next decision's `results`. After FINAL (or a stop with INTERRUPTED) it
        opens the next episode of the conversation and returns None.
        """
        self._check_type("text", text, str)
        run = self._run
        opened = run.state is State.END
        if opened:
            self._open_episode()
        elif run.state in (State.EXECUTE, State.HANDOFF):
            run.interjection = text
        elif run.state is State.AWAIT_HUMAN:
            return self.on_human_reply(approved=not run.pending_approval, message=text)
        elif run.state is not State.AWAIT_MODEL:
            raise self._wrong_state((State.AWAIT_MODEL,), "a user message")
        run.last_call, run.streak = None, 0
        if self._events.active:  # one delivery: the episode's start and the message, or neither
            self._events.user_message(run.turn, text, run.episode if opened else None)
        return None

    def _open_episode(self) -> None:
        """Continue a conversation whose episode ended with FINAL or an interruption."""
        run = self._run
        if run.exit_reason not in (ExitReason.COMPLETED, ExitReason.INTERRUPTED):
            reason = run.exit_reason.value if run.exit_reason else "unknown"
            raise InvalidInputError(
                f"cannot take a user message: the run ended with {reason}; only a run that "
                "completed or was interrupted continues with a new episode",
                state=run.state.value,
                turn=run.turn,
            )
        run.episode += 1
        run.episode_start = run.turn
        run.state = State.AWAIT_MODEL
        run.exit_reason = None
        run.retries = run.incomplete = 0
        run.interjection = None

    @_atomic
    def stop(
        self, reason: ExitReason | str = ExitReason.INTERRUPTED, message: str | None = None
    ) -> Decision:
        """End the run from outside with `reason` (INTERRUPTED unless told otherwise).

        The decision is STOP with that exit reason (FINAL when it is COMPLETED),
        and the end is written to the trace like any other. Calls still pending
        get error results in the decision's `results`: give the results you
        have with `on_tool_results` first. Stopping a run that has ended raises
        InvalidInputError.
        """
        run = self._run
        exit_reason = self._exit_reason(reason)
        if message is not None and not isinstance(message, str):
            raise InvalidInputError(
                f"stop(message=...) must be a str or None, not {type(message).__name__}",
                state=run.state.value,
                turn=run.turn,
            )
        if run.state is State.END:
            ended = run.exit_reason.value if run.exit_reason else "unknown"
            raise InvalidInputError(
                f"cannot stop a run that has already ended ({ended})",
                state=run.state.value,
                turn=run.turn,
            )
        why = f"stopped from outside ({exit_reason.value})" + (f": {message}" if message else "")
        # Calls awaiting results, or a human with the allowed calls of the same turn: none
        # will run now, and each answers the turn the host holds.
        pending = list(run.pending.values()) or [*run.pending_approval, *run.pending_allowed]
        results = _not_executed(pending, [], why)
        answered = {r.call_id for r in results}
        results += [r for r in _refused(run, self._routed()) if r.call_id not in answered]
        source = run.state
        run.state, run.exit_reason = State.END, exit_reason
        run.pending, run.pending_approval, run.pending_rejected = {}, (), ()
        run.pending_allowed, run.approved, run.refused = (), (), {}
        run.interjection, run.round_failed = None, False
        decision = unchecked_decision(
            {
                "action": Action.FINAL if exit_reason is ExitReason.COMPLETED else Action.STOP,
                "priority": Priority.P6,
                "layer": 5,
                "reason": why,
                "guard": f"Stop(ExitReason.{exit_reason.name})",
                "fired": f"Stop(ExitReason.{exit_reason.name})",
                "tool_calls": [],
                "results": results,
                "exit_reason": exit_reason,
                "turn": run.turn,
                "state": State.END,
                "path": (source, State.END),
                "adjust": {},
                "answer": None,
                "note": None,
                "shadow": (),
                "covered": {},
            },
        )
        if self._events.active:
            self._events.stopped(run.turn, source.value, decision)
        return decision

    def _exit_reason(self, reason: object) -> ExitReason:
        try:
            if not isinstance(reason, str):
                raise ValueError(reason)
            return ExitReason(reason)
        except ValueError:
            names = ", ".join(r.value for r in ExitReason)
            raise InvalidInputError(
                f"stop(reason={reason!r}): not an ExitReason; one of {names}",
                state=self._run.state.value,
                turn=self._run.turn,
            ) from None

    @_atomic
    def charge(self, usage: Usage) -> None:
        """Add tokens and cost spent outside this run's model calls (a sub-agent's) to its budgets.

        No turn is counted; the next decision's budget checks see the new totals. A run in
        a ledger charges it too, so the runs above it see the spend at once.
        """
        if not isinstance(usage, Usage):
            raise InvalidInputError(
                f"charge() takes a Usage, not {type(usage).__name__}",
                state=self._run.state.value,
                turn=self._run.turn,
            )
        self._counted(usage)
        if self._run.tree is not None:
            self._run.tree.charge(usage)

    @_atomic
    def _charged_below(self, usage: Usage) -> None:
        """Count a run's spend below this one in the ledger (the ledger has it already)."""
        self._counted(usage)

    def _counted(self, usage: Usage) -> None:
        run = self._run
        run.tokens += usage.input_tokens + usage.output_tokens
        run.cost += usage.cost or 0.0
        if self._events.active:
            self._events.record("charged", run.turn, usage=usage.model_dump(mode="json"))

    # -- routing ------------------------------------------------------------------

    def _check_type(self, name: str, value: object, kind: type) -> None:
        if not isinstance(value, kind):
            raise InvalidInputError(
                f"{name} must be a {kind.__name__}, not {type(value).__name__} ({value!r:.60})",
                state=self._run.state.value,
                turn=self._run.turn,
            )

    def _wrong_state(self, states: tuple[State, ...], what: str) -> InvalidInputError:
        """The error for an input the run cannot take in its state: `what` is taken in `states`."""
        run = self._run
        wanted = " or ".join(s.value for s in states)
        return InvalidInputError(
            f"cannot take {what} in state {run.state.value!r}; it is taken in {wanted}",
            state=run.state.value,
            turn=run.turn,
        )

    def _route(self, step: Step, record: tuple[str, dict[str, Any]] | None = None) -> Decision:
        """Walk the route table from the current state to the next waiting state.

        `record` is the input's own event (tool results, a human reply); it is
        emitted with the step's events once the decision is made, so a failed
        input leaves no event behind. `fired` is kept on the controller: when
        the walk fails, the input's wrapper looks there for a guard that answered
        something other than a Hit or None (so the walk pays nothing for it).
        """
        fired: list[tuple[Route, Hit]] = []
        self._fired = fired
        run = self._run
        state = run.state
        path = [state]
        if self._engine is not None:
            state = self._walk_engine(self._engine, step, path, fired)
        else:
            snap = step.snap
            rows = self._rows[snap.phase]
            while True:
                for row in rows[state]:
                    hit = row.route.guard(snap)
                    if hit is not None:
                        break
                else:  # unreachable: every non-terminal state ends in an Otherwise() row
                    raise AssertionError(f"no route out of {state}")
                fired.append((row.route, hit))
                state = row.route.dest
                path.append(state)
                if row.entry is not None:
                    step.hit = hit
                    row.entry(run, step)
                    snap = step.snap
                if row.waits:  # the destination waits for the next input
                    break
        run.state = state
        decision = self._decide(step, tuple(path), fired)
        if self._events.active:
            # The input's event records the run's time, so replay reads the clock live read.
            self._events.step(run.turn, step.output, fired, decision, record, step.snap.elapsed)
        return decision

    def _walk_engine(
        self,
        engine: TransitionsEngine,
        step: Step,
        path: list[State],
        fired: list[tuple[Route, Hit]],
    ) -> State:
        """The walk of `_route` with the `transitions` machine picking every edge."""
        run = self._run
        state = run.state
        engine.set_state(state)
        while True:
            route, hit = engine.advance(step.snap)
            fired.append((route, hit))
            state = route.dest
            path.append(state)
            step.hit = hit
            entry = ENTRY.get(state)
            if entry is not None:
                entry(run, step)
            if state in WAITING:
                return state

    def _decide(
        self, step: Step, path: tuple[State, ...], fired: list[tuple[Route, Hit]]
    ) -> Decision:
        route, hit = fired[-1]
        run, snap = self._run, step.snap
        dest = route.dest
        # A fallback edge only says "nothing else applied": the decision belongs to the
        # last guard on the path that did apply (e.g. OutputTruncated, not "retry").
        cause_route, cause = _cause(fired) if route.fallback else (route, hit)
        guard, reason = cause_route.code, cause.reason
        if cause.guard is cause_route.guard:
            priority, layer, leaf = cause_route.priority, cause_route.layer, guard
        else:  # a composite: report the child that fired
            priority, layer = cause.guard.leaf_priority(), cause.guard.leaf_layer()
            leaf = repr(cause.guard)
        if cause is not hit:
            reason = f"{reason}; {hit.reason}"
        conflict = fired[1][1] if len(fired) > 1 else None
        if (
            conflict is not None
            and isinstance(conflict.guard, SignalConflict)
            and priority in _INTENT
        ):
            reason = f"{conflict.reason}; structure wins: {reason}"
            guard, priority, layer = repr(conflict.guard), Priority.P7, 1
        results: list[ToolResult] = list(snap.rejected)
        if snap.notes or snap.missing:
            # A skipped call is named by the skip note, not as a result the host forgot.
            notes = [
                *snap.notes,
                *(
                    f"no result for call {i}: sent an error result"
                    for i in snap.missing
                    if i not in snap.skipped
                ),
            ]
            reason = f"{reason} ({'; '.join(notes)})"
            # Every call id gets exactly one result, even when the run stops here.
            results += [r for r in snap.results if r.call_id in snap.missing]
        if dest is State.END:
            results += _not_run(snap, results, reason)
        calls: tuple[ToolCall, ...] = ()
        if dest is State.EXECUTE:
            action, calls = Action.EXECUTE_TOOLS, snap.executable
        elif dest is State.AWAIT_MODEL:
            action = Action.RETRY if route.source is State.RECOVER else Action.CONTINUE
        elif dest is State.END:
            action = Action.FINAL if run.exit_reason is ExitReason.COMPLETED else Action.STOP
        else:
            action = _ACTION_AT[dest]
            calls = _calls_for(dest, snap, run)
        return unchecked_decision(
            {
                "action": action,
                "priority": priority,
                "layer": layer,
                "reason": reason,
                "guard": guard,
                "fired": leaf,
                # Copies: a host or tool that edits them cannot rewrite the run's record.
                "tool_calls": [own_call(c) for c in calls],
                "results": results,
                "exit_reason": run.exit_reason if dest is State.END else None,
                "turn": run.turn,
                "state": dest,
                "path": path,
                "adjust": {} if route.source is not State.RECOVER else _adjust(route, step.output),
                "answer": None
                if action is not Action.FINAL
                else _answer(action, snap, run.policy.final_tools),
                "note": snap.human_message
                if calls and snap.human_approved
                else (snap.warning or None if calls else None),
                "shadow": step.shadow,
                "covered": _covered(snap, calls),
            },
        )


def _covered(snap: RunSnapshot, calls: tuple[ToolCall, ...]) -> dict[str, str]:
    """The decision's calls that a remembered approval let run, with the approval's id."""
    if not snap.covered or not calls:
        return {}
    ids = {c.id for c in calls}
    return {c: a for c, a in snap.covered if c in ids}


def _not_run(snap: RunSnapshot, answered: list[ToolResult], reason: str) -> list[ToolResult]:
    """Error results for the calls a run that ends here leaves without one.

    The host already holds the turn that made them (a model output that ends the run, or
    the turn whose calls a human approved just as a budget ran out); none will run, and
    every call id must get exactly one result, so each gets one saying why.
    """
    if snap.phase == "model_output":
        calls: tuple[ToolCall, ...] | list[ToolCall] = (
            snap.output.tool_calls if snap.output is not None else ()
        )
    elif snap.phase == "human_reply":
        calls = (*snap.executable, *snap.handoffs)
    else:  # tool results: every pending call has its result, given or synthesized
        return []
    return _not_executed(calls, answered, reason)


def _not_executed(
    calls: Sequence[ToolCall], answered: Sequence[ToolResult], why: str
) -> list[ToolResult]:
    """An error result saying why for each call that has none in `answered`."""
    given = {r.call_id for r in answered}
    return [
        ToolResult(call_id=c.id, name=c.name, is_error=True, content=f"not executed: {why}")
        for c in calls
        if c.id not in given
    ]


def _cause(fired: list[tuple[Route, Hit]]) -> tuple[Route, Hit]:
    """The last edge on the path whose guard did apply (not a fallback), else the last edge."""
    for route, hit in reversed(fired):
        if not route.fallback:
            return route, hit
    return fired[-1]


def _as_clock(clock: object) -> Callable[[], float]:
    """The run's clock: `time.monotonic`, or a callable that returns a number of seconds.

    It is read once here, for the run's start, and that reading is checked, so a
    clock that fails does so when it is given, not at the first input.
    """
    if clock is None:
        return time.monotonic
    if not callable(clock):
        raise DefinitionError(f"clock must be a callable returning seconds, not {clock!r:.60}")
    try:
        now = clock()
    except Exception as exc:
        raise DefinitionError(f"clock {clock!r:.60} raised {type(exc).__name__}: {exc}") from exc
    if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
        raise DefinitionError(f"clock {clock!r:.60} returned {now!r:.60}, not a number of seconds")
    first = [float(now)]
    read: Callable[[], float] = clock  # typed once here: a cast in the closure runs each read

    def started_then_clock() -> float:
        # The run's start is the reading just checked; every later read is the clock's own.
        return first.pop() if first else read()

    return started_then_clock


def _is_sequence(value: object) -> bool:
    """Whether `value` is an iterable of items, not a str, bytes or mapping (one item)."""
    return not isinstance(value, str | bytes | Mapping) and isinstance(value, Iterable)


# The JSON kind of each leaf type a parsed argument can hold. A boolean is its own kind:
# Python's `True == 1` must not let an approval of `{"force": 1}` run `{"force": true}`.
# Integers and floats are one kind, JSON's number: a framework that reads `1` as `1.0` has
# not changed the call.
_JSON_KINDS: dict[type, str] = {
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _same_arguments(given: Mapping[str, Any], cleared: Mapping[str, Any]) -> bool:
    """Whether `given` holds the same JSON data as the cleared call's arguments.

    Compared as JSON, walking `cleared` (parsed JSON: finite and acyclic) side by side
    with `given`, so a deep or cyclic `given` ends and a value of any other kind is simply
    different: its own `__eq__` is never called, and cannot raise or claim equality. Leaves
    are equal when they are of one JSON kind and equal: `true` is not `1`, `1` is `1.0`. A
    mapping that cannot be read is an InvalidInputError, not its own exception.
    """
    pending: list[tuple[Any, Any]] = [(given, cleared)]
    while pending:
        mine, theirs = pending.pop()
        if isinstance(theirs, Mapping):
            items = _items(mine)
            if items is None or len(items) != len(theirs):
                return False
            for key, value in items:
                if type(key) is not str or key not in theirs:
                    return False
                pending.append((value, theirs[key]))
        elif isinstance(theirs, list):
            if type(mine) not in (list, tuple) or len(mine) != len(theirs):
                return False
            pending.extend(zip(mine, theirs, strict=True))
        else:
            kind = _JSON_KINDS.get(type(theirs))  # None: not JSON data, so nothing matches it
            if kind is None or _JSON_KINDS.get(type(mine)) != kind or mine != theirs:
                return False
    return True


def _items(value: object) -> list[tuple[Any, Any]] | None:
    """A given mapping's items, read once; None for anything that is not a mapping."""
    if not isinstance(value, Mapping):
        return None
    return read("may_run: arguments", InvalidInputError, lambda: list(value.items()))


def _declared(specs: dict[str, ToolSpec] | None) -> list[dict[str, Any]] | None:
    """The declared tools as the trace records them: name, description, JSON schema."""
    if specs is None:
        return None
    return [
        {"name": s.name, "description": s.description, "parameters": s.parameters}
        for s in specs.values()
    ]


def _check_hits(fired: list[tuple[Route, Hit]], exc: Exception) -> None:
    """Raise DefinitionError naming the guard that answered something other than a Hit or None."""
    for route, hit in fired:
        if isinstance(hit, Hit) and isinstance(hit.reason, str):
            continue
        if isinstance(hit, Hit):
            what = f"a Hit whose reason is a {type(hit.reason).__name__}"
        else:
            what = f"{hit!r:.80}"
        raise DefinitionError(
            f"guard {route.code} returned {what} on the edge {route.source.value} -> "
            f"{route.dest.value}; a guard returns a Hit (with a str reason) or None"
        ) from exc


class _Row(NamedTuple):
    """A compiled edge: its route, the destination's entry work, and whether it waits."""

    route: Route
    entry: Callable[[Run, Step], None] | None
    waits: bool


_COMPILED: dict[RouteTable, dict[str, dict[State, tuple[_Row, ...]]]] = {}


def _compiled(table: RouteTable) -> dict[str, dict[State, tuple[_Row, ...]]]:
    """Rows per phase and state, with each destination's entry work and whether it waits."""
    rows = _COMPILED.get(table)
    if rows is None:
        if len(_COMPILED) >= 256:
            _COMPILED.clear()
        rows = _COMPILED[table] = {
            phase: {
                state: tuple(_Row(r, ENTRY.get(r.dest), r.dest in WAITING) for r in routes)
                for state, routes in by_state.items()
            }
            for phase, by_state in table.by_phase.items()
        }
    return rows


def _calls_for(dest: State, snap: RunSnapshot, run: Run) -> tuple[ToolCall, ...]:
    if dest is State.EXECUTE:
        return snap.executable
    if dest is State.HANDOFF:
        return snap.handoffs
    return run.pending_approval


def _refused(run: Run, turn: ModelTurn | None) -> list[ToolResult]:
    """Error results for the waiting calls a restored run refused (see `validate.recheck`)."""
    if not run.refused:
        return []
    names = {c.id: c.name for c in turn.tool_calls} if turn is not None else {}
    return [
        ToolResult(call_id=i, name=names.get(i), is_error=True, content=why)
        for i, why in run.refused.items()
    ]


def _answer(action: Action, snap: RunSnapshot, final_tools: frozenset[str]) -> Any:
    """The answer of a FINAL: the model's text, or the final tool's result."""
    if action is not Action.FINAL:
        return None
    if snap.phase == "tool_results":
        return next(
            (r.content for r in snap.results if r.name in final_tools and not r.is_error), None
        )
    return snap.output.text if snap.output is not None else None


_CONTEXT_FULL = frozenset({"model_context_window_exceeded", "model_length", "ERROR_LIMIT"})
"""Raw finish reasons read as LENGTH that mean the context window is full, not the output
limit (Anthropic, Mistral, Cohere v1): a larger max_tokens cannot help."""


def _adjust(route: Route, out: ModelTurn | None) -> dict[str, Any]:
    """After a retry of an output cut by the token limit, suggest doubling max_tokens.

    Only the provider's own length claim counts (finish reason LENGTH: `length`,
    `max_tokens`, `MAX_TOKENS`, `max_output_tokens`). An output that is merely
    `truncated` (a damaged stream, a stream that ended without a finish, an
    error chunk, a call the provider broke) or cut by a full context window is
    retried without it: more tokens would not help.
    """
    if route.source is not State.RECOVER or route.dest is not State.AWAIT_MODEL or out is None:
        return {}
    if out.finish_reason is not FinishReason.LENGTH or out.raw_finish_reason in _CONTEXT_FULL:
        return {}
    return {"max_tokens_factor": 2}
