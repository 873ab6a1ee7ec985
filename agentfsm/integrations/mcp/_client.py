"""MCP servers' tools as governed agentfsm tools: `af.run`, `af.arun` and `af.Executor` run them.

```python
from mcp import StdioServerParameters
from agentfsm.integrations.mcp import MCPServerTools

with MCPServerTools(StdioServerParameters(command="notes-server")) as notes:
    result = af.run(model, messages, tools=notes.tools, policy=notes.policy(my_policy))
```

(`async with` works the same.) The connection lives on an event loop in a thread of its own,
so the tools serve sync and async runs alike. Rules, in the order a reviewer asks:

- Declarations: each tool of `tools/list` is a `ToolSpec` (its name, description and
  `inputSchema`): the controller checks arguments against that schema before anything runs.
- Names: the model is offered a name providers accept (`^[a-zA-Z0-9_-]{1,64}$`): the server's
  name when it fits, else that name with every other character replaced by `_`, and, when
  that is over 64 characters, its first 55 and `_` and 8 hex digits of the name's SHA-256;
  `names={server_name: offered}` chooses one. `tools/call` sends the server's exact name.
  Two tools offered under one name raise `DefinitionError` from `open()` (a tool listed
  later that would take a name already offered is left out, in `skipped`). A policy given
  to `policy(p)` may name a tool either way (both become the offered name); the hook, the
  Controller and the model see the offered name.
- The one permission check: a tool sends `tools/call` only from inside an executor given the
  run's Controller (`af.run`/`af.arun` always give it; `Executor.run(d, controller=ctl)`), and
  only when `ctl.may_run(call_id, name, arguments)` says yes right before the request is sent.
  Anything else (an executor without `controller=`, a direct call of `spec.fn`) sends nothing
  and is an error result.
- Results: text blocks joined; images, audio and resources described in a line each (a text
  resource's text is kept); the structured content is the result when the server sent no
  content block (the spec has servers send its JSON as text too); `isError: true` is an error
  result; a protocol error, a timeout or a dead server is an error result naming the tool,
  never a success; a result over `max_result_chars` is cut with a note giving its size.
- Hints: `policy(p)` is `p` with every tool whose annotations say it may change things (not
  `readOnlyHint`, not `destructiveHint: false`) in its `ask_floor`: such a call asks unless
  the tool's `permissions` entry is "allow" or allow rules written for exactly that tool
  allow the call; a deny or ask rule keeps the floor. Hints never loosen
  (`_hints.with_hints`).
- Pinning: each tool's description, input schema and annotations are pinned (a SHA-256 digest)
  when first listed. After `notifications/tools/list_changed` the next call lists the tools
  again before sending (`refresh()` does it at once); a call to a tool whose listing no longer
  matches its pin, or that was not in the first listing, is refused with an error result and
  sends nothing, until `approve(name)` pins the tool as it is now (`changed` names them).
  Approve only after reading the new description and schema (`listed(name)`); the next run
  built from `tools` offers the new declaration. `relist_each_call=True` lists before every
  call, for servers that change tools without notice.
- A host's own loop: `call(ctl, call)` / `acall` send one call its Controller clears (claimed
  by id), through the same executor path.
"""

from __future__ import annotations

import asyncio
import fnmatch
import functools
import hashlib
import json
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from contextlib import AsyncExitStack
from typing import Any, Self

from agentfsm._engine.ask_floor import floored
from agentfsm._engine.policy import Policy
from agentfsm._model.tools import ToolSpec
from agentfsm._model.types import ToolCall, ToolResult
from agentfsm._runner.executor import Executor, running_call
from agentfsm.exceptions import (
    AgentFSMError,
    DefinitionError,
    InvalidInputError,
    PolicyError,
    RunError,
)
from agentfsm.integrations.mcp._hints import changes_things, with_hints

__all__ = ["MCPNotSentError", "MCPServerError", "MCPServerTools", "MCPToolError"]


class MCPNotSentError(Exception):
    """The call was not sent to the MCP server: not cleared, or the tool changed."""


class MCPToolError(Exception):
    """The MCP server answered the call with `isError: true`."""


