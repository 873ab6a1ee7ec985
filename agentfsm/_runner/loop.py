"""The runner: drive a litellm model and Python tools through the Controller to an end.

The Controller decides; the runner does the I/O it asks for. After each model
output it executes the tool calls (EXECUTE_TOOLS), re-calls the model (CONTINUE,
RETRY, with `max_tokens` raised after a truncation), asks `on_ask` (ASK_HUMAN),
or stops (FINAL, STOP). Transient provider failures are retried with tenacity
(`ProviderRetry`); a provider failure retries cannot fix ends the run with
`ExitReason.PROVIDER_ERROR` in the returned `RunResult`, never an exception, and
an input too long for the model's context with `ExitReason.CONTEXT_EXHAUSTED`.

`run` and `arun` check their arguments into one `RunOptions` (`_options`) and
drive the same I/O-free steps (`_steps`); this module holds only the I/O, done
with blocking calls by one and awaited by the other.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, assert_never, cast

from agentfsm._model._errors import at_call
from agentfsm._model.types import Decision, ToolCall, ToolResult
from agentfsm._runner._batch import AbandonedError, until_cancelled
from agentfsm._runner._options import PROVIDER_TIMEOUT, Flag, OnAsk, RunOptions, ShowBudget
from agentfsm._runner._steps import (
    AskHuman,
    CallModel,
    Delegate,
    Loop,
    Need,
    RunTools,
    Steps,
    open_loop,
    steps_of,
)
from agentfsm._runner.agents import Agent
from agentfsm._runner.executor import Executor
from agentfsm._runner.retry import ProviderRetry, is_context_exhausted, is_transient
from agentfsm._runner.session import Answer, Inbox, RunResult
from agentfsm.exceptions import AgentFSMError, DefinitionError, ProviderError
from agentfsm.states._approvals import scope_of

__all__ = ["Agent", "Executor", "Inbox", "OnAsk", "ProviderRetry", "RunResult", "arun", "run"]


@at_call
def run(
    model: str,
    messages: str | Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Any] | None = None,
    policy: Any = None,
    shadow: Any = None,
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
    cancel: Flag | None = None,
    inbox: Inbox | None = None,
    agents: Mapping[str, Agent] | None = None,
    show_budget: ShowBudget = False,
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
        shadow: A candidate policy judged beside `policy` on every call and recorded
            (`Decision.shadow`, the trace), never enforced; see docs/shadow.md.
        tool_choice: Passed to litellm unchanged (`"auto"`, `"required"`, a function): a str
            or a mapping, else a DefinitionError before any request.
        parallel_tool_calls: Passed to litellm unchanged when not None (True or False).
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
            Each runs under its own policy narrowed by this run's (`Policy.narrowed_by`)
            and charges this run's budgets with every turn (its run tree's `Ledger`).
        show_budget: Show the model what is left before each call: True sends
            `Left.text()` ("Budget left: 3 model turns, 1,200 tokens, $0.0500, 40s.") as a
            system message after the conversation; a function of the `Left` returns the
            text, a whole message, or None for no message that turn. The message goes
            with the request only, never into `RunResult.messages`.
        **completion_kwargs: Further litellm arguments (`temperature`, `timeout`, ...).

    Returns:
        The `RunResult`: exit reason, decisions, messages, final text, turns and usage.
    """
    if inspect.iscoroutinefunction(on_ask):
        raise DefinitionError("run() needs a synchronous on_ask; use arun() for a coroutine")
    # Every parameter, by name, and nothing else yet: RunOptions has a field for each.
    options = RunOptions.checked(**locals())
    with open_loop(options) as loop:
        _drive(loop)
        return loop.session.result()


