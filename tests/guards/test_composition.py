"""Guards compose with `|`, `&` and `~`, read back from their repr, and say which child fired."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings

from agentfsm import ExitReason, Priority, RunSnapshot
from agentfsm.exceptions import PolicyError
from agentfsm.guards import (
    AllOf,
    AnyOf,
    CostBudget,
    Deadline,
    FunctionGuard,
    Guard,
    HasToolCalls,
    MaxTurns,
    Not,
    Otherwise,
    RepeatedCall,
    RetriesExhausted,
    TokenBudget,
    ToolErrorLimit,
    ToolFailed,
    as_guard,
    parse_guard,
)
from agentfsm.testing import call, snapshot
from tests.guards.hits import fires
from tests.strategies import guards, snapshots


def late(snap: RunSnapshot) -> bool:
    """A plain-function guard: applies from turn 10."""
    return snap.turn >= 10


def named(snap: RunSnapshot) -> str | None:
    """A plain-function guard that gives its own reason."""
    return "the user said stop" if snap.human_message == "stop" else None


class TestOperators:
    def test_or_builds_an_anyof_of_both(self) -> None:
        """`a | b` is one AnyOf whose children are a and b, in order."""
        guard = MaxTurns(50) | RepeatedCall(3)
        assert isinstance(guard, AnyOf)
        assert guard.children == (MaxTurns(50), RepeatedCall(3))

    def test_and_builds_an_allof_of_both(self) -> None:
        """`a & b` is one AllOf whose children are a and b, in order."""
        guard = HasToolCalls() & ToolFailed()
        assert isinstance(guard, AllOf)
        assert guard.children == (HasToolCalls(), ToolFailed())

    def test_invert_builds_a_not(self) -> None:
        """`~a` is a Not around a."""
        guard = ~MaxTurns(5)
        assert isinstance(guard, Not)
        assert guard.child == MaxTurns(5)

    def test_double_invert_gives_back_the_guard(self) -> None:
        """`~~a` is a itself, not a Not of a Not."""
        assert ~~MaxTurns(5) == MaxTurns(5)

    def test_or_chains_flatten(self) -> None:
        """`a | b | c` is one AnyOf of three children, not a nest."""
        guard = TokenBudget(1) | CostBudget(0.5) | MaxTurns(50)
        assert isinstance(guard, AnyOf)
        assert guard.children == (TokenBudget(1), CostBudget(0.5), MaxTurns(50))

    def test_and_chains_flatten(self) -> None:
        """`a & b & c` is one AllOf of three children."""
        guard = MaxTurns(1) & RepeatedCall(3) & ToolFailed()
        assert isinstance(guard, AllOf)
        assert len(guard.children) == 3

    def test_grouped_or_on_the_right_also_flattens(self) -> None:
        """`a | (b | c)` is the same AnyOf of three as `a | b | c`."""
        a, b, c = MaxTurns(1), MaxTurns(2), MaxTurns(3)
        assert a | (b | c) == a | b | c

    def test_mixed_operators_do_not_flatten_across_kinds(self) -> None:
        """`(a | b) & c` keeps the AnyOf as one child of the AllOf."""
        guard = (MaxTurns(1) | MaxTurns(2)) & ToolFailed()
        assert isinstance(guard, AllOf)
        assert guard.children == (MaxTurns(1) | MaxTurns(2), ToolFailed())

    def test_plain_function_on_the_right_becomes_a_function_guard(self) -> None:
        """`guard | f` wraps f in a FunctionGuard."""
        guard = MaxTurns(50) | late
        assert isinstance(guard, AnyOf)
        assert guard.children == (MaxTurns(50), FunctionGuard(late))

    def test_plain_function_on_the_left_becomes_a_function_guard(self) -> None:
        """`f | guard` and `f & guard` wrap f too, keeping it first."""
        either = late | MaxTurns(50)
        both = late & MaxTurns(50)
        assert isinstance(either, AnyOf)
        assert either.children == (FunctionGuard(late), MaxTurns(50))
        assert isinstance(both, AllOf)
        assert both.children == (FunctionGuard(late), MaxTurns(50))

    def test_something_not_callable_is_refused(self) -> None:
        """Composing with a value that is neither a guard nor a function is a TypeError."""
        with pytest.raises(PolicyError, match="int"):
            as_guard(3)  # type: ignore[arg-type]

    def test_an_empty_composite_is_refused(self) -> None:
        """An AnyOf with no children is a ValueError."""
        with pytest.raises(PolicyError, match="at least one"):
            AnyOf()


class TestRepr:
    def test_a_leaf_reads_as_its_constructor_call(self) -> None:
        """A guard's repr is the call that builds it."""
        assert repr(MaxTurns(50)) == "MaxTurns(50)"
        assert repr(HasToolCalls()) == "HasToolCalls()"

    def test_an_anyof_reads_as_a_pipe_chain(self) -> None:
        """`MaxTurns(50) | RepeatedCall(3)` prints exactly so."""
        assert repr(MaxTurns(50) | RepeatedCall(3)) == "MaxTurns(50) | RepeatedCall(3)"

    def test_an_anyof_inside_an_allof_is_parenthesised(self) -> None:
        """Precedence is kept: an AnyOf inside an AllOf prints in parentheses."""
        guard = (MaxTurns(1) | RepeatedCall(3)) & ToolFailed()
        assert repr(guard) == "(MaxTurns(1) | RepeatedCall(3)) & ToolFailed()"

    def test_an_allof_inside_an_anyof_needs_no_parentheses(self) -> None:
        """`&` binds tighter than `|`, so an AllOf inside an AnyOf prints bare."""
        guard = MaxTurns(1) | (RepeatedCall(3) & ToolFailed())
        assert repr(guard) == "MaxTurns(1) | RepeatedCall(3) & ToolFailed()"

    def test_a_not_reads_with_a_tilde(self) -> None:
        """`~leaf` prints as `~Leaf()`, `~composite` as `~(...)`."""
        assert repr(~HasToolCalls()) == "~HasToolCalls()"
        assert repr(~(MaxTurns(1) & ToolFailed())) == "~(MaxTurns(1) & ToolFailed())"

    def test_large_integers_print_with_underscores(self) -> None:
        """Budgets of 10,000 or more print grouped, as people write them."""
        assert repr(TokenBudget(200_000)) == "TokenBudget(200_000)"

    def test_a_function_guard_reads_as_the_function_name(self) -> None:
        """A FunctionGuard prints as the function's qualified name."""
        assert repr(MaxTurns(5) | late) == "MaxTurns(5) | late"

    @given(guards())
    def test_every_composite_reads_back(self, guard: Guard) -> None:
        """For any composite g of built-in guards, `parse_guard(repr(g)) == g`."""
        assert parse_guard(repr(guard)) == guard

    @pytest.mark.parametrize("limit", [math.inf, math.nan])
    def test_a_non_finite_limit_is_refused_or_reads_back(self, limit: float) -> None:
        """A budget given inf or nan either refuses it or still has a repr that reads back."""
        try:
            guard = Deadline(limit)
        except PolicyError:
            return
        assert parse_guard(repr(guard)) == guard