class MCPServerError(Exception):
    """The MCP server failed the call: a protocol error, a timeout, or it is gone."""


class MCPServerTools:
    """The tools of one MCP server, each call asking the run's Controller before it is sent.

    Args:
        server: `mcp.StdioServerParameters` (a process started and spoken to over stdio), or
            the URL (`http://...` / `https://...`) of a streamable HTTP server.
        timeout: Seconds one `tools/call` may take before it is an error result.
        connect_timeout: Seconds to start the server, initialize and list its tools.
        max_result_chars: Results longer than this (as text) are cut, with a note.
        relist_each_call: List the tools again before every call, not only after the
            server's `notifications/tools/list_changed` (a server that does not send it,
            or a 2026-07-28 session, where it is sent only to a `subscriptions/listen`).
        names: The name offered to the model for some of the server's tools (server name ->
            a name matching `^[a-zA-Z0-9_-]{1,64}$`): to part two tools, or two servers'
            tools, that would be offered under one name.
    """

    def __init__(
        self,
        server: Any,
        *,
        timeout: float = 60.0,
        connect_timeout: float = 30.0,
        max_result_chars: int = 50_000,
        relist_each_call: bool = False,
        names: Mapping[str, str] | None = None,
    ) -> None:
        self._server = _checked_server(server)
        self.timeout = _seconds("timeout", timeout)
        self.connect_timeout = _seconds("connect_timeout", connect_timeout)
        if isinstance(max_result_chars, bool) or not isinstance(max_result_chars, int):
            raise DefinitionError(f"MCPServerTools(max_result_chars={max_result_chars!r}): an int")
        if max_result_chars < 1:
            raise DefinitionError(f"MCPServerTools(max_result_chars={max_result_chars!r}): >= 1")
        self.max_result_chars = max_result_chars
        if not isinstance(relist_each_call, bool):
            raise DefinitionError(
                f"MCPServerTools(relist_each_call={relist_each_call!r}): True or False"
            )
        self.relist_each_call = relist_each_call
        self._renamed = _checked_names(names)
        self._opened = False
        self._pins: dict[str, str] = {}
        self._listed: dict[str, Any] = {}
        self._specs: dict[str, ToolSpec] = {}
        self._offered: dict[str, str] = {}  # the server's name -> the name the model sees
        self.skipped: dict[str, str] = {}
        """Tools left out, by the server's name: why their declaration could not be used."""
        self._lock = threading.Lock()
        self._link: _Link | None = None

    # -- opening and closing -------------------------------------------------------------

    def open(self) -> Self:
        """Start (or connect to) the server, initialize, list and pin its tools."""
        if self._link is not None:
            raise InvalidInputError("MCPServerTools is already open")
        link = _Link(self)
        try:
            link.start(self.connect_timeout)
        except BaseException:
            link.stop(self.connect_timeout)
            raise
        self._link = link
        self._opened = True
        return self

    def close(self) -> None:
        """Close the session (a stdio server process is ended)."""
        link, self._link = self._link, None
        if link is not None:
            link.stop(self.connect_timeout)

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, *_: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.open)

    async def __aexit__(self, *_: object) -> None:
        await asyncio.to_thread(self.close)

    # -- what a run is given -------------------------------------------------------------

    @property
    def tools(self) -> list[ToolSpec]:
        """The approved tools (their listing matches their pin), for `tools=` of a run."""
        self._listed_once()
        with self._lock:
            return [
                spec
                for name, spec in self._specs.items()
                if _digest(self._listed[name]) == self._pins.get(name)
            ]

    def policy(self, policy: Policy | None = None, *, only: Iterable[str] | None = None) -> Policy:
        """`policy` (default `Policy()`) with the tools' hints as an ask floor: a call of a
        tool that may change things asks unless an allow for exactly that tool allows it.

        `only` names the tools (as offered to the model) the run declares, when it declares
        some of them: a Controller refuses a floor naming a tool it is not given, since a
        misspelled floor would let the tool it meant run unasked.
        """
        if policy is None:
            policy = Policy()
        if not isinstance(policy, Policy):
            raise PolicyError(f"policy must be an agentfsm Policy, not {type(policy).__name__}")
        self._listed_once()
        with self._lock:
            offered = dict(self._offered)
            hints = {offered[name]: self._listed[name].annotations for name in offered}
        if only is not None:
            if isinstance(only, str):
                names: list[object] = [only]
            elif isinstance(only, Iterable):
                names = list(only)
            else:
                raise PolicyError(f"only must list tool names, not {type(only).__name__}")
            unknown = sorted(repr(n) for n in names if not isinstance(n, str) or n not in hints)
            if unknown:
                raise PolicyError(
                    f"only names tools this server does not offer: {', '.join(unknown)}"
                )
            hints = {name: hints[name] for name in names if isinstance(name, str)}
        return with_hints(_renamed_policy(policy, offered), hints)

    @property
    def names(self) -> dict[str, str]:
        """The tools offered, by the name the model sees: the server's name of each."""
        with self._lock:
            return {offered: name for name, offered in self._offered.items()}

    @property
    def changed(self) -> list[str]:
        """Tools (the server's names) whose listing differs from their pin, or that were not
        listed at first: their calls are refused until approved."""
        with self._lock:
            return sorted(n for n, t in self._listed.items() if _digest(t) != self._pins.get(n))

    def listed(self, name: str) -> dict[str, Any]:
        """The tool as the server lists it now: name, description, inputSchema, annotations
        (`name` is the server's name or the one offered to the model)."""
        with self._lock:
            name = self._server_name(name)
            tool = self._listed.get(name)
            if tool is None:
                raise InvalidInputError(f"the MCP server lists no tool {name!r}")
            return dict(_pinned(tool), name=name)

    def approve(self, name: str) -> None:
        """Pin the tool `name` (the server's name or the one offered to the model) as the
        server lists it now: its calls are sent again."""
        if not isinstance(name, str):
            raise InvalidInputError(f"approve: a tool name, not {type(name).__name__}")
        with self._lock:
            name = self._server_name(name)
            tool = self._listed.get(name)
            if tool is None:
                raise InvalidInputError(f"approve: the MCP server lists no tool {name!r}")
            if name not in self._specs:
                raise InvalidInputError(f"approve: {name!r} cannot be used: {self.skipped[name]}")
            self._pins[name] = _digest(tool)

    def refresh(self) -> list[str]:
        """List the tools again now; return the names refused until approved (`changed`)."""
        link = self._require()
        link.submit(self._relisted(link), self.connect_timeout)
        return self.changed

    def call(self, controller: Any, call: ToolCall) -> ToolResult | None:
        """Send one call of a host's loop when `controller` clears it (`claim` by its id);
        its result, or None when not cleared (the controller answers that call).

        For hosts that hold the Controller and run calls one by one; a whole decision goes
        to `af.Executor(tools).run(decision, controller=ctl)`, which does the same.
        """
        results = Executor(self.tools, max_result_chars=None).run([call], controller=controller)
        return results[0] if results else None

    async def acall(self, controller: Any, call: ToolCall) -> ToolResult | None:
        """`call`, awaited."""
        executor = Executor(self.tools, max_result_chars=None)
        results = await executor.arun([call], controller=controller)
        return results[0] if results else None

    # -- inside the connection's loop ----------------------------------------------------

    def _absorb(self, tools: list[Any], *, first: bool) -> None:
        """Take a complete listing: pin it when it is the first, build the declarations."""
        listed = {tool.name: tool for tool in tools}
        with self._lock:
            before = dict(self._offered)
        offered, skipped = _offered_names(list(listed), self._renamed, before, first=first)
        specs: dict[str, ToolSpec] = {}
        for name, model_name in offered.items():
            tool = listed[name]
            try:
                specs[name] = ToolSpec(
                    name=model_name,
                    description=tool.description or "",
                    parameters=dict(tool.input_schema),
                    fn=self._sender(name, model_name),
                )
            except AgentFSMError as exc:
                skipped[name] = str(exc)
        with self._lock:
            self.skipped = skipped
            self._listed = listed
            self._offered = {name: offered[name] for name in specs}
            self._specs = specs
            if first:
                self._pins = {name: _digest(self._listed[name]) for name in specs}

    async def _relisted(self, link: _Link) -> None:
        async with link.relisting:
            await self._relist()

    async def _relist(self) -> None:
        link = self._require()
        link.stale = False
        try:
            self._absorb(await link.list_all(), first=False)
        except BaseException:
            link.stale = True  # fail closed: the next call lists again, or is refused
            raise

    def _sender(self, name: str, model_name: str) -> Any:
        """The tool's function: asks the run's Controller (by the name the model called),
        then sends `tools/call` (by the server's name)."""

        async def send(**arguments: Any) -> Any:
            running = running_call()
            if running is None:
                raise MCPNotSentError(
                    f"tool {model_name!r} not sent: MCP tools run only through an agentfsm run "
                    "or an Executor given the run's Controller (controller=)"
                )
            controller, call = running
            if call.name != model_name:
                raise MCPNotSentError(
                    f"tool {model_name!r} not sent: the running call is {call.name!r}"
                )
            link = self._require()
            cleared = functools.partial(controller.may_run, call.id, model_name, arguments)
            asks = functools.partial(_asks_now, getattr(controller, "policy", None), call)
            future = link.submit_future(self._call(link, name, arguments, cleared, asks))
            try:
                return await asyncio.wrap_future(future)
            except asyncio.CancelledError:
                future.cancel()
                raise

        send.__name__ = model_name
        return send

    async def _call(
        self,
        link: _Link,
        server_name: str,
        arguments: dict[str, Any],
        cleared: Callable[[], bool],
        asks: Callable[[Any], bool],
    ) -> Any:
        name = self._label(server_name)
        if link.stale or self.relist_each_call:
            link.stale = True
            try:
                async with link.relisting:
                    if link.stale:
                        await self._relist()
            except Exception as exc:
                raise MCPNotSentError(
                    f"tool {name!r} not sent: the server's tools changed and could not be "
                    f"listed again ({_describe(exc)})"
                ) from exc
        with self._lock:
            tool = self._listed.get(server_name)
            pinned = tool is not None and _digest(tool) == self._pins.get(server_name)
        if tool is not None and not pinned:
            raise MCPNotSentError(
                f"tool {name} not sent: its description, schema or annotations changed "
                "since they were approved; a person must review it "
                f"(MCPServerTools.listed({server_name!r})) and approve it "
                f"(approve({server_name!r}))"
            )
        if tool is not None and asks(tool.annotations):
            raise MCPNotSentError(
                f"tool {name} not sent: its annotations now say it may change things and the "
                "run's policy allowed the call without asking; build the run's policy again "
                "with MCPServerTools.policy() so its calls ask"
            )
        # Asked last, right before sending: a run stopped meanwhile sends nothing.
        if cleared() is not True:
            raise MCPNotSentError(f"tool {name} not sent: the controller did not clear it")
        try:
            result = await asyncio.wait_for(
                link.session.call_tool(server_name, arguments), self.timeout
            )
        except TimeoutError as exc:
            raise MCPServerError(
                f"tool {name}: the MCP server did not answer within {self.timeout:g}s"
            ) from exc
        except Exception as exc:
            raise MCPServerError(f"tool {name}: the MCP call failed: {_describe(exc)}") from exc
        return self._result_of(name, result)

    def _result_of(self, name: str, result: Any) -> Any:
        content = getattr(result, "content", None)
        if not isinstance(content, list):
            raise MCPServerError(
                f"tool {name}: the MCP server answered with a {type(result).__name__}, "
                "not a tool result"
            )
        structured = getattr(result, "structured_content", None)
        parts = [_described(block) for block in content]
        text = "\n".join(part for part in parts if part)
        value: Any = text
        if not content and structured is not None:
            value = structured
            text = json.dumps(structured, ensure_ascii=False, default=str)
        if len(text) > self.max_result_chars:
            value = _cut(name, text, self.max_result_chars)
        if getattr(result, "is_error", False) is True:
            raise MCPToolError(f"tool {name} reported an error: {value or '(no message)'}")
        return value

    def _label(self, server_name: str) -> str:
        """The tool as messages name it: the name the model sees, and the server's if other."""
        with self._lock:
            offered = self._offered.get(server_name, server_name)
        if offered == server_name:
            return repr(server_name)
        return f"{offered!r} (the server's {server_name!r})"

    def _server_name(self, name: object) -> str:
        """The server's name of a tool named by it or by the name offered to the model."""
        if not isinstance(name, str):
            raise InvalidInputError(f"a tool name is a str, not {type(name).__name__}")
        if name in self._listed:
            return name
        for server_name, offered in self._offered.items():
            if offered == name:
                return server_name
        return name

    def _listed_once(self) -> None:
        if not self._opened:
            raise InvalidInputError("MCPServerTools has not listed the tools yet: open it first")

    def _require(self) -> _Link:
        link = self._link
        if link is None:
            raise InvalidInputError("MCPServerTools is not open: use `with` or open()")
        return link