@at_call
async def arun(
    model: str,
    messages: str | Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Any] | None = None,
    policy: Any = None,
    shadow: Any = None,
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
    cancel: Flag | None = None,
    inbox: Inbox | None = None,
    agents: Mapping[str, Agent] | None = None,
    show_budget: ShowBudget = False,
    **completion_kwargs: Any,
) -> RunResult:
    """Run the loop like `run`, with `litellm.acompletion`; async tools and `on_ask` are awaited.

    Cancelling the task that runs `arun` is the stop button: the running tools are
    cancelled and `arun` returns the INTERRUPTED `RunResult`, with every message and
    result produced so far, instead of raising CancelledError.
    """
    # Every parameter, by name, and nothing else yet: RunOptions has a field for each.
    options = RunOptions.checked(**locals())
    with open_loop(options) as loop:
        try:
            await _adrive(loop)
        except asyncio.CancelledError:
            # The stop button: the run ends INTERRUPTED and its result keeps what was produced.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            loop.session.interrupt()
        return loop.session.result()


def _drive(loop: Loop) -> None:
    """Do what the run's steps ask with blocking calls, until the run ends."""
    retrying = (loop.options.retry or ProviderRetry()).retrying()
    steps, outcome = steps_of(loop), None
    while (need := _next(steps, outcome)) is not None:
        outcome = _do(loop, need, retrying)


async def _adrive(loop: Loop) -> None:
    """Do what the run's steps ask, awaiting each, until the run ends."""
    retrying = (loop.options.retry or ProviderRetry()).async_retrying()
    steps, outcome = steps_of(loop), None
    while (need := _next(steps, outcome)) is not None:
        outcome = await _ado(loop, need, retrying)


def _next(steps: Steps, outcome: Any) -> Need | None:
    """The steps' next need, given the last one's outcome; None once the run ended."""
    try:
        return steps.send(outcome)
    except StopIteration:
        return None


def _do(loop: Loop, need: Need, retrying: Any) -> Any:
    """Do one need with blocking calls and return its outcome."""
    match need:
        case CallModel(request):
            try:
                return _model_call(loop, lambda: retrying(_complete, request))
            except (ProviderError, AbandonedError) as exc:
                return exc
        case AskHuman(decision):
            return _sync_answer(loop.options.on_ask, decision)
        case Delegate(calls):
            return [_delegate(loop, call) for call in calls]
        case RunTools(decision):
            with loop.session.running_tools():
                return loop.executor.run(
                    decision,
                    cancel=loop.cancel,
                    skip=loop.skip(),
                    controller=loop.session.controller,
                )
        case _:
            assert_never(need)


async def _ado(loop: Loop, need: Need, retrying: Any) -> Any:
    """Do one need, awaiting it, and return its outcome."""
    match need:
        case CallModel(request):
            try:
                return await retrying(_acomplete, request)
            except ProviderError as exc:
                return exc
        case AskHuman(decision):
            return await _async_answer(loop.options.on_ask, decision)
        case Delegate(calls):
            return [await _adelegate(loop, call) for call in calls]
        case RunTools(decision):
            return await _arun_tools(loop, decision)
        case _:
            assert_never(need)


def _model_call(loop: Loop, call: Callable[[], Answer]) -> Answer:
    """The model call; with a cancellation it runs on a worker thread so cancel need not wait."""
    if loop.cancel is None:
        return call()
    return cast(Answer, until_cancelled(call, loop.cancelled))


