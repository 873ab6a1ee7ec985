"""The runner: drive a litellm model and Python tools through the Controller to an end.

The Controller decides; the runner does the I/O it asks for. After each model
output it executes the tool calls (EXECUTE_TOOLS), re-calls the model (CONTINUE,
RETRY, with `max_tokens` raised after a truncation), asks `on_ask` (ASK_HUMAN),
or stops (FINAL, STOP). Transient provider failures are retried with tenacity
(`ProviderRetry`); a provider failure retries cannot fix ends the run with
`ExitReason.PROVIDER_ERROR` in the returned `RunResult`, never an exception.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentfsm.core.tools import ToolSpec
from agentfsm.core.types import Action, Decision, ModelTurn, ToolCall, ToolResult
from agentfsm.exceptions import ProviderError
from agentfsm.runner.retry import ProviderRetry, is_transient
from agentfsm.runner.session import RunResult, Session

if TYPE_CHECKING:
    from agentfsm.providers import StreamAccumulator

__all__ = ["OnAsk", "ProviderRetry", "RunResult", "arun", "run"]

OnAsk = Callable[[Decision], "tuple[bool, str | None] | Awaitable[tuple[bool, str | None]]"]
"""Answers an ASK_HUMAN decision with `(approved, message)`; `arun` also awaits a coroutine."""

_TOOL_WORK = (Action.EXECUTE_TOOLS, Action.HANDOFF)


PROVIDER_TIMEOUT = 120.0
"""Seconds one provider call may take by default, per attempt: a hung provider ends in a
retried timeout, not in litellm's 6,000 s wait."""


def run(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Any] | None,
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
    **completion_kwargs: Any,
) -> RunResult:
    """Run the loop synchronously with `litellm.completion` until the Controller ends it.

    Args:
        model: A litellm model name, e.g. `openai/gpt-4o-mini` or `anthropic/claude-sonnet-4-5`.
        messages: The conversation so far, in OpenAI chat format (not modified).
        tools: Tools the model may call: names, OpenAI-style function specs or Python
            callables (only callables can be executed; a call to another tool gets an
            error result). None accepts any tool name and executes none.
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
        **completion_kwargs: Further litellm arguments (`temperature`, `timeout`, ...).

    Returns:
        The `RunResult`: exit reason, decisions, messages, final text, turns and usage.
    """
    with Session.open(
        model, messages, tools, policy, observers, trace, max_tokens=max_tokens
    ) as session:
        request = _request_options(tool_choice, parallel_tool_calls, api_base, api_key, stream)
        request.update(completion_kwargs)
        if timeout is not None:
            request["timeout"] = timeout
        retrying = (retry or ProviderRetry()).retrying()
        while not session.finished:
            try:
                turn = retrying(_complete, session.request(request))
            except ProviderError as exc:
                session.fail(exc)
                break
            decision = session.on_turn(turn)
            while decision.action in (*_TOOL_WORK, Action.ASK_HUMAN) and not session.finished:
                if decision.action is Action.ASK_HUMAN:
                    decision = session.on_human(decision, *_sync_answer(on_ask, decision))
                else:
                    results = [_execute(session.specs, c) for c in decision.tool_calls]
                    decision = session.on_results(results)
        return session.result()


async def arun(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Any] | None,
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
    **completion_kwargs: Any,
) -> RunResult:
    """Run the loop like `run`, with `litellm.acompletion`; async tools and `on_ask` are awaited.

    Tools run one after another in the order the model called them, so the
    results (and the trace) are the same on every run.
    """
    with Session.open(
        model, messages, tools, policy, observers, trace, max_tokens=max_tokens
    ) as session:
        request = _request_options(tool_choice, parallel_tool_calls, api_base, api_key, stream)
        request.update(completion_kwargs)
        if timeout is not None:
            request["timeout"] = timeout
        retrying = (retry or ProviderRetry()).async_retrying()
        while not session.finished:
            try:
                turn: ModelTurn = await retrying(_acomplete, session.request(request))
            except ProviderError as exc:
                session.fail(exc)
                break
            decision = session.on_turn(turn)
            while decision.action in (*_TOOL_WORK, Action.ASK_HUMAN) and not session.finished:
                if decision.action is Action.ASK_HUMAN:
                    approved, message = await _async_answer(on_ask, decision)
                    decision = session.on_human(decision, approved, message)
                else:
                    results = [await _aexecute(session.specs, c) for c in decision.tool_calls]
                    decision = session.on_results(results)
        return session.result()


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
    """Keep transient failures as they are (tenacity retries them); wrap the rest."""
    if isinstance(exc, ProviderError) or is_transient(exc):
        return exc
    return ProviderError(
        f"{request.get('model')}: {type(exc).__name__}: {exc}",
        status_code=getattr(exc, "status_code", None),
        error_type=type(exc).__name__,
    )


def _execute(specs: Mapping[str, ToolSpec] | None, call: ToolCall) -> ToolResult:
    """Run one tool call; an exception becomes an error result, never a crash."""
    spec = (specs or {}).get(call.name)
    if spec is None or spec.fn is None:
        return _no_implementation(call)
    try:
        value = spec.fn(**(call.arguments or {}))
    except Exception as exc:
        return _failed(call, exc)
    return ToolResult(call_id=call.id, content=value, name=call.name)


async def _aexecute(specs: Mapping[str, ToolSpec] | None, call: ToolCall) -> ToolResult:
    """Run one tool call, awaiting it when it is a coroutine function."""
    spec = (specs or {}).get(call.name)
    if spec is None or spec.fn is None:
        return _no_implementation(call)
    try:
        value = spec.fn(**(call.arguments or {}))
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        return _failed(call, exc)
    return ToolResult(call_id=call.id, content=value, name=call.name)


def _no_implementation(call: ToolCall) -> ToolResult:
    text = f"tool {call.name!r} has no Python implementation in this runner"
    return ToolResult(call_id=call.id, content=text, is_error=True, name=call.name)


def _failed(call: ToolCall, exc: Exception) -> ToolResult:
    text = f"{type(exc).__name__}: {exc}"
    return ToolResult(call_id=call.id, content=text, is_error=True, name=call.name)


def _sync_answer(on_ask: OnAsk | None, decision: Decision) -> tuple[bool, str | None]:
    if on_ask is None:
        return False, None
    answer = on_ask(decision)
    if inspect.isawaitable(answer):
        raise TypeError("run() needs a synchronous on_ask; use arun() for a coroutine")
    return answer


async def _async_answer(on_ask: OnAsk | None, decision: Decision) -> tuple[bool, str | None]:
    if on_ask is None:
        return False, None
    answer = on_ask(decision)
    if inspect.isawaitable(answer):
        return await answer
    return answer
