"""The mutable record of one run and of the input being routed.

Only the state entry functions in `agentfsm.states` change a `Run`; guards
never see it, they see the frozen `RunSnapshot` built from it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol

from agentfsm._model.snapshot import Phase, RunSnapshot
from agentfsm._model.types import (
    ExitReason,
    ModelTurn,
    ShadowVerdict,
    State,
    ToolCall,
    ToolResult,
    Verdict,
)

if TYPE_CHECKING:
    from agentfsm._model.approvals import Approval
    from agentfsm._model.call_history import CallHistory
    from agentfsm._model.ledger import Account
    from agentfsm._model.tools import ToolSpec

__all__ = ["RECENT_ROUNDS", "Fired", "Run", "RunRules", "Step"]


class RunRules(Protocol):
    """What the states read of a run's policy.

    An `agentfsm.Policy` is one; the protocol lives here so that the vocabulary does not
    import the engine that builds policies.
    """

    @property
    def final_tools(self) -> frozenset[str]:
        """Tools whose result is the run's answer."""

    @property
    def handoffs(self) -> frozenset[str]:
        """Tools that hand the run to another agent."""

    @property
    def repeat_threshold(self) -> int:
        """How many identical calls in a row count as a repeat."""

    @property
    def on_repeat(self) -> str:
        """What a repeat does: "feedback", "ask" or "stop"."""

    @property
    def loops(self) -> Any:
        """The loop ladder (`agentfsm.guards.intent.LoopLadder`), or None for `repeat_threshold`."""

    @property
    def denials_are_tool_errors(self) -> bool:
        """Whether a round refused only by denials counts as a failed round."""

    @property
    def prices_turns(self) -> bool:
        """Whether turns are priced (the policy has a cost budget)."""

    @property
    def reads_tree(self) -> bool:
        """Whether a guard reads the run tree's ledger (the snapshot's `tree`)."""

    @property
    def cedar(self) -> object | None:
        """The policy's Cedar source, when it has one (its context reads the run's history)."""

    def permission_verdict(self, call: ToolCall, *, history: CallHistory | None = None) -> Verdict:
        """The permission of `call` and the source that gave it."""


class Fired(Protocol):
    """What the end state reads of the guard that fired (an `agentfsm.guards.Hit`)."""

    @property
    def exit_reason(self) -> ExitReason | None:
        """The reason the run ends, when the guard ends it."""


RECENT_ROUNDS = 8
"""How many recent tool rounds the no-progress check remembers."""