class _Link:
    """The session with the server, on an event loop in a thread of its own.

    The `mcp` client's contexts must be entered and left by one task: `_serve` holds them
    open until `stop`; calls are tasks of the same loop (`submit`).
    """

    def __init__(self, owner: MCPServerTools) -> None:
        self.owner = owner
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="mcp")
        self.session: Any = None
        self.stale = False
        """Set when the server says its tools changed: the next call lists them first."""
        self.relisting = asyncio.Lock()  # bound to the loop that first uses it
        self._closing = asyncio.Event()
        self._served: Future[None] | None = None

    def start(self, timeout: float) -> None:
        self.thread.start()
        ready: Future[None] = Future()
        self._served = asyncio.run_coroutine_threadsafe(self._serve(ready), self.loop)
        try:
            ready.result(timeout)
        except TimeoutError as exc:
            raise RunError(f"the MCP server did not start within {timeout:g}s") from exc
        except AgentFSMError:
            raise
        except Exception as exc:
            raise RunError(f"the MCP server could not be started: {_describe(exc)}") from exc

    async def _serve(self, ready: Future[None]) -> None:
        from mcp import ClientSession

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=self._heard)
                )
                await session.initialize()
                self.session = session
                try:
                    self.owner._absorb(await self.list_all(), first=True)
                except AgentFSMError as exc:
                    # Raised as it is (inside the transport's task group it would come out
                    # wrapped in an ExceptionGroup); the session closes on the way out.
                    ready.set_exception(exc)
                    return
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    def _transport(self) -> Any:
        from mcp import StdioServerParameters, stdio_client

        server = self.owner._server
        if isinstance(server, StdioServerParameters):
            return stdio_client(server)
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(server)

    async def _heard(self, message: Any) -> None:
        from mcp import types

        if isinstance(message, types.ToolListChangedNotification):
            self.stale = True  # no I/O here: the handler runs inside the session's reader

    async def list_all(self) -> list[Any]:
        from mcp import types

        tools: list[Any] = []
        cursor: str | None = None
        for _page in range(1000):
            params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
            page = await self.session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools
        raise MCPServerError("the MCP server's tool listing did not end after 1000 pages")

    def submit_future(self, work: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(work, self.loop)

    def submit(self, work: Any, timeout: float) -> Any:
        try:
            return self.submit_future(work).result(timeout)
        except AgentFSMError:
            raise
        except Exception as exc:
            raise RunError(f"the MCP server failed: {_describe(exc)}") from exc

    def stop(self, timeout: float) -> None:
        self.loop.call_soon_threadsafe(self._closing.set)
        if self._served is not None:
            try:
                self._served.result(timeout)
            except BaseException:  # closing a session whose server is gone
                self._served.cancel()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout)
        if not self.thread.is_alive():
            self.loop.close()


