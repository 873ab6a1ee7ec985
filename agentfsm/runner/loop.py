"""The runner: drive a litellm model and Python tools through the Controller to an end.

The Controller decides; the runner does the I/O it asks for. After each model
output it executes the tool calls (EXECUTE_TOOLS), re-calls the model (CONTINUE,
RETRY, with `max_tokens` raised after a truncation), asks `on_ask` (ASK_HUMAN),
or stops (FINAL, STOP). Transient provider failures are retried with tenacity
(`ProviderRetry`); a provider failure retries cannot fix ends the run with
`ExitReason.PROVIDER_ERROR` in the returned `RunResult`, never an exception, and
an input too long for the model's context with `ExitReason.CONTEXT_EXHAUSTED`.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

from agentfsm.core._checked import check_number
from agentfsm.core.types import Action, Decision, ExitReason, ModelTurn, ToolCall, ToolResult
from agentfsm.exceptions import DefinitionError, ProviderError
from agentfsm.runner._batch import AbandonedError, until_cancelled
from agentfsm.runner.agents import Agent, child_messages, child_result, cleared
from agentfsm.runner.executor import Executor
from agentfsm.runner.retry import ProviderRetry, is_context_exhausted, is_transient
from agentfsm.runner.session import Inbox, RunResult, Session

if TYPE_CHECKING:
    from agentfsm.providers import StreamAccumulator

__all__ = ["Agent", "Executor", "Inbox", "OnAsk", "ProviderRetry", "RunResult", "arun", "run"]

OnAsk = Callable[[Decision], "tuple[bool, str | None] | Awaitable[tuple[bool, str | None]]"]
"""Answers an ASK_HUMAN decision with `(approved, message)`; `arun` also awaits a coroutine."""

_TOOL_WORK = (Action.EXECUTE_TOOLS, Action.HANDOFF)
_HOST_WORK = (Action.EXECUTE_TOOLS, Action.HANDOFF, Action.ASK_HUMAN)


class _Flag(Protocol):
    def is_set(self) -> bool: ...


class _Loop:
    """What one run acts with: the executor, the cancellation, the inbox, the sub-agents."""

    def __init__(
        self,
        session: Session,
        executor: Executor | None,
        parallel_tool_calls: bool | None,
        cancel: _Flag | None,
        inbox: Inbox | None,
        agents: Mapping[str, Agent] | None,
        child: dict[str, Any],
    ) -> None:
        self.session = session
        self.executor = executor or Executor(
            session.specs or {}, parallel_tool_calls=parallel_tool_calls is not False
        )
        self.cancel = cancel
        self.inbox = inbox
        self.agents = dict(agents or {})
        self.child = child
        # Set when a child was interrupted: the cancellation (of the task) was meant for all.
        self.interrupted = False

    def cancelled(self) -> bool:
        """Whether the run was cancelled; if so it ends INTERRUPTED, nothing produced lost."""
        if self.interrupted or (self.cancel is not None and self.cancel.is_set()):
            self.session.interrupt()
            return True
        return False

    def going_on(self) -> bool:
        """Before a model call: not cancelled, and (queued messages taken) not finished."""
        return not self.cancelled() and self.session.take(self.inbox)

    def skip(self) -> _Flag | None:
        return None if self.inbox is None else self.inbox.arrived

    def child_run(self, call: ToolCall) -> tuple[Agent, dict[str, Any]] | ToolResult:
        """The child agent and its run's arguments, or the error result when there is none."""
        agent = self.agents.get(call.name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            return Executor.error_of(
                call, f"no agent is registered for handoff {call.name!r}; agents: {known}"
            )
        options = {**self.child, **agent.options}
        options["model"] = agent.model or options["model"]
        options.update(tools=agent.tools, policy=agent.policy, cancel=self.cancel)
        return agent, options

    def adopt(self, call: ToolCall, child: RunResult) -> ToolResult:
        """Charge the child's usage to this run and make its end the call's result."""
        self.session.charge(child.usage)
        self.interrupted = self.interrupted or child.exit_reason is ExitReason.INTERRUPTED
        return child_result(call, child.exit_reason, child.text, child.error)


PROVIDER_TIMEOUT = 120.0
"""Seconds one provider call may take by default, per attempt: a hung provider ends in a
retried timeout, not in litellm's 6,000 s wait."""


def run(
    model: str,
    messages: str | Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Any] | None = None,
    policy: Any = None,
    tool_choice: str | Mapping[str, Any] | None = None,
    parallel_tool_calls: bool | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    stream: bool = False,
    max_tokens: int | None = None,
    observers: Sequence[Callable[[Mapping[str, Any]], Any]] = (),
    trace: str | os.PathLike[str] | None = None,
    retry: ProviderRetry | None = None,
    on_ask: OnAsk | None = None,
    timeout: float | None = PROVIDER_TIMEOUT,
    executor: Executor | None = None,
    cancel: _Flag | None = None,
    inbox: Inbox | None = None,
    agents: Mapping[str, Agent] | None = None,
    **completion_kwargs: Any,
) -> RunResult:
    """Run the loop synchronously with `litellm.completion` until the Controller ends it.

    Args:
        model: A litellm model name, e.g. `openai/gpt-4o-mini` or `anthropic/claude-sonnet-4-5`.
        messages: The conversation so far, in OpenAI chat format (not modified), or a str:
            the user's one message.
        tools: Tools the model may call: names, OpenAI-style function specs or Python
            callables (only callables can be executed; a call to another tool gets an
            error result). Tools the policy denies by name are not offered. None (the
            default) is a plain chat run, offering no tool; a run started inside a tool
            of another run takes that run's tools (and, without a policy of its own, its
            permissions) unless given its own (`tools=[]` for none).
        policy: The `agentfsm.Policy`; None uses the defaults.
        tool_choice: Passed to litellm unchanged (`"auto"`, `"required"`, a function).
        parallel_tool_calls: Passed to litellm unchanged when not None.
        api_base: The provider's base URL (e.g. a local OpenAI-compatible server).
        api_key: The provider key; None lets litellm read the environment.
        stream: Stream each model call and accumulate the chunks into one turn.
        max_tokens: The output limit of the first call; raised after a truncation.
        observers: Callables receiving every controller event, in order.
        trace: Write the events to this JSON-lines file as well.
        retry: How transient provider failures are retried (default `ProviderRetry()`).
        on_ask: Answers ASK_HUMAN decisions; without it every ask is declined.
        timeout: Seconds one provider call may take, per attempt (None: litellm's own).
        executor: Runs the tool calls; by default an `Executor` over `tools` (10 at a
            time, one at a time when `parallel_tool_calls=False`).
        cancel: A `threading.Event` (or an `asyncio.Event` for `arun`): once set, the
            running tools are cancelled and the run ends INTERRUPTED, keeping every
            message and result produced. A model call already sent finishes first.
        inbox: User messages sent while the run goes on (`Inbox.send`, from any thread):
            during a batch they skip the calls not yet started; after a final answer they
            continue the conversation as the next episode.
        agents: The sub-agents handoff tools (the policy's `handoffs`) run, by tool name.
        **completion_kwargs: Further litellm arguments (`temperature`, `timeout`, ...).

    Returns:
        The `RunResult`: exit reason, decisions, messages, final text, turns and usage.
    """
    if inspect.iscoroutinefunction(on_ask):
        raise DefinitionError("run() needs a synchronous on_ask; use arun() for a coroutine")
    messages, child, request = _options(
        model,
        messages,
        tool_choice,
        parallel_tool_calls,
        api_base,
        api_key,
        stream,
        retry,
        on_ask,
        timeout,
        completion_kwargs,
        _Given(max_tokens, observers, trace, executor, cancel, inbox, agents),
    )
    with Session.open(
        model, messages, tools, policy, observers, trace, max_tokens=max_tokens
    ) as session:
        loop = _Loop(session, executor, parallel_tool_calls, cancel, inbox, agents, child)
        retrying = (retry or ProviderRetry()).retrying()
        while loop.going_on():
            try:
                turn = _model_call(loop, lambda: retrying(_complete, session.request(request)))
            except ProviderError as exc:
                session.fail(exc)
                break
            except AbandonedError:  # cancelled while the model answered: not waited for
                session.interrupt()
                break
            decision = session.on_turn(turn)
            while decision.action in _HOST_WORK and not session.finished and not loop.cancelled():
                decision = _act(loop, decision, on_ask)
        return session.result()


