"""The arguments of one `run` or `arun`, checked once, in one object both loops read.

`run` and `arun` keep their keyword arguments spelled out (they are the public
signature, with its defaults and docs); each hands them to `RunOptions.checked`
first, so a wrong argument raises the same DefinitionError from either before a
model is called.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentfsm._model._checked import check_number, read
from agentfsm._model.ledger import Left
from agentfsm._model.types import Decision
from agentfsm._runner._json_values import unsendable
from agentfsm._runner.agents import Agent
from agentfsm._runner.executor import Executor
from agentfsm._runner.retry import ProviderRetry
from agentfsm._runner.session import Inbox
from agentfsm.exceptions import DataError, DefinitionError

__all__ = ["PROVIDER_TIMEOUT", "Flag", "OnAsk", "RunOptions", "ShowBudget"]

OnAsk = Callable[[Decision], "tuple[bool, str | None] | Awaitable[tuple[bool, str | None]]"]
"""Answers an ASK_HUMAN decision with `(approved, message)`, or `(approved, message, remember)`
to remember the approval for a scope (docs/approvals.md); `arun` also awaits a coroutine."""

ShowBudget = bool | Callable[[Left], "str | Mapping[str, Any] | None"]
"""Whether (True) or how (a function of what is left) a run shows the model its budget."""

PROVIDER_TIMEOUT = 120.0
"""Seconds one provider call may take by default, per attempt: a hung provider ends in a
retried timeout, not in litellm's 6,000 s wait."""


_PROVIDER = ("tool_choice", "parallel_tool_calls", "api_base", "api_key")
"""The fields that are litellm arguments, passed as given."""


class Flag(Protocol):
    def is_set(self) -> bool: ...


