"""The executor: run the tool calls a decision asks for, and return one result per call id.

agentfsm decides, the executor acts. It is usable on its own by a host that
embeds the Controller: `Executor(tools).run(decision)` returns exactly one
`ToolResult` per call, in the order of the calls, whatever order they finished in.

Rules, in the order a reviewer asks about them:
- Calls of one batch run concurrently, at most `max_concurrency` (10) at a time;
  `parallel_tool_calls=False` runs them one after another.
- A tool declares whether it reads or writes (`ToolOptions(effect=...)`, default
  `"write"`, the safe choice). A call waits for every earlier writer of its batch,
  and a writer also waits for every earlier call: reads between two writes run
  together, and no call sees the batch's state out of the model's order.
- Exceptions, timeouts (`ToolOptions(timeout=...)` or the executor's `timeout`)
  and cancellations become error results naming the exception type. Describing
  an exception never fails: one whose `str()` raises is named by its type. On
  the sync path every exception a tool raises in its worker thread is its
  result, `SystemExit` and `KeyboardInterrupt` too (no thread but the main one
  can stop the process); on the async path `KeyboardInterrupt`
  and `SystemExit` propagate, as asyncio has them do.
- A sync tool that times out or is cancelled cannot be killed: its thread is
  abandoned (a daemon thread) and its late value is dropped. Since it may still
  be running, the calls ordered after it are not started: each gets the error
  result "not run: call ... timed out and may still be running" (for a writer
  that is every later call of the batch; for a read, the next writer and what
  follows it). So no call ever overlaps a writer it was ordered after, inside
  one batch; the next batch does not wait for an abandoned call. A coroutine
  tool's timeout cancels it to its end, so it holds nothing back.
- A result longer than `max_result_chars` (as text; JSON for other values) is
  cut, with a visible marker giving the original size; so is an error result
  (a 5 MB exception message). A value that cannot be rendered (neither a string
  nor JSON-serialisable, an int past Python's int-to-text limit) becomes an
  error result naming the tool; lone surrogates in the text (a non-UTF-8 file
  name) are written as `\\udcff` escapes, which every provider accepts.
- Only tools declared idempotent (`ToolOptions(idempotent=True)`) are retried,
  with tenacity, up to `retry_attempts` times.
- Each call, and each retry of it, gets its own copy of the arguments: a tool
  that edits what it was given (nested dicts and lists included) changes neither
  the decision nor the controller's record of the call.
- With `controller=`, each call runs only if `controller.may_run(id, name, arguments)`
  says so when the batch is planned, and the controller's `claim` right before it
  starts; a call it does not clear is not run and gets no result here: the
  controller answers it (see docs/execution-paths.md). The claim makes a cleared
  call run at most once: when the same decision is given to `run`/`arun` again
  (another thread, another task, a retry before its results were given), a call
  already started is neither run nor answered by the second attempt.
- `cancel` (a `threading.Event`, or an `asyncio.Event` in `arun`) cancels what
  runs and what has not started; `skip` (an event set when a user message
  arrives) skips the calls not yet started ("skipped: a user message
  arrived") and lets the running ones finish.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, overload

from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_not_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from agentfsm._model._checked import read, replaced
from agentfsm._model._errors import at_call
from agentfsm._model.copies import copied
from agentfsm._model.limits import MAX_DEPTH, nesting_exceeds
from agentfsm._model.tools import ToolSpec, tool_specs
from agentfsm._model.types import Action, Decision, ToolCall, ToolResult
from agentfsm._runner._batch import (
    AsyncBatch,
    Flag,
    Job,
    SyncBatch,
    TimedOutError,
    awaited,
    in_thread,
    order,
)
from agentfsm.exceptions import DefinitionError, InvalidInputError, ToolDefinitionError
from agentfsm.states.execute import EMPTY_RESULT, SKIPPED, is_empty

__all__ = ["SKIPPED", "Executor", "ToolOptions", "running_call", "tool"]

_OPTIONS_ATTR = "__agentfsm_tool__"


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """How the executor runs one tool."""

    effect: Literal["read", "write"] = "write"
    """`"read"` tools of a batch run together between writes; `"write"` (the default) waits
    for every earlier call of its batch."""
    timeout: float | None = None
    """Seconds before the call ends with a TimeoutError result; None uses the executor's."""
    idempotent: bool = False
    """Whether a failed call may be retried (tenacity); only idempotent tools are."""

    def __post_init__(self) -> None:
        if self.effect not in ("read", "write"):
            raise ToolDefinitionError(f"ToolOptions(effect={self.effect!r}): 'read' or 'write'")
        if self.timeout is not None and not (
            isinstance(self.timeout, int | float) and math.isfinite(self.timeout)
        ):
            raise ToolDefinitionError(f"ToolOptions(timeout={self.timeout!r}): a finite number")
        if self.timeout is not None and self.timeout <= 0:
            raise ToolDefinitionError(f"ToolOptions(timeout={self.timeout!r}): must be > 0")