def _checked_server(server: Any) -> Any:
    try:
        from mcp import StdioServerParameters
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise DefinitionError(
            "agentfsm.integrations.mcp needs the mcp package: pip install 'agentfsm[mcp]'"
        ) from exc
    if isinstance(server, StdioServerParameters):
        return server
    if isinstance(server, str) and server.startswith(("http://", "https://")):
        return server
    raise DefinitionError(
        "MCPServerTools(server=...): an mcp.StdioServerParameters or the http(s) URL of a "
        f"streamable HTTP server, not {type(server).__name__} {server!r:.60}"
    )


def _seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DefinitionError(f"MCPServerTools({name}={value!r}): a number of seconds")
    if not math.isfinite(value) or value <= 0:
        raise DefinitionError(f"MCPServerTools({name}={value!r}): a finite number > 0")
    return float(value)


_SAFE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _checked_names(names: object) -> dict[str, str]:
    if names is None:
        return {}
    if not isinstance(names, Mapping):
        raise DefinitionError(
            f"MCPServerTools(names=...): a mapping of the server's tool names to the names "
            f"offered to the model, not {type(names).__name__}"
        )
    checked: dict[str, str] = {}
    for name, offered in names.items():
        if not isinstance(name, str) or not isinstance(offered, str):
            raise DefinitionError(f"MCPServerTools(names=...): {name!r}: {offered!r}: two strs")
        if _SAFE_NAME.fullmatch(offered) is None:
            raise DefinitionError(
                f"MCPServerTools(names=...): {offered!r}, offered for {name!r}, must match "
                "^[a-zA-Z0-9_-]{1,64}$"
            )
        checked[name] = offered
    return checked