def _model_call(loop: _Loop, call: Callable[[], ModelTurn]) -> ModelTurn:
    """The model call; with a cancellation it runs on a worker thread so cancel need not wait."""
    if loop.cancel is None:
        return call()
    return cast(ModelTurn, until_cancelled(call, loop.cancelled))


def _act(loop: _Loop, decision: Decision, on_ask: OnAsk | None) -> Decision:
    """Do what one decision asks: ask the human, run the delegate, or run the batch."""
    session = loop.session
    if decision.action is Action.ASK_HUMAN:
        return session.on_human(decision, *_sync_answer(on_ask, decision))
    if decision.action is Action.HANDOFF:
        return session.on_results(
            [_delegate(loop, c) for c in cleared(session.controller, decision)]
        )
    with session.running_tools():
        results = loop.executor.run(
            decision, cancel=loop.cancel, skip=loop.skip(), controller=session.controller
        )
    session.steer(loop.inbox)
    return session.on_results(results)


def _delegate(loop: _Loop, call: ToolCall) -> ToolResult:
    found = loop.child_run(call)
    if isinstance(found, ToolResult):
        return found
    agent, options = found
    model = options.pop("model")
    return loop.adopt(call, run(model, child_messages(agent, call), **options))


async def arun(
    model: str,
    messages: str | Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Any] | None = None,
    policy: Any = None,
    tool_choice: str | Mapping[str, Any] | None = None,
    parallel_tool_calls: bool | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    stream: bool = False,
    max_tokens: int | None = None,
    observers: Sequence[Callable[[Mapping[str, Any]], Any]] = (),
    trace: str | os.PathLike[str] | None = None,
    retry: ProviderRetry | None = None,
    on_ask: OnAsk | None = None,
    timeout: float | None = PROVIDER_TIMEOUT,
    executor: Executor | None = None,
    cancel: _Flag | None = None,
    inbox: Inbox | None = None,
    agents: Mapping[str, Agent] | None = None,
    **completion_kwargs: Any,
) -> RunResult:
    """Run the loop like `run`, with `litellm.acompletion`; async tools and `on_ask` are awaited.

    Cancelling the task that runs `arun` is the stop button: the running tools are
    cancelled and `arun` returns the INTERRUPTED `RunResult`, with every message and
    result produced so far, instead of raising CancelledError.
    """
    messages, child, request = _options(
        model,
        messages,
        tool_choice,
        parallel_tool_calls,
        api_base,
        api_key,
        stream,
        retry,
        on_ask,
        timeout,
        completion_kwargs,
        _Given(max_tokens, observers, trace, executor, cancel, inbox, agents),
    )
    with Session.open(
        model, messages, tools, policy, observers, trace, max_tokens=max_tokens
    ) as session:
        loop = _Loop(session, executor, parallel_tool_calls, cancel, inbox, agents, child)
        retrying = (retry or ProviderRetry()).async_retrying()
        try:
            while loop.going_on():
                try:
                    turn: ModelTurn = await retrying(_acomplete, session.request(request))
                except ProviderError as exc:
                    session.fail(exc)
                    break
                decision = session.on_turn(turn)
                while (
                    decision.action in _HOST_WORK and not session.finished and not loop.cancelled()
                ):
                    decision = await _aact(loop, decision, on_ask)
        except asyncio.CancelledError:
            # The stop button: the run ends INTERRUPTED and its result keeps what was produced.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            session.interrupt()
        return session.result()