_F = TypeVar("_F", bound=Callable[..., Any])


@overload
def tool(
    fn: _F,
    *,
    effect: Literal["read", "write"] = "write",
    timeout: float | None = None,
    idempotent: bool = False,
) -> _F: ...
@overload
def tool(
    fn: None = None,
    *,
    effect: Literal["read", "write"] = "write",
    timeout: float | None = None,
    idempotent: bool = False,
) -> Callable[[_F], _F]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    *,
    effect: Literal["read", "write"] = "write",
    timeout: float | None = None,
    idempotent: bool = False,
) -> Any:
    """Mark a Python tool with its ToolOptions (`@tool(effect="read", timeout=5)`)."""
    options = ToolOptions(effect=effect, timeout=timeout, idempotent=idempotent)

    def mark(function: _F) -> _F:
        if not callable(function):
            raise ToolDefinitionError(f"@tool marks a function, not {type(function).__name__}")
        try:
            setattr(function, _OPTIONS_ATTR, options)
        except (AttributeError, TypeError) as exc:  # a builtin, or a callable with __slots__
            raise ToolDefinitionError(
                f"@tool cannot mark {function!r}: it takes no attributes; pass its options "
                "to Executor(options={name: ToolOptions(...)}) instead"
            ) from exc
        return function

    return mark if fn is None else mark(fn)


def options_of(
    specs: Mapping[str, ToolSpec], options: object, where: str = ""
) -> dict[str, ToolOptions | None]:
    """Each tool's ToolOptions: given in `options` by name, else marked by `@tool`, else None.

    `options` must map names of `specs` to ToolOptions; anything else raises
    ToolDefinitionError, its message prefixed with `where` (who was given the options).
    A mark that is not a ToolOptions counts as none, so a caller falls back to its default.
    """
    if options is not None and not isinstance(options, Mapping):
        raise ToolDefinitionError(
            f"{where}options must map tool names to ToolOptions, not {type(options).__name__}"
        )
    given = read(f"{where}options", ToolDefinitionError, lambda: dict(options or {}))
    unknown = [name for name in given if name not in specs]
    if unknown:
        raise ToolDefinitionError(f"{where}options for undeclared tool(s) {unknown}")
    for name, option in given.items():
        if not isinstance(option, ToolOptions):
            raise ToolDefinitionError(f"{where}options[{name!r}] must be a ToolOptions")
    found: dict[str, ToolOptions | None] = {}
    for name, spec in specs.items():
        marked = getattr(spec.fn, _OPTIONS_ATTR, None)
        found[name] = given.get(name) or (marked if isinstance(marked, ToolOptions) else None)
    return found


