"""Every error agentfsm raises, kept apart by who must act on it.

    AgentFSMError                    root of everything below
    ├── DefinitionError              the developer's mistake: fix the code or the config
    │   ├── MachineDefinitionError   the route table is not a sound machine
    │   ├── PolicyError              a policy (object or file) is invalid
    │   ├── DataError                a value given to a data model (ToolResult, ...) is invalid
    │   └── ToolDefinitionError      a declared tool cannot be understood
    └── RunError                     something went wrong during a run
        ├── PayloadError             a model output no normalizer recognises
        ├── TraceError               a trace or trajectory file is malformed or unreadable
        ├── UnknownCallIdError       a tool result answers a call that was never asked for
        ├── InvalidInputError        an input that the current state cannot take
        ├── CheckpointError          a saved run cannot be loaded (version, impossible, corrupt)
        └── ProviderError            the model provider failed (wraps litellm/tenacity errors)

Each error carries its context as attributes (`state`, `turn`, `details`) and
pickles, so it can cross a process pool.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentFSMError",
    "CheckpointError",
    "DataError",
    "DefinitionError",
    "InvalidInputError",
    "MachineDefinitionError",
    "PayloadError",
    "PolicyError",
    "ProviderError",
    "RunError",
    "ToolDefinitionError",
    "TraceError",
    "UnknownCallIdError",
]


class AgentFSMError(Exception):
    """Root of every agentfsm error.

    Args:
        message: What was wrong, and what was expected instead.
        state: The controller state when it happened, if any.
        turn: The model turn when it happened, if any.
        details: Any further context (keys seen, file and line, ...).
    """

    def __init__(
        self,
        message: str,
        *,
        state: str | None = None,
        turn: int | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.state = state
        self.turn = turn
        self.details = details

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.state, self.turn, self.details))

    def __str__(self) -> str:
        where = []
        if self.state is not None:
            where.append(f"state={self.state}")
        if self.turn is not None:
            where.append(f"turn={self.turn}")
        return f"{self.message} [{', '.join(where)}]" if where else self.message


def _rebuild(
    cls: type[AgentFSMError],
    message: str,
    state: str | None,
    turn: int | None,
    details: dict[str, Any],
) -> AgentFSMError:
    return cls(message, state=state, turn=turn, **details)


class DefinitionError(AgentFSMError):
    """The machine, policy or tools were defined wrongly: the developer must fix them."""


class MachineDefinitionError(DefinitionError):
    """The route table does not make a sound machine (trap, unreachable state, ...)."""


class PolicyError(DefinitionError, ValueError):
    """A policy object or policy file is invalid.

    A field's problems are listed in `details["problems"]` as `(field, message)` pairs,
    as for `DataError`; like it, it is a `ValueError`.
    """


class DataError(DefinitionError, ValueError):
    """A value given to one of agentfsm's data models (`ToolCall`, `ToolResult`, `ModelTurn`,
    `Decision`, ...) is invalid.

    The message names the model and each field with what was wrong; `details["problems"]`
    holds the same list as `(field, message)` pairs. It is a `ValueError`, as pydantic's
    error it replaces was, so code that caught that keeps working.
    """


class ToolDefinitionError(DefinitionError):
    """A declared tool is neither a name, a function spec nor a callable."""


class RunError(AgentFSMError):
    """A failure during a run; the host decides whether to carry on."""


class PayloadError(RunError):
    """A payload is not a model output any normalizer recognises."""


class TraceError(RunError):
    """A trace or trajectory file is malformed (`details` has `path` and `line`), cannot be
    opened (`details` has `path`), or replay was given something that is not a recorded run."""


class UnknownCallIdError(RunError):
    """A tool result answers a call id the controller never asked for."""


class InvalidInputError(RunError):
    """The controller's current state cannot take this input (results while awaiting the model)."""


class CheckpointError(RunError):
    """A saved run cannot be restored: another format version, corrupted, or an impossible state.

    `details` has `run_id` when the dump names one; the stored data is never changed.
    """


class ProviderError(RunError):
    """The model provider failed and retries did not help."""