def _offered_name(name: str) -> str:
    """The name a tool called `name` by its server is offered to the model under (no
    `names=` given): `name` when providers accept it (`^[a-zA-Z0-9_-]{1,64}$`), else `name`
    with every other character replaced by `_`, and, over 64 characters, its first 55, `_`
    and the first 8 hex digits of the SHA-256 of `name` (UTF-8). "" for an empty name."""
    if _SAFE_NAME.fullmatch(name):
        return name
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", name)
    if len(safe) <= 64:
        return safe
    tag = hashlib.sha256(name.encode("utf-8", "backslashreplace")).hexdigest()[:8]
    return f"{safe[:55]}_{tag}"


def _offered_names(
    listed: list[str], renamed: Mapping[str, str], before: Mapping[str, str], *, first: bool
) -> tuple[dict[str, str], dict[str, str]]:
    """The name offered for each listed tool, and the tools left out (with why).

    Each tool takes its offered name and its server name (a policy may use either): a
    name two tools would take raises DefinitionError in the first listing. Later, a tool
    keeps the name it had, and one new to the listing that would take a taken name (or
    one another new tool would take) is left out.
    """
    skipped: dict[str, str] = {}
    wanted: dict[str, str] = {}
    for name in listed:
        if name:
            wanted[name] = renamed.get(name) or _offered_name(name)
        else:
            skipped[name] = "an empty tool name cannot be offered to a model"
    takers: dict[str, set[str]] = {}
    for name, model_name in wanted.items():
        takers.setdefault(model_name, set()).add(name)
        takers.setdefault(name, set()).add(name)
    clashes = sorted((word, sorted(names)) for word, names in takers.items() if len(names) > 1)
    if first and clashes:
        word, names = clashes[0]
        # A tool keeps its own server name (a policy may use it): the other one must move.
        movable = next(name for name in names if name != word)
        raise DefinitionError(
            f"MCP tools {' and '.join(repr(n) for n in names)} would both be called {word!r} "
            "(the name offered to the model, or the server's own name a policy may use); "
            f"offer one under another name: MCPServerTools(..., names={{{movable!r}: "
            "'other_name'})"
        )
    clashing = {name: word for word, names in clashes for name in names}
    offered: dict[str, str] = {}
    for name, offered_as in wanted.items():
        if name in clashing and before.get(name) != offered_as:
            skipped[name] = (
                f"listed after the first listing, it would be called {clashing[name]!r} "
                "as another tool is; offer it under another name (names=)"
            )
        else:
            offered[name] = offered_as
    return offered, skipped