class Executor:
    """Run the calls of EXECUTE_TOOLS (or HANDOFF) decisions with Python tools.

    Args:
        tools: Python callables (or ToolSpecs with `fn`), a list or a mapping by name.
        max_concurrency: Calls of one batch running at the same time (default 10).
        parallel_tool_calls: False runs the calls of a batch one after another.
        timeout: Default seconds per call; None waits as long as the tool takes.
        max_result_chars: Results longer than this (as text) are cut with a marker.
        retry_attempts: Attempts of an idempotent tool before its error is the result.
        options: ToolOptions by tool name; they override options set with `@tool`.
    """

    @at_call
    def __init__(
        self,
        tools: Iterable[Any] | Mapping[str, Any] | None,
        *,
        max_concurrency: int = 10,
        parallel_tool_calls: bool = True,
        timeout: float | None = None,
        max_result_chars: int | None = 50_000,
        retry_attempts: int = 3,
        options: Mapping[str, ToolOptions] | None = None,
    ) -> None:
        _check_int("max_concurrency", max_concurrency, 1)
        _check_int("retry_attempts", retry_attempts, 1)
        if max_result_chars is not None:
            _check_int("max_result_chars", max_result_chars, 1)
        self.specs: dict[str, ToolSpec] = _specs(tools)
        self.max_concurrency = max_concurrency if parallel_tool_calls else 1
        self.parallel_tool_calls = parallel_tool_calls
        self.max_result_chars = max_result_chars
        self.retry_attempts = retry_attempts
        default = ToolOptions(timeout=timeout)  # checks the timeout
        self.options: dict[str, ToolOptions] = {}
        for name, declared in options_of(self.specs, options).items():
            found = declared or default
            if found.timeout is None and default.timeout is not None:
                found = ToolOptions(found.effect, default.timeout, found.idempotent)
            self.options[name] = found
        self._default = default

    # -- planning --------------------------------------------------------------------

    def _plan(
        self, calls: Decision | Sequence[ToolCall], controller: Clearing | None = None
    ) -> list[Job]:
        if isinstance(calls, Decision):
            if calls.action not in (Action.EXECUTE_TOOLS, Action.HANDOFF):
                raise InvalidInputError(
                    f"the executor runs EXECUTE_TOOLS or HANDOFF decisions, not {calls.action}"
                )
            calls = calls.tool_calls
        jobs: list[Job] = []
        seen: set[str] = set()
        for index, call in enumerate(calls):
            if not isinstance(call, ToolCall):
                raise InvalidInputError(f"call #{index} is a {type(call).__name__}, not a ToolCall")
            if call.id in seen:
                raise InvalidInputError(f"call id {call.id!r} appears twice in one batch")
            seen.add(call.id)
            spec = self.specs.get(call.name)
            fn = None if spec is None else spec.fn
            if controller is not None:
                if not _cleared(controller, call):
                    continue  # not run, no result: the controller answers it
                fn = None if fn is None else _asking(controller, call, fn)
            options = self.options.get(call.name, self._default)
            jobs.append(Job(len(jobs), call, fn, options))
        order(jobs, self.parallel_tool_calls)
        return jobs

    # -- the sync path ---------------------------------------------------------------

    @at_call
    def run(
        self,
        calls: Decision | Sequence[ToolCall],
        *,
        cancel: Flag | None = None,
        skip: Flag | None = None,
        on_result: Callable[[ToolResult], None] | None = None,
        controller: Clearing | None = None,
    ) -> list[ToolResult]:
        """Run a batch in worker threads; return one result per call, in call order.

        Args:
            calls: The decision, or its calls.
            controller: The Controller that made the decision: a call runs only when its
                `may_run(id, name, arguments)` is True and its `claim(...)` right before it
                starts is the first; the others get no result here (the controller has or
                makes theirs, or the attempt that claimed the call gives it).
            cancel: When set, running calls are abandoned and the rest are not started.
            skip: When set, calls not yet started are skipped; running ones finish.
            on_result: Called (in this thread) with each result as soon as it is known.
        """
        jobs = self._plan(calls, _clearing(controller))
        batch = SyncBatch(self, jobs, cancel, skip, on_result)
        batch.drive()
        return [job.result for job in jobs if job.result is not None]

    def _call(self, job: Job) -> Any:
        """Call the tool (retrying an idempotent one); a coroutine is run to its end here."""
        fn = job.fn
        assert fn is not None
        args = job.call.arguments or {}

        def once() -> Any:
            # Each attempt gets its own copy: a tool that edits its arguments edits only it.
            value = fn(**copied(args))
            if inspect.isawaitable(value):
                value = asyncio.run(awaited(value))
            return value

        if not job.options.idempotent or self.retry_attempts == 1:
            return once()
        return Retrying(**self._retry_args())(once)

    def _retry_args(self) -> dict[str, Any]:
        return {
            "stop": stop_after_attempt(self.retry_attempts),
            # A call the controller did not let start is not tried again.
            "retry": retry_if_not_exception_type((NotClearedError, StartedElsewhereError)),
            "wait": wait_exponential(multiplier=0.05, max=1.0),
            "reraise": True,
        }

    # -- the async path --------------------------------------------------------------

    @at_call
    async def arun(
        self,
        calls: Decision | Sequence[ToolCall],
        *,
        cancel: Flag | None = None,
        skip: Flag | None = None,
        on_result: Callable[[ToolResult], None] | None = None,
        controller: Clearing | None = None,
    ) -> list[ToolResult]:
        """Run a batch on the event loop (sync tools in worker threads); results in call order.

        Like `run`. When the task awaiting `arun` is itself cancelled, the running
        calls are cancelled and CancelledError propagates; `on_result` has seen
        every result that was known by then.
        """
        jobs = self._plan(calls, _clearing(controller))
        batch = AsyncBatch(self, jobs, cancel, skip, on_result)
        await batch.drive()
        return [job.result for job in jobs if job.result is not None]

    async def _acall(self, job: Job) -> Any:
        fn = job.fn
        assert fn is not None
        args = job.call.arguments or {}

        async def once() -> Any:
            mine = copied(args)  # see `_call`: the tool's own copy
            if inspect.iscoroutinefunction(fn):
                return await fn(**mine)
            value = await in_thread(lambda: fn(**mine))
            if inspect.isawaitable(value):
                value = await value
            return value

        if not job.options.idempotent or self.retry_attempts == 1:
            return await once()
        return await AsyncRetrying(**self._retry_args())(once)

    # -- results ---------------------------------------------------------------------

    def result_of(self, call: ToolCall, value: Any) -> ToolResult:
        """Make the result of a call that returned `value`: checked, serialisable, size-capped."""
        return result_of(call, value, self.max_result_chars)

    @staticmethod
    def error_of(call: ToolCall, text: str) -> ToolResult:
        """An error result for `call`."""
        return ToolResult(call_id=call.id, name=call.name, content=text, is_error=True)

    def timed_out(self, call: ToolCall) -> ToolResult:
        """The error result of a call that ran past its timeout."""
        limit = self.options.get(call.name, self._default).timeout or 0.0
        return self.error_of(
            call, f"TimeoutError: tool {call.name!r} did not finish within {limit:g}s"
        )

    def failed(self, call: ToolCall, exc: BaseException) -> ToolResult | None:
        """The error result of a call that raised `exc`, cut at `max_result_chars`; never raises.

        None for a call another attempt had already started: that attempt answers it.
        """
        if isinstance(exc, StartedElsewhereError):
            return None
        if isinstance(exc, TimedOutError):
            return self.timed_out(call)
        if isinstance(exc, asyncio.CancelledError):
            return self.cancelled(call, started=True)
        return self.error_of(call, _sendable(_cut(describe(exc), self.max_result_chars)))

    def after_timeout(self, call: ToolCall, late: ToolCall) -> ToolResult:
        """The error result of a call not started because `late`, ordered before it, timed out."""
        return self.error_of(
            call,
            f"not run: call {late.id!r} ({late.name!r}), which this call waits for, timed out "
            "and may still be running; call it again once that one has had time to end",
        )

    @staticmethod
    def cancelled(call: ToolCall, *, started: bool) -> ToolResult:
        """The error result of a call the run's cancellation stopped or never started."""
        text = (
            f"CancelledError: tool {call.name!r} was cancelled: the run was interrupted"
            if started
            else f"cancelled: {call.name!r} was not started: the run was interrupted"
        )
        return Executor.error_of(call, text)

    @staticmethod
    def skipped(call: ToolCall) -> ToolResult:
        """The result of a call a user message skipped before it started."""
        return Executor.error_of(call, SKIPPED)

    def no_tool(self, call: ToolCall) -> ToolResult:
        """The error result of a call to a tool with no Python implementation."""
        known = ", ".join(sorted(n for n, s in self.specs.items() if s.fn)) or "none"
        return self.error_of(
            call, f"tool {call.name!r} has no Python implementation here; tools that run: {known}"
        )