class TestWhichChildFired:
    def test_anyof_reports_the_first_child_that_applies(self) -> None:
        """The Hit of an AnyOf names the leaf that fired, with that leaf's exit reason."""
        guard = MaxTurns(50) | RetriesExhausted(2)
        hit = fires(guard, turn=3, retries_in_a_row=2)
        assert hit.guard == RetriesExhausted(2)
        assert hit.exit_reason is ExitReason.UNRECOVERABLE_OUTPUT
        assert hit.guard.leaf_priority() is Priority.P0
        assert hit.guard.leaf_layer() == 4

    def test_anyof_prefers_the_earlier_child_when_both_apply(self) -> None:
        """When several children apply, the first in order is the one reported."""
        hit = fires((MaxTurns(5) | ToolErrorLimit(2)), turn=5, tool_errors_in_a_row=2)
        assert hit.guard == MaxTurns(5)
        assert hit.exit_reason is ExitReason.MAX_TURNS

    def test_anyof_does_not_apply_when_no_child_does(self) -> None:
        """An AnyOf of guards that do not apply returns None."""
        assert (MaxTurns(5) | ToolErrorLimit(2))(snapshot(turn=1)) is None

    def test_allof_applies_only_when_every_child_does(self) -> None:
        """An AllOf with one child not applying returns None."""
        guard = MaxTurns(5) & ToolErrorLimit(2)
        assert guard(snapshot(turn=5, tool_errors_in_a_row=1)) is None
        assert guard(snapshot(turn=5, tool_errors_in_a_row=2)) is not None

    def test_allof_reports_its_first_child_and_joins_the_reasons(self) -> None:
        """An AllOf that applies names its first child and gives every child's reason."""
        hit = fires((MaxTurns(5) & ToolErrorLimit(2)), turn=7, tool_errors_in_a_row=3)
        assert hit.guard == MaxTurns(5)
        assert "turn 7 of 5" in hit.reason
        assert "3 rounds of tool calls in a row failed" in hit.reason

    def test_a_nested_composite_reports_the_leaf(self) -> None:
        """Inside `a | (b & c)`, the Hit names the leaf b, not the AllOf."""
        guard = MaxTurns(99) | (RepeatedCall(3) & HasToolCalls())
        snap = snapshot(repeat_streak=3, executable=(call("search"),))
        hit = guard(snap)
        assert hit is not None
        assert hit.guard == RepeatedCall(3)
        assert hit.guard.leaf_priority() is Priority.P6
        assert hit.guard.leaf_layer() == 4

    def test_not_applies_exactly_when_its_child_does_not(self) -> None:
        """`~a` applies when a does not, with a reason naming a."""
        guard = ~HasToolCalls()
        hit = fires(guard)
        assert hit.reason == "not HasToolCalls()"
        assert guard(snapshot(executable=(call("search"),))) is None

    def test_a_function_guard_uses_a_returned_string_as_the_reason(self) -> None:
        """A plain function that returns a string applies with that string as the reason."""
        hit = fires((MaxTurns(50) | named), human_message="stop")
        assert hit.reason == "the user said stop"
        assert hit.exit_reason is ExitReason.INTERRUPTED

    def test_a_function_guard_defaults_to_a_p6_layer_5_boundary(self) -> None:
        """A plain function that returns True fires as a P6, layer 5 guard naming itself."""
        hit = fires(as_guard(late), turn=10)
        assert hit.guard.leaf_priority() is Priority.P6
        assert hit.guard.leaf_layer() == 5
        assert "late" in hit.reason
        assert as_guard(late)(snapshot(turn=9)) is None

    def test_a_composite_reports_its_first_childs_priority_and_layer(self) -> None:
        """Before anything fires, a composite is labelled with its first child's priority."""
        guard = ToolFailed() | MaxTurns(5)
        assert guard.leaf_priority() is Priority.P5
        assert guard.leaf_layer() == 2

    # A snapshot is a large draw: on a loaded machine generation trips the too_slow check.
    @settings(suppress_health_check=[HealthCheck.too_slow])
    @given(guards(), snapshots())
    def test_a_composite_applies_as_its_boolean_formula(
        self, guard: Guard, snap: RunSnapshot
    ) -> None:
        """An AnyOf applies iff a child does, an AllOf iff all do, a Not iff its child does not."""
        hit = guard(snap)
        if isinstance(guard, AnyOf):
            assert (hit is not None) == any(c(snap) is not None for c in guard.children)
        elif isinstance(guard, AllOf):
            assert (hit is not None) == all(c(snap) is not None for c in guard.children)
        elif isinstance(guard, Not):
            assert (hit is not None) == (guard.child(snap) is None)
        if hit is not None and not isinstance(guard, Not):
            assert not isinstance(hit.guard, AnyOf | AllOf)


