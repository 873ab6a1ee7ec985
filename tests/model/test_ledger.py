"""The run tree's ledger: live charges up the path, what is left, holds that never overbook."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentfsm as af
from agentfsm._model.ledger import Hold, Ledger, Left
from agentfsm._model.types import ExitReason, Usage
from agentfsm.exceptions import InvalidInputError


def tokens(n: int, cost: float | None = None) -> Usage:
    return Usage(input_tokens=n, output_tokens=0, cost=cost)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TestCharges:
    """A charge reaches every account above the run at once; `left` is the least on the path."""

    def test_a_childs_charge_reaches_the_root_and_its_listener(self) -> None:
        """The child spends 60 of the root's 100: the root's listener hears it, 40 are left."""
        ledger = Ledger()
        root = ledger.open(af.Policy(max_tokens=100), run_id="root")
        child = ledger.open(af.Policy(), run_id="child", parent=root)
        heard: list[Usage] = []
        root.listen(heard.append)
        child.listen(lambda u: heard.append(Usage(input_tokens=-1)))  # never told of its own
        child.charge(tokens(60))
        assert heard == [tokens(60)]
        assert child.left().tokens == 40
        assert child.left().spent is None

    def test_the_least_on_the_path_binds(self) -> None:
        """Root 1000, parent 100, child 500 of its own: the child has 100 - spent."""
        ledger = Ledger()
        root = ledger.open(af.Policy(max_tokens=1000), run_id="root")
        mid = ledger.open(af.Policy(max_tokens=100), run_id="mid", parent=root)
        leaf = ledger.open(af.Policy(max_tokens=500), run_id="leaf", parent=mid)
        leaf.charge(tokens(30))
        assert (leaf.left().tokens, mid.left().tokens, root.left().tokens) == (70, 70, 970)
        leaf.charge(tokens(70))
        left = leaf.left()
        assert left.spent is ExitReason.TOKEN_BUDGET
        assert "'mid' has used 100 tokens of its budget of 100" in left.why
        assert root.left().spent is None

    def test_cost_and_time_are_budgets_of_the_tree(self) -> None:
        """A cost cap and a deadline above the run are spent for it too."""
        clock = Clock()
        ledger = Ledger(clock)
        root = ledger.open(af.Policy(max_cost=0.5, max_seconds=10), run_id="root")
        child = ledger.open(af.Policy(), run_id="child", parent=root)
        child.charge(tokens(1, cost=0.2))
        assert child.left().cost == pytest.approx(0.3)
        clock.now = 4.0
        assert child.left().seconds == pytest.approx(6.0)
        child.charge(tokens(1, cost=0.3))
        assert child.left().spent is ExitReason.COST_BUDGET
        clock.now = 11.0
        assert ledger.open(af.Policy(), run_id="x", parent=root).left().spent is (
            ExitReason.COST_BUDGET
        )

    def test_left_reads_as_a_line_for_the_model(self) -> None:
        """Left.text() names what is left, turns first."""
        left = Left(tokens=1200, cost=0.05, seconds=40.2, turns=2)
        assert left.text() == "Budget left: 2 model turns, 1,200 tokens, $0.0500, 40s."
        assert Left().text() == "Budget left: no limit."


class TestHolds:
    """A hold counts against every account on the path until settled."""

    def test_a_hold_that_does_not_fit_is_refused_and_holds_nothing(self) -> None:
        """60 held of 100: a second 60 is refused, 40 fits; settling charges what was spent."""
        ledger = Ledger()
        root = ledger.open(af.Policy(max_tokens=100), run_id="root")
        a = ledger.open(af.Policy(), run_id="a", parent=root)
        b = ledger.open(af.Policy(), run_id="b", parent=root)
        hold = a.reserve(tokens=60)
        assert isinstance(hold, Hold)
        assert b.reserve(tokens=60) is None
        assert root.left().tokens == 40
        assert b.reserve(tokens=40) is not None
        a.settle(hold, tokens(10))
        assert root.left().tokens == 100 - 10 - 40

    def test_a_hold_is_settled_once(self) -> None:
        """Settling twice, or another account's hold, raises InvalidInputError."""
        ledger = Ledger()
        root = ledger.open(af.Policy(max_tokens=100), run_id="root")
        other = ledger.open(af.Policy(), run_id="o", parent=root)
        hold = root.reserve(tokens=5)
        assert hold is not None
        with pytest.raises(InvalidInputError, match="reserved and has not settled"):
            other.settle(hold)
        root.settle(hold)
        with pytest.raises(InvalidInputError, match="reserved and has not settled"):
            root.settle(hold)
        assert root.left().tokens == 100

    @given(st.lists(st.integers(0, 40), min_size=1, max_size=24), st.integers(0, 200))
    def test_parallel_holds_never_overbook(self, wanted: list[int], cap: int) -> None:
        """Threads reserving at once: what they hold together never passes the cap."""
        ledger = Ledger()
        root = ledger.open(af.Policy(max_tokens=cap), run_id="root")
        kids = [ledger.open(af.Policy(), run_id=f"k{i}", parent=root) for i in wanted]
        got: list[Hold] = []
        start = threading.Barrier(len(kids))

        def take(account: object, n: int) -> None:
            start.wait()
            hold = account.reserve(tokens=n)  # type: ignore[attr-defined]
            if hold is not None:
                got.append(hold)

        threads = [
            threading.Thread(target=take, args=(k, n)) for k, n in zip(kids, wanted, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(h.tokens for h in got) <= cap
        assert root.left().tokens == cap - sum(h.tokens for h in got)


class TestBadInput:
    """Bad arguments raise InvalidInputError naming them; the ledger is unchanged."""

    def test_bad_arguments(self) -> None:
        ledger = Ledger()
        root = ledger.open(af.Policy(max_tokens=10), run_id="root")
        with pytest.raises(InvalidInputError, match="run_id must be a non-empty str"):
            ledger.open(af.Policy(), run_id="")
        with pytest.raises(InvalidInputError, match="parent must be an Account of this ledger"):
            Ledger().open(af.Policy(), run_id="x", parent=root)
        with pytest.raises(InvalidInputError, match=r"charge\(\) takes a Usage, not dict"):
            root.charge({"input_tokens": 3})  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match=r"reserve\(tokens=\.\.\.\) must be an int"):
            root.reserve(tokens=-1)
        with pytest.raises(InvalidInputError, match=r"reserve\(cost=\.\.\.\) must be a number"):
            root.reserve(cost=float("nan"))
        with pytest.raises(InvalidInputError, match="listener must be a function"):
            root.listen(3)  # type: ignore[arg-type]
        assert root.left().tokens == 10


class TestTreeProperty:
    @given(
        st.lists(st.integers(0, 10), min_size=1, max_size=8),
        st.lists(st.tuples(st.integers(0, 8), st.integers(0, 50)), max_size=20),
        st.lists(st.none() | st.integers(0, 300), min_size=9, max_size=9),
    )
    def test_left_is_the_least_cap_on_the_path_less_the_subtree_spend(
        self, parents: list[int], charges: list[tuple[int, int]], caps: list[int | None]
    ) -> None:
        """Any tree, any charges: each account has spent its own and its descendants' charges,
        and a run's tokens left is the least of cap minus spent over its path to the root."""
        ledger = Ledger()
        accounts = [ledger.open(af.Policy(max_tokens=caps[0]), run_id="a0")]
        above: list[int | None] = [None]
        for i, p in enumerate(parents, start=1):
            parent = p % i  # an account made before this one
            accounts.append(
                ledger.open(af.Policy(max_tokens=caps[i]), run_id=f"a{i}", parent=accounts[parent])
            )
            above.append(parent)
        spent = [0] * len(accounts)
        for who, n in charges:
            who %= len(accounts)
            accounts[who].charge(tokens(n))
            node: int | None = who
            while node is not None:
                spent[node] += n
                node = above[node]
        for i, account in enumerate(accounts):
            path, node = [], i
            while node is not None:
                path.append(node)
                node = above[node]
            room = [caps[j] - spent[j] for j in path if caps[j] is not None]  # type: ignore[operator]
            assert account.left().tokens == (min(room) if room else None)
            over = any(caps[j] is not None and spent[j] >= caps[j] for j in path)  # type: ignore[operator]
            assert (account.left().spent is ExitReason.TOKEN_BUDGET) == over
