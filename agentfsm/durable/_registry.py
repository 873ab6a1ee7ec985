"""Durable agents by name: what every process that runs or recovers a run must declare.

A workflow's input names its agent; the agent (model, tools, policy) is code,
declared again in each process before `launch`. The application version DBOS
records with each run is derived from these declarations and agentfsm's state
format, so a process whose agents differ never silently replays another's runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentfsm._engine.events import SCHEMA
from agentfsm._engine.persistence import STATE_VERSION, policy_code
from agentfsm._engine.policy import Policy, as_policy, as_shadow
from agentfsm._model._checked import check_number
from agentfsm._model._errors import at_call
from agentfsm._model.tools import ToolSpec, tool_specs
from agentfsm._runner.executor import ToolOptions, options_of
from agentfsm.durable._data import check_text
from agentfsm.exceptions import DefinitionError, InvalidInputError

__all__ = ["DEFAULT_MAX_TOKENS", "DurableAgent", "Progress", "agent_named", "app_version"]

DEFAULT_MAX_TOKENS = 4096
"""The max_tokens a retry after a cut output doubles when the output reported no usage."""

Progress = Callable[[str, str, Mapping[str, Any]], None]
"""Called with (kind, run id, details) after each model and tool step and before waiting
for a human; kinds are `model`, `tool` and `ask_human`. It runs again when a recovered run
replays its recorded steps."""

_AGENTS: dict[str, DurableAgent] = {}


class DurableAgent:
    """A model, its tools and a policy, run as a DBOS workflow under a stable name.

    Args:
        name: The agent's name; runs record it, and recovery finds the agent by it.
        model: The litellm model name (e.g. `"openai/gpt-4o-mini"`).
        tools: Python callables (run as steps), names or function specs. A tool marked
            `@tool(idempotent=True)` (agentfsm._runner.executor) may run again when a run is
            recovered; any other tool runs at most once (see `agentfsm.durable`).
        policy: The policy every run of this agent follows.
        api_base: The provider's base URL, when not the default.
        api_key: The provider key; it is never written to the database.
        human_timeout: Seconds to wait for a human before declining; None waits forever.
        on_progress: Called after every step (see `Progress`).
        options: ToolOptions by tool name, for tools that cannot carry `@tool` (builtins);
            they override the mark. Only `idempotent` matters here.
        shadow: A candidate policy judged beside `policy` on every call and recorded in the
            run's decisions and events, never enforced (docs/shadow.md).
    """

    @at_call
    def __init__(
        self,
        name: str,
        model: str,
        *,
        tools: Iterable[Any] | None = None,
        policy: Policy | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        human_timeout: float | None = None,
        on_progress: Progress | None = None,
        options: Mapping[str, ToolOptions] | None = None,
        shadow: Policy | Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise DefinitionError(f"a durable agent needs a name (a non-empty str), not {name!r}")
        # Every run records the name: text the database cannot encode fails here, not there.
        check_text(name, "DurableAgent", "name", DefinitionError)
        if not isinstance(model, str) or not model:
            raise DefinitionError(f"durable agent {name!r}: model must be a litellm model name")
        for field, value in (("api_base", api_base), ("api_key", api_key)):
            if value is not None and not isinstance(value, str):
                raise DefinitionError(f"durable agent {name!r}: {field} must be a str or None")
        if human_timeout is not None:
            where = f"durable agent {name!r}"
            check_number(where, "human_timeout", human_timeout, minimum=0, error=DefinitionError)
        if on_progress is not None and not callable(on_progress):
            raise DefinitionError(f"durable agent {name!r}: on_progress must be callable")
        self.name = name
        self.model = model
        self.specs: dict[str, ToolSpec] | None = tool_specs(tools)
        self.once = _run_at_most_once(name, self.specs or {}, options)
        """The names of the tools that are not idempotent: recorded as started, never re-run."""
        self.policy = as_policy(policy, f"durable agent {name!r}: policy")
        # Recorded in every run's decisions, never enforced: not part of the fingerprint,
        # since it decides nothing a recovery must repeat.
        self.shadow = as_shadow(shadow, self.specs)
        self.api_base = api_base
        self.api_key = api_key
        self.human_timeout = human_timeout
        self.on_progress = on_progress

    def request_options(self) -> dict[str, Any]:
        """The model call's fixed options: model, tools, endpoint (the step adds messages)."""
        options: dict[str, Any] = {"model": self.model, "max_retries": 0}
        if self.specs:
            options["tools"] = [spec.to_openai() for spec in self.specs.values()]
        if self.api_base is not None:
            options["api_base"] = self.api_base
        if self.api_key is not None:
            options["api_key"] = self.api_key
        return options

    def progress(self, kind: str, run_id: str, details: Mapping[str, Any]) -> None:
        """Tell `on_progress`, if any."""
        if self.on_progress is not None:
            self.on_progress(kind, run_id, details)

    def fingerprint(self) -> dict[str, Any]:
        """What decides this agent's runs, as data: model, tools, policy and its code parts."""
        specs = self.specs or {}
        return {
            "model": self.model,
            "tools": None
            if self.specs is None
            else [
                [s.name, s.parameters, s.fn is not None, s.name in self.once]
                for s in specs.values()
            ],
            "policy": self.policy.to_json(),
            "code": policy_code(self.policy),
        }