class Run:
    """Counters and pending work of one run, owned by its Controller.

    A field is replaced, never changed in place (`run.pending = {...}`, not
    `run.pending[id] = call`): `save()` is then a tuple of references, and
    `restore()` puts a run back exactly as it was before a failed input.
    """

    __slots__ = (
        "approval_count",
        "approvals",
        "approved",
        "clock",
        "context_tokens",
        "cost",
        "episode",
        "episode_start",
        "exit_reason",
        "identify",
        "incomplete",
        "interjection",
        "last_call",
        "last_results",
        "pending",
        "pending_allowed",
        "pending_approval",
        "pending_rejected",
        "pending_sigs",
        "policy",
        "price_warned",
        "prices",
        "refused",
        "retries",
        "round_failed",
        "run_id",
        "same_results",
        "shadow",
        "specs",
        "started",
        "state",
        "streak",
        "tokens",
        "tool_calls_used",
        "tool_counts",
        "tool_errors",
        "tree",
        "turn",
    )

    def __init__(
        self,
        run_id: str,
        policy: RunRules,
        specs: dict[str, ToolSpec] | None,
        clock: Callable[[], float] = time.monotonic,
        shadow: RunRules | None = None,
        tree: Account | None = None,
    ) -> None:
        self.run_id = run_id
        self.tree = tree
        """The run's account in its run tree's ledger, if it is in one: its own turns are
        charged there as they are counted, and its snapshots say what the tree has left."""
        self.policy = policy
        self.shadow = shadow
        """A candidate policy judged beside `policy` on every call, recorded and never enforced."""
        self.specs = specs
        self.clock = clock
        """Seconds on a monotonic clock; the run's elapsed time is read from it once per input."""
        self.state = State.AWAIT_MODEL
        self.started = clock()
        self.turn = 0
        self.tokens = 0
        self.cost = 0.0
        self.context_tokens = 0
        self.tool_calls_used = 0
        # Tool calls run so far by tool name, kept only while the policy has a Cedar source
        # (its `context.history.tool_calls`): a run without one pays nothing for it.
        self.tool_counts: dict[str, int] = {}
        self.retries = 0
        self.incomplete = 0
        self.tool_errors = 0
        """Failed repair rounds in a row: rounds of calls of which any failed or was refused."""
        # Whether the round of calls awaiting results already failed: its turn refused some.
        self.round_failed = False
        self.same_results = 0
        self.last_results: tuple[tuple[tuple[Hashable, ...], list[tuple[bool, Any]]], ...] = ()
        self.last_call: Hashable | None = None
        self.streak = 0
        self.pending: dict[str, ToolCall] = {}
        self.pending_approval: tuple[ToolCall, ...] = ()
        # Allowed calls of a turn whose other calls await approval: they run with them.
        self.pending_allowed: tuple[ToolCall, ...] = ()
        self.pending_rejected: tuple[ToolResult, ...] = ()
        self.pending_sigs: dict[str, Hashable] = {}
        # Ids of the pending calls a human approved: a restored run keeps them cleared.
        self.approved: tuple[str, ...] = ()
        # Calls of the waiting round that may not run after all (a restored run checked them
        # again): call id -> why. Each gets an error result saying why in the next decision.
        self.refused: dict[str, str] = {}
        self.exit_reason: ExitReason | None = None
        # Remembered approvals (`agentfsm._model.approvals`): a call one covers runs without
        # asking; `approval_count` numbers them, so an id is never given twice in a run.
        self.approvals: tuple[Approval, ...] = ()
        self.approval_count = 0
        # The host's identity of a tool by name, or None: the declared definition's digest.
        self.identify: Callable[[str], str | None] | None = None
        # Which episode of the conversation: a user message after FINAL opens the next.
        self.episode = 1
        # The turn before the episode's first model output; `max_turns` counts from it.
        self.episode_start = 0
        # A user message that arrived while results were pending: missing results are skips.
        self.interjection: str | None = None
        self.prices = policy.prices_turns
        """Whether turns are priced (the policy has a cost budget)."""
        self.price_warned = False

    def snapshot(self, base: RunSnapshot, phase: Phase, changes: dict[str, Any]) -> RunSnapshot:
        """The frozen view guards read: `base`, the run's counters now, then `changes`.

        Built unvalidated from values agentfsm holds itself: `base`'s values with the
        run's counters and `changes` over them.
        """
        values = base.__dict__.copy()
        values["phase"] = phase
        values["turn"] = self.turn
        values["episode_start"] = self.episode_start
        values["tool_calls_used"] = self.tool_calls_used
        values["tokens_used"] = self.tokens
        values["cost_used"] = self.cost
        values["context_tokens"] = self.context_tokens
        values["elapsed"] = self.clock() - self.started
        values["tool_errors_in_a_row"] = self.tool_errors
        values["same_results_in_a_row"] = self.same_results
        values["retries_in_a_row"] = self.retries
        values["incomplete_in_a_row"] = self.incomplete
        if self.tree is not None and self.policy.reads_tree:
            # Read only for a guard that needs it: a root run's own budgets see the tree's
            # spend in its counters (children charge them), and pay nothing for the ledger here.
            values["tree"] = self.tree.left()
        values.update(changes)
        return RunSnapshot._made(values)

    def save(self) -> tuple[Any, ...]:
        """Every field an input can change, for `restore`."""
        return _SAVE(self)

    def restore(self, saved: tuple[Any, ...]) -> None:
        """Put back the fields `save` returned."""
        for name, value in zip(_CHANGING, saved, strict=True):
            setattr(self, name, value)


_FIXED = frozenset(
    {"clock", "identify", "policy", "prices", "run_id", "shadow", "specs", "started", "tree"}
)
"""Fields set once when the run is made (or loaded); no input changes them."""
_CHANGING = tuple(name for name in Run.__slots__ if name not in _FIXED)
_SAVE = attrgetter(*_CHANGING)


class Step:
    """The input being routed and what the states found out about it."""

    __slots__ = ("calls", "hit", "output", "payload", "round", "shadow", "sigs", "snap")

    def __init__(self, snap: RunSnapshot, payload: Any = None) -> None:
        self.snap = snap
        self.payload = payload
        self.output: ModelTurn | None = None
        self.calls: list[ToolCall] = []
        """The output's calls as the run keeps them (parse): copies no one else holds, with
        every id issued. `output.tool_calls` equals them, and is them unless the host built
        the turn (its calls are the host's, which the run never keeps)."""
        self.hit: Fired | None = None
        """The Hit of the edge being taken, for the destination's entry work (end reads it)."""
        self.sigs: dict[str, Hashable] = _NO_SIGS
        """Each call's key, by id (validate); read only, so one empty dict is shared."""
        self.round: Hashable | None = None
        """The key of the turn's round of calls (validate), for the streak."""
        self.shadow: tuple[ShadowVerdict, ...] = ()
        """The shadow policy's verdicts on the turn's calls (validate), for the decision."""


_NO_SIGS: dict[str, Hashable] = {}
