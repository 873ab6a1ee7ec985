"""The data that crosses agentfsm's boundaries: turns, calls, results, decisions.

Every type here is a pydantic model, a plain frozen record (`Decision`) or a string
enum. Records are frozen: a `ModelTurn` or a `Decision` is a fact about something
that already happened.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import EnumType, StrEnum
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from agentfsm._model._checked import Checked, constructed
from agentfsm._model.records import Record
from agentfsm.exceptions import DataError

_M = TypeVar("_M", bound=BaseModel)

Permission = Literal["allow", "ask", "deny"]
"""Whether a call may run: `allow`, `ask` a human first, or `deny`."""
PERMISSIONS: tuple[Permission, ...] = ("allow", "ask", "deny")
"""The only permission values, weakest first."""
Verdict = tuple[Permission, str]
"""A permission and why, e.g. `("deny", "rule 'deny bash(command=rm -rf *)'")`."""

__all__ = [
    "PERMISSIONS",
    "Action",
    "Decision",
    "ExitReason",
    "FinishReason",
    "ModelTurn",
    "Permission",
    "Priority",
    "ShadowPermission",
    "ShadowVerdict",
    "State",
    "ToolCall",
    "ToolResult",
    "Usage",
    "Verdict",
    "Vocabulary",
    "unchecked",
    "unchecked_maker",
]


class _Closed(EnumType):
    """The type of a vocabulary: every lookup that fails raises DataError.

    `State("bogus")` (by value), `State["BOGUS"]` (by member name) and the functional
    API called on a vocabulary that has members (`State("x", "y")`, which Python
    answers with a TypeError) all name the vocabulary and its values.
    """

    def __call__(cls, value: Any, *args: Any, **kwargs: Any) -> Any:
        if (args or kwargs) and len(cls.__members__):
            raise DataError(
                f"{cls.__name__} is a closed vocabulary; {cls.__name__}(value) looks a member "
                "up, it cannot make a new enum",
                model=cls.__name__,
                problems=[("value", "expected one value")],
            )
        return super().__call__(value, *args, **kwargs)

    def __getitem__(cls, name: str) -> Any:
        try:
            return super().__getitem__(name)
        except (KeyError, TypeError):  # TypeError: a name that is not hashable
            names = ", ".join(cls.__members__)
            raise DataError(
                f"{name!r:.60} is not a member name of {cls.__name__}: expected one of {names}",
                model=cls.__name__,
                problems=[("name", f"expected one of {names}")],
            ) from None


class Vocabulary(StrEnum, metaclass=_Closed):
    """A closed set of names; a name outside it raises DataError listing the set."""

    @classmethod
    def _missing_(cls, value: object) -> None:
        names = ", ".join(member.value for member in cls)
        raise DataError(
            f"{value!r} is not a valid {cls.__name__}: expected one of {names}",
            model=cls.__name__,
            problems=[("value", f"expected one of {names}")],
        )


class FinishReason(Vocabulary):
    """Why the provider says the model stopped, mapped onto one vocabulary.

    This is the provider's claim, not the controller's conclusion: `STOP` with
    tool calls present is kept as `STOP` and reconciled by the P7 guard.
    """

    STOP = "stop"
    TOOL_CALLS = "tool_calls"
    LENGTH = "length"
    CONTENT_FILTER = "content_filter"
    REFUSAL = "refusal"
    PAUSE = "pause"
    ERROR = "error"
    UNKNOWN = "unknown"


class Action(Vocabulary):
    """What the host should do next."""

    EXECUTE_TOOLS = "execute_tools"
    FINAL = "final"
    RETRY = "retry"
    HANDOFF = "handoff"
    ASK_HUMAN = "ask_human"
    CONTINUE = "continue"
    STOP = "stop"


class ExitReason(Vocabulary):
    """Why a run ended. Only `COMPLETED` is a normal end."""

    COMPLETED = "completed"
    MAX_TURNS = "max_turns"
    MAX_TOOL_CALLS = "max_tool_calls"
    TOKEN_BUDGET = "token_budget"
    COST_BUDGET = "cost_budget"
    DEADLINE = "deadline"
    CONTEXT_EXHAUSTED = "context_exhausted"
    DOOM_LOOP = "doom_loop"
    NO_PROGRESS = "no_progress"
    TOOL_ERRORS = "tool_errors"
    PERMISSION_DENIED = "permission_denied"
    HUMAN_DECLINED = "human_declined"
    CONTENT_FILTER = "content_filter"
    REFUSAL = "refusal"
    PROVIDER_ERROR = "provider_error"
    UNRECOVERABLE_OUTPUT = "unrecoverable_output"
    INTERRUPTED = "interrupted"


class Priority(Vocabulary):
    """The routing priorities of DESIGN.md, P0 (structure) to P7 (signal conflicts)."""

    P0 = "P0"
    P1 = "P1"
    P2 = "P2"
    P3 = "P3"
    P4 = "P4"
    P5 = "P5"
    P6 = "P6"
    P7 = "P7"


class State(Vocabulary):
    """The named states of the loop; each is the work of one loop step."""

    AWAIT_MODEL = "await_model"
    PARSE = "parse"
    VALIDATE = "validate"
    EXECUTE = "execute"
    VERIFY = "verify"
    BUDGET_CHECK = "budget_check"
    RECOVER = "recover"
    HANDOFF = "handoff"
    AWAIT_HUMAN = "await_human"
    END = "end"


def unchecked(cls: type[_M], values: dict[str, Any]) -> _M:
    """Make a model from values the library produced itself, skipping validation.

    Only for per-step records agentfsm made from data it checked already (a
    snapshot, a decision); `values` must hold every field. Outside data (provider
    payloads, framework objects, trace files) goes through the model's own validation.
    """
    make: Callable[[dict[str, Any]], _M] = _MAKERS.get(cls) or unchecked_maker(cls)
    return make(values)


def unchecked_maker(cls: type[_M]) -> Callable[[dict[str, Any]], _M]:
    """`unchecked` for one class: a function of the values, made once per class."""
    make: Callable[[dict[str, Any]], _M] | None = _MAKERS.get(cls)
    if make is None:
        make = _MAKERS[cls] = _maker(cls)
    return make


def _maker(cls: type[_M]) -> Callable[[dict[str, Any]], _M]:
    # Pydantic's own unvalidated copy (its documented path for trusted data: `update` is
    # stored as given) of a template holding the defaults. `values` replaces every field,
    # so every field counts as set, as after the constructor.
    template = constructed(cls, {})
    copy = BaseModel.model_copy

    def make(values: dict[str, Any]) -> _M:
        made: _M = copy(template, update=values)
        return made

    return make


_MAKERS: dict[type[BaseModel], Callable[[dict[str, Any]], Any]] = {}
"""`unchecked_maker(cls)` of each class `unchecked` was asked for."""


_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class ToolCall(Checked):
    """One tool call the model asked for."""

    model_config = _FROZEN

    id: str = ""
    """The provider's call id; agentfsm issues a deterministic one when it is missing."""
    name: str
    """The tool's name as the model wrote it."""
    arguments: dict[str, Any] | None = None
    """Parsed arguments; `None` when they are incomplete or unparseable (see `error`)."""
    raw_arguments: str | None = None
    """The arguments exactly as received, when they came as a string."""
    error: str | None = None
    """Why the call cannot be executed as it stands (truncated, invalid JSON, not an object)."""
    kind: str = "function"
    """`function` for a function call; otherwise the OpenAI Responses item type it came as
    (`custom_tool_call`, `local_shell_call`, `shell_call`, `apply_patch_call`, `computer_call`,
    `tool_search_call`, `mcp_approval_request`), whose result goes back as the matching
    output item (`custom_tool_call_output`, ..., `mcp_approval_response`)."""

    @property
    def complete(self) -> bool:
        """Whether the call parsed into an argument object and can be executed."""
        return self.error is None and self.arguments is not None