def _run_at_most_once(
    agent: str, specs: Mapping[str, ToolSpec], options: Mapping[str, ToolOptions] | None
) -> frozenset[str]:
    """The tools of `specs` that are not declared idempotent (by `options` or `@tool`)."""
    declared = options_of(specs, options, where=f"durable agent {agent!r}: ")
    once: set[str] = set()
    for name, spec in specs.items():
        option = declared[name]
        # Anything but a ToolOptions saying idempotent runs at most once: fail closed.
        if spec.fn is not None and not (option is not None and option.idempotent):
            once.add(name)
    return frozenset(once)


def register(agents: Iterable[DurableAgent]) -> list[DurableAgent]:
    """Declare `agents` in this process; a name declared twice is an error."""
    listed = _agent_list(agents)
    names = [a.name for a in listed]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise DefinitionError(f"durable agents {twice} are declared twice")
    _AGENTS.clear()
    _AGENTS.update((a.name, a) for a in listed)
    return listed


def _agent_list(agents: object) -> list[DurableAgent]:
    """`agents` as a list, each checked to be a DurableAgent."""
    if isinstance(agents, str | bytes | Mapping) or not isinstance(agents, Iterable):
        raise DefinitionError(f"agents must be a list of DurableAgent, not {type(agents).__name__}")
    listed = list(agents)
    for index, agent in enumerate(listed):
        if not isinstance(agent, DurableAgent):
            raise DefinitionError(
                f"agents[{index}] must be a DurableAgent, not {type(agent).__name__}"
            )
    return listed


def agent_named(name: str) -> DurableAgent:
    """The agent declared under `name` in this process."""
    agent = _AGENTS.get(name)
    if agent is None:
        known = ", ".join(sorted(_AGENTS)) or "none"
        raise InvalidInputError(
            f"no durable agent named {name!r} is declared in this process (declared: {known}); "
            "pass it to agentfsm.durable.launch(agents=[...])"
        )
    return agent


WORKFLOW_VERSION = 4
"""The order of the workflow's steps; a recorded run replays only under the same order.
2: a clock step before every input, for `max_seconds`. 3: a `started` step before the
tools of a batch that run at most once, and JSON in the database instead of pickle.
4: a human's reply names the question it answers (its id), not the turn."""


def app_version(agents: Iterable[DurableAgent]) -> str:
    """The DBOS application version: agentfsm's state format and a digest of the agents."""
    described = {a.name: a.fingerprint() for a in _agent_list(agents)}
    text = json.dumps(described, sort_keys=True, default=_plain)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"agentfsm-s{STATE_VERSION}-e{SCHEMA}-w{WORKFLOW_VERSION}-{digest}"


def _plain(value: Any) -> Any:
    # Sets are sorted: their order changes between processes (string hashing is salted).
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return repr(value)