async def _arun_tools(loop: Loop, decision: Decision) -> list[ToolResult]:
    """Await the batch; if the task is cancelled meanwhile, record what it produced first."""
    session = loop.session
    seen: dict[str, ToolResult] = {}
    try:
        with session.running_tools():
            return await loop.executor.arun(
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


def _delegate(loop: Loop, call: ToolCall) -> ToolResult:
    found = loop.child_run(call)
    if isinstance(found, ToolResult):
        return found
    model, messages, options = found
    with loop.session.delegating():
        child = run(model, messages, **options)
    return loop.adopt(call, child)


async def _adelegate(loop: Loop, call: ToolCall) -> ToolResult:
    found = loop.child_run(call)
    if isinstance(found, ToolResult):
        return found
    model, messages, options = found
    with loop.session.delegating():
        child = await arun(model, messages, **options)
    return loop.adopt(call, child)


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


def _complete(request: dict[str, Any]) -> Answer:
    """Make one model call; wrap what cannot be retried in `ProviderError`."""
    litellm = _litellm()
    from agentfsm._runner._stream import StreamReading, answer_of

    with _provider_errors(request):
        response = litellm.completion(**request)
        if not request.get("stream"):
            return answer_of(response)
        reading = StreamReading(response, request.get("messages"))
        try:
            for chunk in response:
                reading.add(chunk)
        except Exception as exc:
            return reading.cut(exc)
        return reading.answer()


async def _acomplete(request: dict[str, Any]) -> Answer:
    """Make one async model call; wrap what cannot be retried in `ProviderError`."""
    litellm = _litellm()
    from agentfsm._runner._stream import StreamReading, answer_of

    with _provider_errors(request):
        response = await litellm.acompletion(**request)
        if not request.get("stream"):
            return answer_of(response)
        reading = StreamReading(response, request.get("messages"))
        try:
            async for chunk in response:
                reading.add(chunk)
        except Exception as exc:
            return reading.cut(exc)
        return reading.answer()


@contextmanager
def _provider_errors(request: Mapping[str, Any]) -> Iterator[None]:
    """Let transient failures through as they are (tenacity retries them); raise the rest as
    `_provider_error` has them, from the original."""
    try:
        yield
    except Exception as exc:
        error = _provider_error(exc, request)
        if error is exc:
            raise
        raise error from exc


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


def _sync_answer(on_ask: OnAsk | None, decision: Decision) -> HumanAnswer:
    if on_ask is None:
        return False, None, None
    answer = on_ask(decision)
    if inspect.isawaitable(answer):
        close = getattr(answer, "close", None)
        if callable(close):
            close()  # never awaited: closed here rather than warned about later
        raise DefinitionError("run() needs a synchronous on_ask; use arun() for a coroutine")
    return _human_answer(answer)


async def _async_answer(on_ask: OnAsk | None, decision: Decision) -> HumanAnswer:
    if on_ask is None:
        return False, None, None
    answer = on_ask(decision)
    if inspect.isawaitable(answer):
        answer = await answer
    return _human_answer(answer)


def _human_answer(answer: object) -> HumanAnswer:
    """on_ask's answer as (approved, message, remember). Only True approves: a bare bool, a
    pair of a bool and a str or None, or that pair and a scope the approval is remembered
    for (docs/approvals.md). Anything else declines without a message, so the run ends
    HUMAN_DECLINED, and a RuntimeWarning tells the developer what came back (fail closed;
    the model is not sent the host's mistake as if a human had written it)."""
    if isinstance(answer, bool):
        return answer, None, None
    if (
        isinstance(answer, tuple)
        and len(answer) in (2, 3)
        and isinstance(answer[0], bool)
        and (answer[1] is None or isinstance(answer[1], str))
        and (len(answer) == 2 or _readable_scope(answer[2]))
    ):
        return answer[0], answer[1], answer[2] if len(answer) == 3 else None
    shown = repr(answer)
    shown = shown if len(shown) <= 200 else f"{shown[:200]}..."
    warnings.warn(
        f"on_ask answered {shown}, not (approved, message[, remember]) with approved a bool "
        "and remember a scope: declined",
        RuntimeWarning,
        stacklevel=2,
    )
    return False, None, None


HumanAnswer = tuple[bool, "str | None", Any]
"""on_ask's answer, read: approved, the message, and the scope to remember it for (or None)."""


def _readable_scope(scope: object) -> bool:
    """Whether `scope` is None or a scope `on_human_reply(remember=)` takes."""
    if scope is None:
        return True
    try:
        scope_of(scope, "on_ask: remember")
    except AgentFSMError:
        return False
    return True