def _renamed_policy(policy: Policy, offered: Mapping[str, str]) -> Policy:
    """`policy` naming each tool as the model sees it: a server's name in the permission
    table or as a rule's tool becomes the offered name (two entries for one tool: the
    stronger holds). A rule whose tool glob matches a server's name but not the name the
    model sees would never apply: PolicyError."""
    renamed = {name: to for name, to in offered.items() if name != to}
    if not renamed:
        return policy
    strength = {"allow": 0, "ask": 1, "deny": 2}
    table: dict[str, Any] = {}
    for key, verdict in policy.permissions.items():
        key = renamed.get(key, key)
        held = table.get(key)
        if held is None or strength.get(verdict, 3) > strength.get(held, 3):
            table[key] = verdict
    rules = []
    for rule in policy.permission_rules:
        if rule.tool in renamed:
            rule = rule.model_copy(update={"tool": renamed[rule.tool]})
        else:
            for name, to in renamed.items():
                if fnmatch.fnmatchcase(name, rule.tool) and not fnmatch.fnmatchcase(to, rule.tool):
                    raise PolicyError(
                        f"permission rule {str(rule)!r} matches the MCP tool {name!r}, which "
                        f"the model calls {to!r}: the rule would never apply; write it for {to!r}"
                    )
        rules.append(rule)
    fields = {name: getattr(policy, name) for name in type(policy).model_fields}
    floor = frozenset(renamed.get(name, name) for name in policy.ask_floor)
    changed = {"permissions": table, "permission_rules": tuple(rules), "ask_floor": floor}
    return type(policy)(**{**fields, **changed})


