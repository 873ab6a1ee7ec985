"""Guards: small, pure conditions that compose like tenacity's stop strategies.

`MaxTurns(50) | RepeatedCall(3)` is one `AnyOf` of two guards; `a | b | c` is
flattened into one `AnyOf` of three; a plain function is accepted on either
side. Every guard's repr reads back as code, and a composite reports which
child fired.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from agentfsm._model._checked import check_number
from agentfsm._model.snapshot import Phase, RunSnapshot
from agentfsm._model.types import ExitReason, Priority
from agentfsm.exceptions import PolicyError

__all__ = [
    "ALL_PHASES",
    "ON_OUTPUT",
    "ON_REPLY",
    "ON_RESULTS",
    "AllOf",
    "AnyOf",
    "FunctionGuard",
    "Guard",
    "Hit",
    "Not",
    "Otherwise",
    "as_guard",
    "cached",
    "check_number",
    "runs_any",
]

ALL_PHASES: frozenset[Phase] = frozenset({"model_output", "tool_results", "human_reply"})
ON_OUTPUT: frozenset[Phase] = frozenset({"model_output"})
ON_RESULTS: frozenset[Phase] = frozenset({"tool_results"})
ON_REPLY: frozenset[Phase] = frozenset({"human_reply"})


class Hit:
    """A guard that applied: which leaf fired, and why."""

    __slots__ = ("exit_reason", "guard", "reason")

    def __init__(self, guard: Guard, reason: str, exit_reason: ExitReason | None) -> None:
        self.guard = guard
        self.reason = reason
        self.exit_reason = exit_reason

    def __repr__(self) -> str:
        return f"Hit({self.guard!r}, {self.reason!r})"


_CACHED_HITS = 256
"""How many distinct hits a guard that reuses its hits keeps."""


def cached(hits: dict[Any, Hit], key: object, hit: Hit) -> Hit:
    """Keep `hit` under `key` for the next step that would build the same one; return it.

    A Hit is never changed once made, so a guard whose reason depends only on
    `key` can hand out the same one; the cache is bounded.
    """
    if len(hits) >= _CACHED_HITS:
        hits.clear()
    hits[key] = hit
    return hit


class Guard:
    """Base of all guards: a pure check of a `RunSnapshot` with a layer and a priority.

    A guard of your own implements `check`, returning the reason when it
    applies and None otherwise, and `_args` for the repr. The built-in guards
    implement `__call__` directly, since they return a `Hit` with their own fields,
    and get `check` from it.
    """

    layer: ClassVar[int] = 1
    priority: ClassVar[Priority] = Priority.P0
    exit_reason: ClassVar[ExitReason | None] = None
    phases: frozenset[Phase] = ALL_PHASES
    """The inputs (snapshot phases) in which the guard can apply; it never applies in others,
    so the compiled route table skips it there."""
    acts_on_answers: ClassVar[bool] = True
    """Whether the guard, given in a policy's `guards`, may also end a run at a final answer.
    True for guards of your own; budgets and loop limits bind only when the run needs another
    model call or tool run, so a complete answer still ends COMPLETED."""

    def check(self, snap: RunSnapshot) -> str | None:
        """Return why the guard applies to `snap`, or None."""
        if type(self).__call__ is Guard.__call__:
            raise NotImplementedError(f"{type(self).__name__} must implement check() or __call__()")
        hit = self(snap)
        return None if hit is None else hit.reason

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        reason = self.check(snap)
        if reason is None:
            return None
        return Hit(self, reason, self.exit_reason)

    def leaf_priority(self) -> Priority:
        """The priority reported when this guard decides (a composite: its first child's)."""
        return self.priority

    def leaf_layer(self) -> int:
        """The layer reported when this guard decides (a composite: its first child's)."""
        return self.layer

    def on_answers(self) -> Guard | None:
        """The part of this guard that may end a run at a final answer, or None."""
        return self if self.acts_on_answers else None

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (), {}

    def __repr__(self) -> str:
        cached: str | None = self.__dict__.get("_repr")
        if cached is None:
            # Guards do not change after construction; the repr labels every decision.
            cached = self.__dict__["_repr"] = self._code()
        return cached

    def _code(self) -> str:
        args, kwargs = self._args()
        parts = [_literal(a) for a in args]
        parts += [f"{k}={_literal(v)}" for k, v in kwargs.items()]
        return f"{type(self).__name__}({', '.join(parts)})"

    def _key(self) -> tuple[Any, ...]:
        args, kwargs = self._args()
        return (type(self), args, tuple(sorted(kwargs.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Guard) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __or__(self, other: Guard | Callable[[RunSnapshot], Any]) -> AnyOf:
        return AnyOf(self, as_guard(other))

    def __ror__(self, other: Callable[[RunSnapshot], Any]) -> AnyOf:
        return AnyOf(as_guard(other), self)

    def __and__(self, other: Guard | Callable[[RunSnapshot], Any]) -> AllOf:
        return AllOf(self, as_guard(other))

    def __rand__(self, other: Callable[[RunSnapshot], Any]) -> AllOf:
        return AllOf(as_guard(other), self)

    def __invert__(self) -> Guard:
        return Not(self)


def _literal(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:_}"
    return repr(value)


class _Composite(Guard):
    """A guard made of children; flattened on construction."""

    symbol: ClassVar[str] = ""

    def __init__(self, *children: Guard | Callable[[RunSnapshot], Any]) -> None:
        flat: list[Guard] = []
        for child in children:
            guard = as_guard(child)
            flat.extend(guard.children if type(guard) is type(self) else (guard,))
        if not flat:
            raise PolicyError(f"{type(self).__name__} needs at least one guard")
        self.children: tuple[Guard, ...] = tuple(flat)
        self.phases = self._combine([c.phases for c in flat])

    @staticmethod
    def _combine(phases: list[frozenset[Phase]]) -> frozenset[Phase]:
        return frozenset().union(*phases)

    def leaf_priority(self) -> Priority:
        return self.children[0].leaf_priority()

    def leaf_layer(self) -> int:
        return self.children[0].leaf_layer()

    def _key(self) -> tuple[Any, ...]:
        return (type(self), self.children)

    def _child_repr(self, child: Guard) -> str:
        text = repr(child)
        return f"({text})" if isinstance(child, AnyOf) and not isinstance(self, AnyOf) else text

    def _code(self) -> str:
        return f" {self.symbol} ".join(self._child_repr(c) for c in self.children)


class AnyOf(_Composite):
    """Apply when any child applies; the first child that applies is the one reported."""

    symbol = "|"

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        for child in self.children:
            hit = child(snap)
            if hit is not None:
                return hit
        return None

    def on_answers(self) -> Guard | None:
        """The children that may end a run at a final answer (`TokenBudget(9) | f` gives `f`)."""
        parts = [part for part in (c.on_answers() for c in self.children) if part is not None]
        if len(parts) == len(self.children) and all(
            p is c for p, c in zip(parts, self.children, strict=True)
        ):
            return self
        if len(parts) > 1:
            return AnyOf(*parts)
        return parts[0] if parts else None

    def check(self, snap: RunSnapshot) -> str | None:
        hit = self(snap)
        return None if hit is None else hit.reason


class AllOf(_Composite):
    """Apply when every child applies; the first child is the one reported."""

    symbol = "&"

    @staticmethod
    def _combine(phases: list[frozenset[Phase]]) -> frozenset[Phase]:
        return frozenset.intersection(*phases)

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        hits = []
        for child in self.children:
            hit = child(snap)
            if hit is None:
                return None
            hits.append(hit)
        first = hits[0]
        return Hit(first.guard, " and ".join(h.reason for h in hits), first.exit_reason)

    def check(self, snap: RunSnapshot) -> str | None:
        hit = self(snap)
        return None if hit is None else hit.reason

    def on_answers(self) -> Guard | None:
        """The whole guard when every child may end a run at a final answer, else None."""
        whole = all(c.on_answers() is c for c in self.children)
        return self if whole else None


class Not(Guard):
    """Apply when the child does not."""

    def __init__(self, child: Guard | Callable[[RunSnapshot], Any]) -> None:
        self.child = as_guard(child)

    def leaf_priority(self) -> Priority:
        return self.child.leaf_priority()

    def leaf_layer(self) -> int:
        return self.child.leaf_layer()

    def check(self, snap: RunSnapshot) -> str | None:
        return None if self.child(snap) is not None else f"not {self.child!r}"

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        reason = self.check(snap)
        return None if reason is None else Hit(self, reason, self.child.exit_reason)

    def _key(self) -> tuple[Any, ...]:
        return (Not, self.child)

    def __invert__(self) -> Guard:
        return self.child

    def on_answers(self) -> Guard | None:
        return self if self.child.on_answers() is self.child else None

    def _code(self) -> str:
        inner = repr(self.child)
        return f"~({inner})" if isinstance(self.child, _Composite) else f"~{inner}"


class FunctionGuard(Guard):
    """A plain function `f(snapshot) -> bool | str | None` used as a guard.

    A string return is the reason; True means "applies" with a generic reason.
    Defaults make it a boundary that stops the run (P6, layer 5, INTERRUPTED).
    """

    def __init__(
        self,
        fn: Callable[[RunSnapshot], bool | str | None],
        *,
        layer: int = 5,
        priority: Priority | str = Priority.P6,
        exit_reason: ExitReason | str | None = ExitReason.INTERRUPTED,
    ) -> None:
        if not callable(fn):
            raise PolicyError(f"FunctionGuard: fn must be callable, not {type(fn).__name__}")
        check_number("FunctionGuard", "layer", layer, minimum=1, integer=True)
        self.fn = fn
        self._layer = layer
        self._priority = _priority("FunctionGuard", priority)
        try:
            self._exit = None if exit_reason is None else ExitReason(exit_reason)
        except ValueError:
            raise PolicyError(
                f"FunctionGuard: exit_reason {exit_reason!r} is not an ExitReason"
            ) from None

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        reason = self.check(snap)
        return None if reason is None else Hit(self, reason, self._exit)

    def check(self, snap: RunSnapshot) -> str | None:
        result = self.fn(snap)
        if isinstance(result, str):
            return result
        return f"{self!r} returned true" if result else None

    def leaf_priority(self) -> Priority:
        return self._priority

    def leaf_layer(self) -> int:
        return self._layer

    def _key(self) -> tuple[Any, ...]:
        return (FunctionGuard, self.fn)

    def _code(self) -> str:
        return getattr(self.fn, "__qualname__", None) or repr(self.fn)


class Otherwise(Guard):
    """Always apply: the fallback edge out of a state, with the reason it gives."""

    def __init__(self, reason: str = "no other route applies", priority: str = "P4") -> None:
        if not isinstance(reason, str):
            raise PolicyError(f"Otherwise: reason must be a str, not {type(reason).__name__}")
        self.reason = reason
        self._priority = _priority("Otherwise", priority)
        self._hit = Hit(self, reason, None)

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        return self._hit

    def check(self, snap: RunSnapshot) -> str | None:
        return self.reason

    def leaf_priority(self) -> Priority:
        return self._priority

    def _args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.reason, str(self._priority)), {}


def runs_any(snap: RunSnapshot) -> bool:
    """Whether any call of the turn runs, waits for a human or hands off."""
    return bool(snap.executable or snap.needs_approval or snap.handoffs)


def as_guard(value: Guard | Callable[[RunSnapshot], Any]) -> Guard:
    """Return `value` as a Guard, wrapping a plain function in a FunctionGuard."""
    if isinstance(value, Guard):
        return value
    if callable(value):
        return FunctionGuard(value)
    raise PolicyError(
        f"expected a Guard or a function of a RunSnapshot, got {type(value).__name__}"
    )


def _priority(owner: str, value: object) -> Priority:
    try:
        if isinstance(value, str):
            return Priority(value)
    except ValueError:
        pass
    raise PolicyError(f"{owner}: priority {value!r} is not one of P0..P7")