Observer = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Every argument of one run, checked; see `agentfsm.run` for what each means."""

    model: str
    messages: Sequence[Mapping[str, Any]]
    """The conversation so far (a str given as `messages` is the user's one message)."""
    tools: Sequence[Any] | None
    policy: Any
    shadow: Any
    """A candidate policy recorded beside `policy`, never enforced (None: no shadow)."""
    tool_choice: str | Mapping[str, Any] | None
    parallel_tool_calls: bool | None
    api_base: str | None
    api_key: str | None
    stream: bool
    max_tokens: int | None
    observers: Sequence[Observer]
    trace: str | os.PathLike[str] | None
    retry: ProviderRetry | None
    on_ask: OnAsk | None
    timeout: float | None
    executor: Executor | None
    cancel: Flag | None
    inbox: Inbox | None
    agents: Mapping[str, Agent] | None
    show_budget: ShowBudget
    """Show the model what is left before each call (see `agentfsm.run`)."""
    completion_kwargs: Mapping[str, Any]

    @classmethod
    def checked(
        cls, model: str, messages: str | Sequence[Mapping[str, Any]], **given: Any
    ) -> RunOptions:
        """Check every argument: one of the wrong kind raises DefinitionError naming it."""
        if not isinstance(model, str) or not model:
            raise DefinitionError(f"model must be a litellm model name, not {model!r}")
        options = cls(model=model, messages=_conversation(messages), **given)
        options._check()
        return options

    def _check(self) -> None:
        if self.timeout is not None:
            check_number("run", "timeout", self.timeout, minimum=0, error=DefinitionError)
        if self.max_tokens is not None:
            check_number(
                "run", "max_tokens", self.max_tokens, minimum=1, integer=True, error=DefinitionError
            )
        if self.observers is None:
            raise DefinitionError("observers must be a list of callables, not None")
        checks: tuple[tuple[str, object, Callable[[Any], bool], str], ...] = (
            ("observers", self.observers, _is_list, "a list of callables"),
            # Passed to litellm as given, but of its kind: a wrong one fails here, not as a
            # provider error after the first request.
            ("tool_choice", self.tool_choice, _is_choice, "a str or mapping"),
            ("parallel_tool_calls", self.parallel_tool_calls, _is_bool, "True or False"),
            ("api_base", self.api_base, lambda v: isinstance(v, str), "a URL (str)"),
            ("api_key", self.api_key, lambda v: isinstance(v, str), "a str"),
            ("trace", self.trace, lambda v: isinstance(v, str | os.PathLike), "a file path"),
            ("retry", self.retry, lambda v: isinstance(v, ProviderRetry), "a ProviderRetry"),
            ("on_ask", self.on_ask, callable, "a function of the decision"),
            ("stream", self.stream, _is_bool, "True or False"),
            ("executor", self.executor, lambda v: isinstance(v, Executor), "an Executor"),
            ("cancel", self.cancel, lambda v: callable(getattr(v, "is_set", None)), "an Event"),
            ("inbox", self.inbox, lambda v: isinstance(v, Inbox), "an Inbox"),
            ("agents", self.agents, _is_agents, "a mapping of tool names to Agents"),
            (
                "show_budget",
                self.show_budget,
                _is_show,
                "True, False or a function of what is left",
            ),
        )
        for name, value, good, expected in checks:
            if value is not None and not good(value):
                raise DefinitionError(f"{name} must be {expected} or None, not {value!r:.80}")

    def request(self) -> dict[str, Any]:
        """The provider settings every model request of the run carries."""
        options = {k: v for k, v in self._provider().items() if v is not None}
        # tenacity owns the retries: the SDK underneath must not retry on its own.
        options["max_retries"] = 0
        if self.stream:
            options["stream"] = True
            options["stream_options"] = {"include_usage": True}
        options.update(self.completion_kwargs)
        if self.timeout is not None:
            options["timeout"] = self.timeout
        return options

    def _provider(self) -> dict[str, Any]:
        """The provider settings a run passes to litellm and on to its sub-agents."""
        return {name: getattr(self, name) for name in _PROVIDER}

    def child(self, agent: Agent) -> tuple[str, dict[str, Any]]:
        """The model and the keyword arguments of a sub-agent's run.

        It shares the provider settings, the retries, `on_ask` and the cancellation;
        the agent's own options and model win. It goes through `run` (or `arun`)
        like any run, so the agent's options are checked there.
        """
        options: dict[str, Any] = {
            **self._provider(),
            "stream": self.stream,
            "retry": self.retry,
            "on_ask": self.on_ask,
            "show_budget": self.show_budget,
            **self.completion_kwargs,
            **agent.options,
        }
        model = agent.model or options.pop("model", self.model)
        options.pop("model", None)  # when the agent's own model won
        options.update(tools=agent.tools, policy=agent.policy, cancel=self.cancel)
        return model, options


def _conversation(messages: object) -> Sequence[Mapping[str, Any]]:
    conversation: Any = (
        [{"role": "user", "content": messages}] if isinstance(messages, str) else messages
    )
    if not isinstance(conversation, Sequence) or not all(
        isinstance(m, Mapping) for m in conversation
    ):
        raise DefinitionError(
            "messages must be a str or a list of OpenAI chat messages ({'role', 'content'}), "
            f"not {type(messages).__name__}"
        )
    # Read once here, as the run will: a message that cannot be read, or whose keys are not
    # names, fails now rather than after the first model call.
    copies = read("messages", DefinitionError, lambda: [dict(m) for m in conversation])
    for index, message in enumerate(copies):
        if not all(type(key) is str for key in message):
            raise DefinitionError(f"messages[{index}] must have str keys ('role', 'content')")
    # The messages go to the provider as JSON: a value no encoder writes failed only in the
    # provider call, retried as if the provider had failed, and ended the run PROVIDER_ERROR.
    # Objects an SDK encodes itself (pydantic models) are left to it.
    problem = unsendable(copies, "messages", objects=True)
    if problem is not None:
        path, what = problem
        raise DataError(
            f"{path} {what}; the messages go to the model as JSON", problems=[(path, what)]
        )
    return conversation


def _is_show(value: object) -> bool:
    return isinstance(value, bool) or callable(value)


def _is_choice(value: object) -> bool:
    return isinstance(value, str | Mapping)


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_list(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _is_agents(value: object) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, Agent)
        for k, v in read("agents", DefinitionError, lambda: list(value.items()))
    )
