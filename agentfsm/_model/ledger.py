"""One live budget ledger for a run tree: what every run in it has spent, and what is left.

A parent and the runs it starts (handoffs, runs started inside its tools, a framework's
sub-agents) each hold an `Account` of one `Ledger`. A run's spend is charged to its
account and, at once, to every account above it, so a parent's budget sees a child's
tokens while the child runs, not after it returns. A run's `left()` is the least that any
account on its path to the root has left: a child stops (`TreeBudget`) when a budget above
it is spent, wherever the spend happened.

A call or a batch about to run may `reserve` an estimate first: the hold counts against
every account on the path until it is `settle`d with what was really spent, so runs going
on at once (a parallel batch of sub-agents) cannot together start more than is left.

The ledger's arithmetic runs under one lock; the listeners that mirror a charge into the
ancestors' Controllers are called after it is released, so a Controller reading the
ledger under its own lock and a charge arriving from a tool's thread never wait on each
other.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

from agentfsm._model.records import Record
from agentfsm._model.types import ExitReason, Usage
from agentfsm.exceptions import InvalidInputError

__all__ = ["Account", "Hold", "Ledger", "Left"]


class Left(Record):
    """What a run may still spend: the least left on its path to the root (None: no cap)."""

    tokens: int | None = None
    """Tokens (input plus output) left, reservations of runs going on taken off."""
    cost: float | None = None
    """US dollars left, reservations taken off."""
    seconds: float | None = None
    """Wall-clock seconds left."""
    turns: int | None = None
    """Model turns left to this run in its episode (its own `max_turns`; set by the runner)."""
    spent: ExitReason | None = None
    """The budget that is spent, when one on the path is: TOKEN_BUDGET, COST_BUDGET, DEADLINE."""
    why: str = ""
    """Which account spent it, and how much of what cap, when `spent` is set."""

    def text(self) -> str:
        """The budget as one line a model can plan with (`Budget left: 2 turns, 1,200 tokens`)."""
        parts = []
        if self.turns is not None:
            parts.append(f"{self.turns} model turn{'s' if self.turns != 1 else ''}")
        if self.tokens is not None:
            parts.append(f"{max(self.tokens, 0):,} tokens")
        if self.cost is not None:
            parts.append(f"${max(self.cost, 0.0):.4f}")
        if self.seconds is not None:
            parts.append(f"{max(self.seconds, 0.0):.0f}s")
        return "Budget left: " + (", ".join(parts) if parts else "no limit") + "."


class Hold(Record):
    """An estimate reserved on an account before a call runs; `Account.settle` releases it."""

    run_id: str
    """The account that reserved it."""
    tokens: int = 0
    """Tokens held."""
    cost: float = 0.0
    """US dollars held."""


class _Book:
    """One account's caps and counters (changed only under the ledger's lock)."""

    __slots__ = (
        "cost",
        "cost_cap",
        "deadline",
        "held_cost",
        "held_tokens",
        "listeners",
        "parent",
        "run_id",
        "seconds_cap",
        "tokens",
        "tokens_cap",
    )

    def __init__(
        self, run_id: str, parent: _Book | None, caps: tuple[Any, Any, Any], now: float
    ) -> None:
        self.run_id = run_id
        self.parent = parent
        self.tokens_cap, self.cost_cap, self.seconds_cap = caps
        self.deadline = None if self.seconds_cap is None else now + self.seconds_cap
        self.tokens = 0
        self.cost = 0.0
        self.held_tokens = 0
        self.held_cost = 0.0
        self.listeners: tuple[Callable[[Usage], Any], ...] = ()

    def path(self) -> list[_Book]:
        """This account and every account above it, this one first."""
        books: list[_Book] = []
        book: _Book | None = self
        while book is not None:
            books.append(book)
            book = book.parent
        return books


def _caps(policy: Any) -> tuple[int | None, float | None, float | None]:
    """The tree-wide budgets a policy sets: tokens, cost, seconds (an infinite one is none)."""

    def finite(value: Any) -> Any:
        return value if value is not None and math.isfinite(value) else None

    return (
        getattr(policy, "max_tokens", None),
        finite(getattr(policy, "max_cost", None)),
        finite(getattr(policy, "max_seconds", None)),
    )


class Ledger:
    """The budget ledger of one run tree; thread-safe.

    Args:
        clock: Seconds on a monotonic clock, for time budgets (`time.monotonic` by default).
    """

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        if clock is not None and not callable(clock):
            raise InvalidInputError(f"clock must be a function, not {type(clock).__name__}")
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()

    def open(self, policy: Any, *, run_id: str, parent: Account | None = None) -> Account:
        """Open the account of a run bound by `policy`'s `max_tokens`, `max_cost` and
        `max_seconds`, under `parent` (None: the tree's root)."""
        if not isinstance(run_id, str) or not run_id:
            raise InvalidInputError(f"run_id must be a non-empty str, not {run_id!r}")
        if parent is not None and (not isinstance(parent, Account) or parent.ledger is not self):
            raise InvalidInputError("parent must be an Account of this ledger")
        book = _Book(run_id, None if parent is None else parent._book, _caps(policy), self._clock())
        return Account(self, book)

    def _charge(self, book: _Book, usage: Usage) -> list[Callable[[Usage], Any]]:
        tokens, cost = usage.input_tokens + usage.output_tokens, usage.cost or 0.0
        with self._lock:
            path = book.path()
            for each in path:
                each.tokens += tokens
                each.cost += cost
        # The run's own Controller counted its own turn; the ancestors' are told here.
        return [listener for each in path[1:] for listener in each.listeners]

    def _left(self, book: _Book) -> Left:
        now = self._clock()
        tokens: int | None = None
        cost: float | None = None
        seconds: float | None = None
        spent: tuple[ExitReason, str] | None = None
        with self._lock:
            for each in book.path():
                if each.tokens_cap is not None:
                    tokens = _least(tokens, each.tokens_cap - each.tokens - each.held_tokens)
                    if spent is None and each.tokens >= each.tokens_cap:
                        spent = (
                            ExitReason.TOKEN_BUDGET,
                            (
                                f"run {each.run_id!r} has used {each.tokens} tokens of its "
                                f"budget of {each.tokens_cap} (its run tree's spend included)"
                            ),
                        )
                if each.cost_cap is not None:
                    cost = _least(cost, each.cost_cap - each.cost - each.held_cost)
                    if spent is None and each.cost >= each.cost_cap:
                        spent = (
                            ExitReason.COST_BUDGET,
                            (
                                f"run {each.run_id!r} has spent ${each.cost:.4f} of its budget "
                                f"of ${each.cost_cap:.4f} (its run tree's spend included)"
                            ),
                        )
                if each.deadline is not None:
                    seconds = _least(seconds, each.deadline - now)
                    if spent is None and now >= each.deadline:
                        spent = (
                            ExitReason.DEADLINE,
                            (f"run {each.run_id!r} has used its {each.seconds_cap}s of wall time"),
                        )
        return Left._made(
            {
                "tokens": tokens,
                "cost": cost,
                "seconds": seconds,
                "turns": None,
                "spent": None if spent is None else spent[0],
                "why": "" if spent is None else spent[1],
            }
        )

    def _reserve(self, book: _Book, tokens: int, cost: float) -> Hold | None:
        with self._lock:
            path = book.path()
            for each in path:
                if each.tokens_cap is not None and (
                    each.tokens + each.held_tokens + tokens > each.tokens_cap
                ):
                    return None
                if each.cost_cap is not None and each.cost + each.held_cost + cost > each.cost_cap:
                    return None
            for each in path:
                each.held_tokens += tokens
                each.held_cost += cost
        return Hold._made({"run_id": book.run_id, "tokens": tokens, "cost": cost})

    def _release(self, book: _Book, hold: Hold) -> None:
        with self._lock:
            for each in book.path():
                each.held_tokens -= hold.tokens
                each.held_cost -= hold.cost


def _least(current: Any, value: Any) -> Any:
    return value if current is None or value < current else current


class Account:
    """One run's place in a `Ledger`: charge it, reserve on it, read what is left."""

    __slots__ = ("_book", "_holds", "ledger")

    def __init__(self, ledger: Ledger, book: _Book) -> None:
        self.ledger = ledger
        self._book = book
        self._holds: set[int] = set()

    @property
    def run_id(self) -> str:
        """The run this account is of."""
        return self._book.run_id

    def listen(self, listener: Callable[[Usage], Any]) -> None:
        """Call `listener` with the usage of every charge made below this account (a child's)."""
        if not callable(listener):
            raise InvalidInputError(f"listener must be a function, not {type(listener).__name__}")
        with self.ledger._lock:
            self._book.listeners = (*self._book.listeners, listener)

    def charge(self, usage: Usage) -> None:
        """Charge `usage` to this account and every account above it, at once."""
        if not isinstance(usage, Usage):
            raise InvalidInputError(f"charge() takes a Usage, not {type(usage).__name__}")
        for listener in self.ledger._charge(self._book, usage):
            listener(usage)

    def left(self, turns: int | None = None) -> Left:
        """What this run may still spend; `turns`, when given, is carried as its turns left."""
        left = self.ledger._left(self._book)
        if turns is None:
            return left
        return Left._made({**vars(left), "turns": turns})

    def reserve(self, tokens: int = 0, cost: float = 0.0) -> Hold | None:
        """Hold an estimate before a call runs; None when it does not fit what is left on
        the path (nothing is held then)."""
        if type(tokens) is not int or tokens < 0:
            raise InvalidInputError(f"reserve(tokens=...) must be an int >= 0, not {tokens!r}")
        if not isinstance(cost, int | float) or isinstance(cost, bool) or not cost >= 0:
            raise InvalidInputError(f"reserve(cost=...) must be a number >= 0, not {cost!r}")
        hold = self.ledger._reserve(self._book, tokens, float(cost))
        if hold is not None:
            with self.ledger._lock:
                self._holds.add(id(hold))
        return hold

    def settle(self, hold: Hold, usage: Usage | None = None) -> None:
        """Release `hold` and charge what the call really spent (`usage`, when it spent any)."""
        if usage is not None and not isinstance(usage, Usage):
            raise InvalidInputError(f"settle() takes a Usage or None, not {type(usage).__name__}")
        with self.ledger._lock:
            # Checked and taken under the lock: two threads settling one hold release it once.
            if not isinstance(hold, Hold) or id(hold) not in self._holds:
                raise InvalidInputError(
                    "settle() takes a Hold this account reserved and has not settled"
                )
            self._holds.discard(id(hold))
        self.ledger._release(self._book, hold)
        if usage is not None:
            self.charge(usage)