class TestEquality:
    def test_guards_with_equal_parameters_are_equal_and_hash_alike(self) -> None:
        """Two guards built alike are equal and have the same hash."""
        assert MaxTurns(50) == MaxTurns(50)
        assert hash(MaxTurns(50)) == hash(MaxTurns(50))
        assert len({MaxTurns(50), MaxTurns(50), MaxTurns(51)}) == 2

    def test_different_parameters_or_classes_differ(self) -> None:
        """A different parameter or a different class makes a different guard."""
        assert MaxTurns(50) != MaxTurns(51)
        assert RepeatedCall(3) != MaxTurns(3)

    def test_composites_compare_by_kind_and_children(self) -> None:
        """`a | b` equals another `a | b`, but not `a & b` nor `b | a`."""
        a, b = MaxTurns(1), RepeatedCall(3)
        assert a | b == MaxTurns(1) | RepeatedCall(3)
        assert hash(a | b) == hash(MaxTurns(1) | RepeatedCall(3))
        assert a | b != a & b
        assert a | b != b | a

    def test_a_guard_is_not_equal_to_its_repr(self) -> None:
        """A guard never equals a non-guard, even its own repr."""
        assert MaxTurns(1) != "MaxTurns(1)"


class TestParseGuard:
    def test_parses_a_chain_into_the_same_objects(self) -> None:
        """A policy file's string builds the guard code would build."""
        text = "TokenBudget(200_000) | CostBudget(0.5) | MaxTurns(50)"
        assert parse_guard(text) == TokenBudget(200_000) | CostBudget(0.5) | MaxTurns(50)

    def test_parses_keywords_not_and_parentheses(self) -> None:
        """Keyword arguments, `~`, `&` and parentheses are understood."""
        guard = parse_guard("~(MaxTurns(limit=3) | Otherwise(reason='x')) & HasToolCalls()")
        assert guard == ~(MaxTurns(3) | Otherwise("x")) & HasToolCalls()

    @pytest.mark.parametrize(
        ("text", "said"),
        [
            # An unknown name: named, with the known guards listed.
            ("MaxTurns(5) | Nope(1)", r"unknown guard 'Nope'.*known: .*MaxTurns"),
            # Arguments that are names or calls: nothing is evaluated.
            ("MaxTurns(limit)", "literals"),
            ("MaxTurns(__import__('os').getpid())", "literals"),
            # Unbalanced or empty text is not an expression.
            ("MaxTurns(5", "not an expression"),
            ("", "not an expression"),
            # Wrong arity or an invalid value: the guard is named.
            ("MaxTurns(1, 2)", "cannot build MaxTurns"),
            ("RepeatedCall(0)", "cannot build RepeatedCall"),
        ],
    )
    def test_rejects_what_it_cannot_build(self, text: str, said: str) -> None:
        """Text that does not read as a guard is a PolicyError saying why."""
        with pytest.raises(PolicyError, match=said):
            parse_guard(text)

    @pytest.mark.parametrize(
        "text",
        [
            "MaxTurns(5) or RepeatedCall(3)",
            "os.system('true')",
            "MaxTurns",
            "MaxTurns(5) ^ RepeatedCall(3)",
            "MaxTurns(5) | 3",
            "[MaxTurns(5)]",
            "lambda s: True",
        ],
    )
    def test_rejects_other_syntax(self, text: str) -> None:
        """Anything but Guard(args), `|`, `&`, `~` and parentheses is a PolicyError quoting it."""
        with pytest.raises(PolicyError, match="unsupported syntax") as info:
            parse_guard(text)
        assert text in str(info.value)