def _asks_now(policy: object, call: ToolCall, annotations: Any) -> bool:
    """Whether the run's `policy` allowed `call` outright where the tool's current
    `annotations` floor it to ask: a policy built before an approved change of them.

    A clearing that is not a Controller (a framework's own) shows no policy to read: its
    calls meet only the pin (a changed tool is refused until approved).
    """
    if not isinstance(policy, Policy) or policy.native_verdict(call)[0] != "allow":
        return False  # asked (a person said yes) or not cleared at all
    # A Cedar source is asked here without the run's history (which its own verdict read
    # when the call was cleared): only its sure "ask" (a person said yes) is taken.
    if policy.cedar is not None and policy.cedar.verdict(call)[0] == "ask":
        return False
    if not changes_things(annotations):
        return False
    rules, table = policy.permission_rules, policy.permissions
    return floored(("allow", "the policy"), call, rules, table)[0] != "allow"


def _pinned(tool: Any) -> dict[str, Any]:
    """What a pin covers: the tool's description, input schema and annotations."""
    annotations = getattr(tool, "annotations", None)
    return {
        "description": tool.description or "",
        "inputSchema": tool.input_schema,
        "annotations": None
        if annotations is None
        else annotations.model_dump(mode="json", by_alias=True, exclude_none=True),
    }


def _digest(tool: Any) -> str:
    text = json.dumps(_pinned(tool), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()


def _cut(name: str, text: str, limit: int) -> str:
    """`text` cut so that it and the note saying so fit in `limit` characters (an
    executor's own cap of the same size then leaves the note in place)."""
    note = (
        f"[... cut: the MCP tool {name} returned {len(text):,} characters; "
        "the first {} are shown]"
    )
    keep = max(0, limit - len(note) - 12)
    return f"{text[:keep]}\n{note.format(f'{keep:,}')}"


def _described(block: Any) -> str:
    """One content block as the model reads it: text as it is, anything else described."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        size = len(getattr(block, "data", "") or "") * 3 // 4
        return f"[{kind}: {block.mime_type}, about {size:,} bytes, not shown]"
    if kind == "resource":
        resource = block.resource
        mime = getattr(resource, "mime_type", None) or "unknown type"
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"[resource {resource.uri} ({mime})]\n{text}"
        size = len(getattr(resource, "blob", "") or "") * 3 // 4
        return f"[resource {resource.uri}: {mime}, about {size:,} bytes, not shown]"
    if kind == "resource_link":
        name = getattr(block, "name", "") or ""
        return f"[resource link {block.uri}{f' ({name})' if name else ''}]"
    return f"[{kind or type(block).__name__} content, not shown]"


def _describe(exc: BaseException) -> str:
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