async def _aact(loop: _Loop, decision: Decision, on_ask: OnAsk | None) -> Decision:
    """Do what one decision asks, awaiting tools, delegates and `on_ask`."""
    session = loop.session
    if decision.action is Action.ASK_HUMAN:
        approved, message = await _async_answer(on_ask, decision)
        return session.on_human(decision, approved, message)
    if decision.action is Action.HANDOFF:
        return session.on_results(
            [await _adelegate(loop, c) for c in cleared(session.controller, decision)]
        )
    seen: dict[str, ToolResult] = {}
    try:
        with session.running_tools():
            results = await loop.executor.arun(
                decision,
                cancel=loop.cancel,
                skip=loop.skip(),
                on_result=lambda r: seen.__setitem__(r.call_id, r),
                controller=session.controller,
            )
    except asyncio.CancelledError:
        # Every call keeps one result: what finished, and a cancellation for the rest.
        done = [seen.get(c.id) or Executor.cancelled(c, started=True) for c in decision.tool_calls]
        session.on_results(done)
        raise
    session.steer(loop.inbox)
    return session.on_results(results)


async def _adelegate(loop: _Loop, call: ToolCall) -> ToolResult:
    found = loop.child_run(call)
    if isinstance(found, ToolResult):
        return found
    agent, options = found
    model = options.pop("model")
    return loop.adopt(call, await arun(model, child_messages(agent, call), **options))


