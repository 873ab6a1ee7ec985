"""Data the durable database cannot store is refused at the call that gave it, and nothing is
written.

`durable.Client(...).start("support", [{"": b""}], run_id="run-1")` raised json's own
TypeError from inside DBOS. Every entry point that writes what a caller gives (a run's
messages, its id, an agent's name, a reply's text) now raises agentfsm's error naming
the message, the key and the type; the run id stays unknown to the database. DBOS runs in
this test process on a SQLite file.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentfsm import durable
from agentfsm._model.limits import MAX_DEPTH
from agentfsm.durable import Client, DurableAgent
from agentfsm.durable._data import check_stored
from agentfsm.durable._serializer import JsonSerializer
from agentfsm.exceptions import DataError, DefinitionError, InvalidInputError

# DBOS launches in this process (one per process at a time): one worker runs the modules that
# do, one after the other. DBOS's own threads (its queue poller) draw from the `random` module
# while hypothesis draws an example; hypothesis takes that for a strategy using `random`.
pytestmark = [
    pytest.mark.xdist_group("dbos-in-process"),
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning"),
]

_ids = itertools.count(1)


@dataclass(frozen=True)
class Unstorable:
    """A value the database cannot store as given, and the words its error must hold."""

    value: Any
    says: str

    def __repr__(self) -> str:  # hypothesis prints it: a loop's repr would be endless
        return f"Unstorable({self.says!r})"


def _deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


def _loop(kind: str) -> Any:
    if kind == "list":
        looped: list[Any] = []
        looped.append(looped)
        return looped
    mapping: dict[str, Any] = {}
    mapping["self"] = [mapping]
    return mapping


class Opaque:
    """An object of the caller's own type."""


UNSTORABLE: st.SearchStrategy[Unstorable] = st.one_of(
    st.binary(max_size=8).map(lambda v: Unstorable(v, "bytes")),
    st.binary(max_size=8).map(lambda v: Unstorable(bytearray(v), "bytearray")),
    st.sets(st.integers(), max_size=3).map(lambda v: Unstorable(v, "set")),
    st.frozensets(st.text(max_size=3), max_size=3).map(lambda v: Unstorable(v, "frozenset")),
    st.builds(Opaque).map(lambda v: Unstorable(v, "Opaque")),
    st.complex_numbers(allow_nan=False).map(lambda v: Unstorable(v, "complex")),
    st.sampled_from([math.nan, math.inf, -math.inf]).map(lambda v: Unstorable(v, repr(v))),
    st.one_of(st.integers(), st.none(), st.booleans(), st.floats(allow_nan=False)).map(
        lambda k: Unstorable({k: "v"}, f"key of type {type(k).__name__}")
    ),
    st.tuples(st.text(max_size=3), st.integers(0x0D800, 0x0DFFF), st.text(max_size=3)).map(
        lambda t: Unstorable(t[0] + chr(t[1]) + t[2], "lone surrogate")
    ),
    st.integers(MAX_DEPTH, MAX_DEPTH + 400).map(
        lambda n: Unstorable(_deep(n), f"nests deeper than {MAX_DEPTH} levels")
    ),
    st.sampled_from(["list", "dict"]).map(lambda k: Unstorable(_loop(k), "contains itself")),
    st.integers(5_000, 6_000).map(lambda n: Unstorable(10**n, "int too long")),
)
"""Non-JSON values: bytes, sets, objects, NaN and infinities, non-str keys, lone surrogates,
nesting past `MAX_DEPTH`, loops, and ints too long to write as text."""

GOOD = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"])})
KEYS = st.text(st.characters(categories=["L", "N"]), min_size=0, max_size=8)


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int, str, Unstorable]:
    """Good messages with one bad value at `[index][key]`, maybe inside a few lists."""
    messages: list[dict[str, Any]] = [
        {**m, "content": "fine"} for m in draw(st.lists(GOOD, max_size=3))
    ]
    index = draw(st.integers(0, len(messages)))
    key = draw(KEYS.filter(lambda k: k not in ("role",)))
    bad = draw(UNSTORABLE)
    value: Any = bad.value
    for _ in range(draw(st.integers(0, 2))):
        value = [value] if draw(st.booleans()) else ["ok", value]
    messages.insert(index, {"role": "user", key: value})
    return messages, index, key, bad


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """DBOS launched in this process on a fresh SQLite file, with the agent `support`."""
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('unstorable')) / 'runs.sqlite'}"
    durable.launch([DurableAgent("support", "openai/scripted")], database_url=url)
    try:
        yield url
    finally:
        durable.shutdown()


@pytest.fixture(scope="module")
def client(launched: str) -> Iterator[Client]:
    """A client of the same database, as a front end holds one."""
    with Client(launched) as front:
        yield front