class Clearing(Protocol):
    """What the executor asks before each call: a Controller's `may_run` and `claim`."""

    def may_run(
        self, call_id: str, name: str | None = None, arguments: Mapping[str, Any] | None = None
    ) -> bool: ...

    def claim(
        self, call_id: str, name: str | None = None, arguments: Mapping[str, Any] | None = None
    ) -> bool: ...


class NotClearedError(Exception):
    """The controller stopped clearing a call between the batch's start and the call's."""


class StartedElsewhereError(Exception):
    """Another attempt at the same decision claimed the call first: it runs and answers it."""


def _clearing(controller: object) -> Clearing | None:
    if controller is not None and not all(
        callable(getattr(controller, method, None)) for method in ("may_run", "claim")
    ):
        raise InvalidInputError(
            f"controller must be the agentfsm Controller (it has may_run and claim), not "
            f"{type(controller).__name__}"
        )
    return controller  # type: ignore[return-value]


def _cleared(controller: Clearing, call: ToolCall) -> bool:
    # `is True`: an answer that is not a bool never lets a call run.
    return controller.may_run(call.id, call.name, call.arguments or {}) is True


class _Gate:
    """Right before a call starts: the controller's claim, or on a retry its `may_run` again."""

    def __init__(self, controller: Clearing, call: ToolCall) -> None:
        self.controller = controller
        self.call = call
        self.claimed = False  # the attempts of one job run one after another

    def __call__(self) -> None:
        call = self.call
        if self.claimed:
            if _cleared(self.controller, call):
                return
        elif self.controller.claim(call.id, call.name, call.arguments or {}) is True:
            self.claimed = True
            return
        elif _cleared(self.controller, call):
            raise StartedElsewhereError(f"call {call.id} was started by another attempt")
        raise NotClearedError(f"not executed: the controller no longer clears call {call.id}")