class _Given(NamedTuple):
    """The arguments of `run` that `_options` only checks (the session and loop take them)."""

    max_tokens: object
    observers: object
    trace: object
    executor: object
    cancel: object
    inbox: object
    agents: object


def _options(
    model: str,
    messages: str | Sequence[Mapping[str, Any]],
    tool_choice: str | Mapping[str, Any] | None,
    parallel_tool_calls: bool | None,
    api_base: str | None,
    api_key: str | None,
    stream: bool,
    retry: ProviderRetry | None,
    on_ask: OnAsk | None,
    timeout: float | None,
    completion_kwargs: dict[str, Any],
    given: _Given,
) -> tuple[Sequence[Mapping[str, Any]], dict[str, Any], dict[str, Any]]:
    """What `run` and `arun` pass on: the messages (a str is the user's one message), a
    sub-agent's run arguments, and each model request's. Every argument is checked first:
    one of the wrong kind raises DefinitionError naming it, before a model is called."""
    if not isinstance(model, str) or not model:
        raise DefinitionError(f"model must be a litellm model name, not {model!r}")
    conversation: Sequence[Mapping[str, Any]] = (
        [{"role": "user", "content": messages}] if isinstance(messages, str) else messages
    )
    if not isinstance(conversation, Sequence) or not all(
        isinstance(m, Mapping) for m in conversation
    ):
        raise DefinitionError(
            "messages must be a str or a list of OpenAI chat messages ({'role', 'content'}), "
            f"not {type(messages).__name__}"
        )
    if timeout is not None:
        check_number("run", "timeout", timeout, minimum=0, error=DefinitionError)
    if given.max_tokens is not None:
        check_number(
            "run", "max_tokens", given.max_tokens, minimum=1, integer=True, error=DefinitionError
        )
    checks: tuple[tuple[str, object, Callable[[Any], bool], str], ...] = (
        ("observers", given.observers, _is_list, "a list of callables"),
        ("trace", given.trace, lambda v: isinstance(v, str | os.PathLike), "a file path"),
        ("retry", retry, lambda v: isinstance(v, ProviderRetry), "a ProviderRetry"),
        ("on_ask", on_ask, callable, "a function of the decision"),
        ("stream", stream, lambda v: isinstance(v, bool), "True or False"),
        ("executor", given.executor, lambda v: isinstance(v, Executor), "an Executor"),
        ("cancel", given.cancel, lambda v: callable(getattr(v, "is_set", None)), "an Event"),
        ("inbox", given.inbox, lambda v: isinstance(v, Inbox), "an Inbox"),
        ("agents", given.agents, _is_agents, "a mapping of tool names to Agents"),
    )
    if given.observers is None:
        raise DefinitionError("observers must be a list of callables, not None")
    for name, value, good, expected in checks:
        if value is not None and not good(value):
            raise DefinitionError(f"{name} must be {expected} or None, not {value!r}")
    child = {
        "model": model,
        "tool_choice": tool_choice,
        "parallel_tool_calls": parallel_tool_calls,
        "api_base": api_base,
        "api_key": api_key,
        "stream": stream,
        "retry": retry,
        "on_ask": on_ask,
        **completion_kwargs,
    }
    request = _request_options(tool_choice, parallel_tool_calls, api_base, api_key, stream)
    request.update(completion_kwargs)
    if timeout is not None:
        request["timeout"] = timeout
    return conversation, child, request


def _is_list(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _is_agents(value: object) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, Agent) for k, v in value.items()
    )


def _request_options(
    tool_choice: str | Mapping[str, Any] | None,
    parallel_tool_calls: bool | None,
    api_base: str | None,
    api_key: str | None,
    stream: bool,
) -> dict[str, Any]:
    options: dict[str, Any] = {
        "tool_choice": tool_choice,
        "parallel_tool_calls": parallel_tool_calls,
        "api_base": api_base,
        "api_key": api_key,
    }
    options = {k: v for k, v in options.items() if v is not None}
    # tenacity owns the retries: the SDK underneath must not retry on its own.
    options["max_retries"] = 0
    if stream:
        options["stream"] = True
        options["stream_options"] = {"include_usage": True}
    return options


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