def _unknown(client: Client, run_id: str) -> None:
    """The database holds no run `run_id`: nothing of the refused call was written."""
    with pytest.raises(InvalidInputError, match="no durable run"):
        client.status(run_id)
    assert run_id not in client.pending()


_SETTINGS = settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])


class TestMessagesTheDatabaseCannotStore:
    def test_the_reported_example(self, client: Client) -> None:
        """The issue's call: a DataError naming message 0, key '' and bytes; no run recorded."""
        with pytest.raises(DataError) as caught:
            client.start("support", [{"": b""}], run_id="run-1")
        assert "start: messages[0]['']" in str(caught.value)
        assert "bytes" in str(caught.value)
        assert caught.value.details["problems"][0][0] == "messages[0]['']"
        _unknown(client, "run-1")

    @_SETTINGS
    @given(case=conversations(), through_client=st.booleans())
    @example(
        case=([{"role": "user", "content": {1, 2}}], 0, "content", Unstorable({1, 2}, "set")),
        through_client=False,
    )
    def test_any_unstorable_value_is_named_where_it_is(
        self,
        launched: str,
        client: Client,
        case: tuple[list[dict[str, Any]], int, str, Unstorable],
        through_client: bool,
    ) -> None:
        """In `start` and `Client.start`: DataError with the message's index, the key and
        what the value is; the run id given stays unknown to the database."""
        messages, index, key, bad = case
        run_id = f"bad-{next(_ids)}"
        start = client.start if through_client else durable.start
        with pytest.raises(DataError) as caught:
            start("support", messages, run_id=run_id)
        said = str(caught.value)
        assert said.startswith(f"start: messages[{index}][{key!r}]"), said
        assert bad.says in said, said
        assert "nothing was recorded" in said
        _unknown(client, run_id)

    @_SETTINGS
    @given(bad=UNSTORABLE)
    def test_a_str_conversation_with_a_lone_surrogate_or_any_value_as_content(
        self, client: Client, bad: Unstorable
    ) -> None:
        """The value alone as a message's content, through the client: named the same way."""
        run_id = f"bad-{next(_ids)}"
        with pytest.raises(DataError, match=r"messages\[0\]\['content'\]"):
            client.start("support", [{"role": "user", "content": bad.value}], run_id=run_id)
        _unknown(client, run_id)


class TestIdsAndRepliesTheDatabaseCannotStore:
    @_SETTINGS
    @given(
        text=st.tuples(st.text(max_size=4), st.integers(0xD800, 0xDFFF)).map(
            lambda t: t[0] + chr(t[1])
        )
    )
    def test_lone_surrogates_in_ids_names_and_replies(
        self, launched: str, client: Client, text: str
    ) -> None:
        """A run id, agent name, question or reply text UTF-8 cannot encode is refused with
        agentfsm's error before the database is asked (it failed in the driver)."""
        for call in (
            lambda: durable.start("support", "hi", run_id=text),
            lambda: client.start("support", "hi", run_id=text),
            lambda: client.start(text, "hi"),
            lambda: durable.status(text),
            lambda: client.asked(text),
            lambda: client.reply("run-x", True, text, question="run-x/q1"),
            lambda: durable.reply("run-x", True, question=text),
            lambda: durable.recover(text),
        ):
            with pytest.raises(InvalidInputError, match="lone surrogate"):
                call()
        with pytest.raises(DefinitionError, match="lone surrogate"):
            DurableAgent(text, "openai/scripted")
        with pytest.raises(DefinitionError, match="lone surrogate"):
            durable.launch([], database_url="sqlite:///x.sqlite", executor_id=text)
        assert all(not run_id.startswith(text) for run_id in client.pending())


class TestTheCheck:
    @given(
        value=st.recursive(
            st.none()
            | st.booleans()
            | st.integers()
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=4), inner, max_size=3)
            ),
            max_leaves=12,
        )
    )
    def test_json_data_passes_and_reads_back_equal(self, value: Any) -> None:
        """What the check lets through, the serializer writes and reads back unchanged."""
        check_stored(value, "test", "value")
        serializer = JsonSerializer()
        assert serializer.deserialize(serializer.serialize(value)) == value

    @given(bad=UNSTORABLE.filter(lambda b: _json_refuses({"v": b.value})))
    def test_the_serializer_raises_agentfsm_error_not_json_s(self, bad: Unstorable) -> None:
        """A value reaching the serializer unchecked (a step's output) that json refuses is a
        DataError naming it, where json raised TypeError, ValueError or RecursionError.
        (json writes NaN, non-str keys and lone surrogates without complaint, and a recorded
        step holding NaN stays readable: the entry points refuse those before this.)"""
        with pytest.raises(DataError, match=re.escape("a value to write['v']")):
            JsonSerializer().serialize({"v": bad.value})


def _json_refuses(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return True
    return False