_RUNNING: ContextVar[tuple[Clearing, ToolCall] | None] = ContextVar(
    "agentfsm_running_call", default=None
)


def running_call() -> tuple[Clearing, ToolCall] | None:
    """The controller and the call whose tool runs in this context, once the controller
    cleared and claimed it; None outside a tool run by an executor given `controller=`.

    A tool that forwards the call elsewhere (an MCP server) asks the controller again by
    this call's id right before it sends, and sends nothing without it.
    """
    return _RUNNING.get()


def _asking(controller: Clearing, call: ToolCall, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` claiming the call from the controller right before it runs: a run stopped
    meanwhile starts nothing more, and a call another attempt started does not run again."""
    gate = _Gate(controller, call)

    if inspect.iscoroutinefunction(fn):

        async def checked_async(**arguments: Any) -> Any:
            gate()
            token = _RUNNING.set((controller, call))
            try:
                return await fn(**arguments)
            finally:
                _RUNNING.reset(token)

        return checked_async

    def checked(**arguments: Any) -> Any:
        gate()
        token = _RUNNING.set((controller, call))
        try:
            return fn(**arguments)
        finally:
            _RUNNING.reset(token)

    return checked


def _specs(tools: Iterable[Any] | Mapping[str, Any] | None) -> dict[str, ToolSpec]:
    if tools is None:
        return {}
    if isinstance(tools, Mapping):
        specs: dict[str, ToolSpec] = {}
        for name, fn in tools.items():
            spec = ToolSpec.from_declaration(fn)
            specs[name] = spec if spec.name == name else replaced(spec, {"name": name})
        return specs
    if isinstance(tools, str):
        raise ToolDefinitionError("tools must be a list of tools, not a string")
    return tool_specs(tools) or {}


def _check_int(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise DefinitionError(f"Executor({name}={value!r}): an int >= {low}")


def result_of(call: ToolCall, value: Any, max_chars: int | None = None) -> ToolResult:
    """The result of `call`, which returned `value`, as the model will read it; never raises.

    A value JSON cannot hold (a set, NaN, an object, a cycle, thousands of levels,
    an int past Python's int-to-text limit) or nested deeper than the controller
    accepts is the call's error result, naming the tool; text past `max_chars` is
    cut, with a marker giving the original size. Lone surrogates are escaped. Nothing
    (None, blank text, `[]`, `{}`) is `EMPTY_RESULT`, so the model sees it was empty.
    """
    try:
        if is_empty(value):
            return ToolResult(call_id=call.id, name=call.name, content=EMPTY_RESULT)
        return _rendered(call, value, max_chars)
    except Exception as exc:  # a value whose own methods fail as it is rendered
        return Executor.error_of(
            call,
            _cut(
                f"ToolOutputError: tool {call.name!r} returned a value that cannot be "
                f"rendered ({describe(exc)})",
                max_chars,
            ),
        )


def _rendered(call: ToolCall, value: Any, max_chars: int | None) -> ToolResult:
    if isinstance(value, str):
        text = value
    elif _plain(value):
        return ToolResult(call_id=call.id, name=call.name, content=value)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            return Executor.error_of(
                call,
                f"ToolOutputError: tool {call.name!r} returned a {type(value).__name__}, "
                f"which cannot be serialised to JSON ({_cut(describe(exc), 500)})",
            )
        if nesting_exceeds(value, MAX_DEPTH):  # the controller refuses such a result
            return Executor.error_of(
                call,
                f"ToolOutputError: tool {call.name!r} returned a {type(value).__name__} "
                f"nested deeper than {MAX_DEPTH} levels",
            )
    if not _utf8(text):
        text = value = _sendable(text)
    if max_chars is not None and len(text) > max_chars:
        return ToolResult(call_id=call.id, name=call.name, content=_cut(text, max_chars))
    return ToolResult(call_id=call.id, name=call.name, content=value)


def describe(exc: BaseException) -> str:
    """`Type: message` for an exception, or `Type` when it has no message; never raises.

    An exception's `__str__` is the tool author's code: one that raises (or
    returns something other than text) leaves the message out and says so.
    """
    # BaseException, even SystemExit from a __str__: the call must still get its result, and
    # on the sync path an exception escaping here would kill the worker and hang the batch.
    try:
        name = str(type(exc).__name__)
    except BaseException:
        name = "Exception"
    try:
        message = str(exc)
        return f"{name}: {message}" if message else name
    except BaseException as err:
        return f"{name} (its message cannot be shown: str() raised {type(err).__name__})"


def _cut(text: str, max_chars: int | None) -> str:
    """`text`, or its first `max_chars` characters with a marker giving the original size."""
    if max_chars is None or len(text) <= max_chars:
        return text
    return (
        f"{text[:max_chars]}\n[... cut: the result was {len(text):,} characters; "
        f"the first {max_chars:,} are shown]"
    )


def _int_fits(value: int) -> bool:
    """Whether `str(value)` works: Python refuses ints past `sys.get_int_max_str_digits()`."""
    limit = sys.get_int_max_str_digits()
    # bit_length * log10(2) bounds the digits from above; only near the limit is str() tried.
    if not limit or value.bit_length() * 0.30103 < limit - 1:
        return True
    try:
        str(value)
    except ValueError:
        return False
    return True


def _sendable(text: str) -> str:
    """`text` with each lone surrogate written as `\\udXXX`: a provider's HTTP client cannot
    encode one (half an emoji, a non-UTF-8 file name), and the run would end on it."""
    if _utf8(text):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _plain(value: object) -> bool:
    """None, a bool, a finite float or an int that has a text form: kept as it is."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, int) and _int_fits(value)