class Usage(Checked):
    """Tokens (and cost, when known) that one model output used."""

    model_config = _FROZEN

    input_tokens: int = 0
    """Prompt tokens, cached ones included: the size of the context sent."""
    output_tokens: int = 0
    """Completion tokens, reasoning included."""
    cost: float | None = None
    """Cost in US dollars when the host or the provider reports it."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


class ModelTurn(Checked):
    """One model output, normalized from any provider's wire format."""

    model_config = _FROZEN

    text: str = ""
    """The visible answer text, concatenated across text blocks."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Calls the host must execute, in the order the model made them."""
    finish_reason: FinishReason = FinishReason.UNKNOWN
    """The provider's stop claim, mapped; see `raw_finish_reason` for the original."""
    raw_finish_reason: str | None = None
    """The provider's own finish/stop reason string, unchanged."""
    truncated: bool = False
    """The output was cut (length limit, stream ended mid-block, incomplete status)."""
    usage: Usage | None = None
    """Token usage of this output when the provider reported it."""
    refusal: str | None = None
    """Refusal text when the provider reports one separately from the answer."""
    reasoning: str | None = None
    """Reasoning or thinking text, kept apart from the answer."""
    error: str | None = None
    """An error the provider reported inside the output (e.g. an error chunk in a stream)."""
    provider: str | None = None
    """Which wire format this turn was read from."""
    model: str | None = None
    """The model name the provider reported."""
    server_tool_calls: int = 0
    """Calls the provider ran itself (e.g. Anthropic `server_tool_use`); not for the host."""