def _complete(request: dict[str, Any]) -> ModelTurn:
    """Make one model call; wrap what cannot be retried in `ProviderError`."""
    litellm = _litellm()
    try:
        response = litellm.completion(**request)
        if not request.get("stream"):
            return _normalize(response)
        accumulator = _accumulator()
        try:
            for chunk in response:
                accumulator.add(chunk)
        except Exception as exc:
            return _cut_stream(accumulator, exc)
        return accumulator.turn()
    except Exception as exc:
        error = _provider_error(exc, request)
        if error is exc:
            raise
        raise error from exc


async def _acomplete(request: dict[str, Any]) -> ModelTurn:
    """Make one async model call; wrap what cannot be retried in `ProviderError`."""
    litellm = _litellm()
    try:
        response = await litellm.acompletion(**request)
        if not request.get("stream"):
            return _normalize(response)
        accumulator = _accumulator()
        try:
            async for chunk in response:
                accumulator.add(chunk)
        except Exception as exc:
            return _cut_stream(accumulator, exc)
        return accumulator.turn()
    except Exception as exc:
        error = _provider_error(exc, request)
        if error is exc:
            raise
        raise error from exc


def _normalize(response: Any) -> ModelTurn:
    from agentfsm.providers import normalize

    return normalize(response, provider="litellm")


def _accumulator() -> StreamAccumulator:
    from agentfsm.providers import StreamAccumulator

    return StreamAccumulator("litellm")


def _cut_stream(accumulator: StreamAccumulator, exc: Exception) -> ModelTurn:
    """Hand a stream cut after its first chunk to the Controller; before it, it is a failure.

    litellm raises `MidStreamFallbackError` when an OpenAI-style stream ends
    without a finish reason. What arrived is a real (truncated) output: the
    Controller, not the retry loop, decides whether to retry it.
    """
    if accumulator.provider is None:
        raise exc
    return accumulator.turn()


def _provider_error(exc: Exception, request: Mapping[str, Any]) -> Exception:
    """Keep transient failures as they are (tenacity retries them); wrap the rest, marking
    an input that does not fit the context (`details["context_exhausted"]`)."""
    if isinstance(exc, ProviderError):
        return exc
    exhausted = is_context_exhausted(exc)
    if not exhausted and is_transient(exc):
        return exc
    return ProviderError(
        f"{request.get('model')}: {type(exc).__name__}: {exc}",
        status_code=getattr(exc, "status_code", None),
        error_type=type(exc).__name__,
        context_exhausted=exhausted,
    )


def _sync_answer(on_ask: OnAsk | None, decision: Decision) -> tuple[bool, str | None]:
    if on_ask is None:
        return False, None
    answer = on_ask(decision)
    if inspect.isawaitable(answer):
        close = getattr(answer, "close", None)
        if callable(close):
            close()  # never awaited: closed here rather than warned about later
        raise DefinitionError("run() needs a synchronous on_ask; use arun() for a coroutine")
    return _human_answer(answer)


async def _async_answer(on_ask: OnAsk | None, decision: Decision) -> tuple[bool, str | None]:
    if on_ask is None:
        return False, None
    answer = on_ask(decision)
    if inspect.isawaitable(answer):
        answer = await answer
    return _human_answer(answer)


def _human_answer(answer: object) -> tuple[bool, str | None]:
    """on_ask's answer as (approved, message). Only True approves: a bare bool, or a pair of
    a bool and a str or None. Anything else declines without a message, so the run ends
    HUMAN_DECLINED, and a RuntimeWarning tells the developer what came back (fail closed;
    the model is not sent the host's mistake as if a human had written it)."""
    if isinstance(answer, bool):
        return answer, None
    if (
        isinstance(answer, tuple)
        and len(answer) == 2
        and isinstance(answer[0], bool)
        and (answer[1] is None or isinstance(answer[1], str))
    ):
        return answer[0], answer[1]
    shown = repr(answer)
    shown = shown if len(shown) <= 200 else f"{shown[:200]}..."
    warnings.warn(
        f"on_ask answered {shown}, not (approved, message) with approved a bool: declined",
        RuntimeWarning,
        stacklevel=2,
    )
    return False, None