class ToolResult(Checked):
    """The result of one tool call, sent back to the model."""

    model_config = _FROZEN

    call_id: str
    """The id of the call this answers."""
    content: Any = ""
    """What the model will read: a string, or JSON-compatible data."""
    is_error: bool = False
    """Whether the tool failed."""
    name: str | None = None
    """The tool's name, for hosts whose wire format needs it."""


ShadowPermission = Literal["allow", "ask", "deny", "error"]
"""What a shadow policy said of a call: a permission, or "error" when evaluating it failed."""


class ShadowVerdict(Record):
    """What a shadow policy would have said of one call, beside what the enforced policy said.

    Recorded, never enforced: the call ran, waited or was refused as `enforced` says.
    """

    call_id: str
    """The id of the call both policies judged."""
    tool: str
    """The call's tool name."""
    enforced: Permission
    """The enforced policy's verdict: what happened to the call."""
    shadow: ShadowPermission
    """The shadow policy's verdict; "error" when evaluating it raised (see `source`)."""
    source: str = ""
    """Why the shadow said so: the deciding rule, the table, the hook, or the error."""
    enforced_source: str = ""
    """Why the enforced policy said so."""

    @property
    def differs(self) -> bool:
        """Whether the shadow would have decided the call otherwise."""
        return self.shadow != self.enforced


class Decision(Record):
    """What the controller decided after one input, and why.

    A plain frozen record (`agentfsm._model.records`), made on every input: one you build
    is validated, and it dumps (`model_dump`, `model_dump_json`) as a pydantic model does.
    """

    action: Action
    """What the host should do next."""
    priority: Priority
    """The P0-P7 priority of the guard that decided."""
    layer: int
    """The layer (1-5) of the guard that decided."""
    reason: str
    """Why, in words a reviewer can read."""
    guard: str
    """The repr of the route's guard, which reads back as code."""
    fired: str = ""
    """The repr of the leaf guard that fired (differs from `guard` for composites)."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """What to execute (EXECUTE_TOOLS, HANDOFF) or to approve (ASK_HUMAN)."""
    results: list[ToolResult] = Field(default_factory=list)
    """Results the controller made itself; the host sends them beside its own."""
    exit_reason: ExitReason | None = None
    """Why the run ended, when the action is FINAL or STOP."""
    turn: int = 0
    """How many model outputs the run had seen when it decided."""
    state: State = State.AWAIT_MODEL
    """The state the run is in after this decision."""
    path: tuple[State, ...] = ()
    """The states passed through while deciding, in order."""
    adjust: dict[str, Any] = Field(default_factory=dict)
    """Suggestions for the next model call, e.g. `{"max_tokens_factor": 2}` after a cut by the
    token limit."""
    answer: Any = None
    """The answer when the action is FINAL: the model's text, or the content of the result of
    a `final_tools` call that ended the run."""
    note: str | None = None
    """Words for the model: send them as a user message after the results of the calls this
    decision clears. What a human said with an approval (`on_human_reply(approved=True,
    message=...)`), or the loop ladder's warning (`Policy(loops=...)`, docs/loops.md). A note
    given with a refusal travels in the declined calls' error results instead."""
    shadow: tuple[ShadowVerdict, ...] = ()
    """What the shadow policy (`Controller(shadow=...)`) would have said of each call this
    decision judged; empty without a shadow. Recorded only: it never changes the decision."""
    covered: dict[str, str] = Field(default_factory=dict)
    """Calls of `tool_calls` that a remembered approval let run without asking a human:
    call id -> the approval's id (`Controller.approvals`)."""


# The Controller's decision, made on every step from values it checked itself.
unchecked_decision = Decision._made
