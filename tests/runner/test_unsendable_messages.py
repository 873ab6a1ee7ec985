"""`af.run` refuses messages that cannot be sent to the model as JSON, before any model call.

A message holding bytes, a set, NaN, a key that is not a str, a lone surrogate or a loop
was sent as it was: the provider call failed, was retried five times as if the provider had
failed, and the run ended PROVIDER_ERROR. Now `af.run` and `af.arun` raise `DataError`
naming the message and the key at the call, and the scripted server serves nothing.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import agentfsm as af
from agentfsm.exceptions import DataError
from agentfsm.testing import ScriptedServer
from agentfsm.testing.scripted import say
from tests.conftest import LITELLM_CLIENT

pytestmark = LITELLM_CLIENT


def _loop() -> list[Any]:
    looped: list[Any] = []
    looped.append(looped)
    return looped


UNSENDABLE = st.one_of(
    st.binary(max_size=6).map(lambda v: (v, "bytes")),
    st.sets(st.integers(), max_size=3).map(lambda v: (v, "set")),
    st.complex_numbers(allow_nan=False).map(lambda v: (v, "complex")),
    st.sampled_from([math.nan, math.inf, -math.inf]).map(lambda v: (v, repr(v))),
    st.one_of(st.integers(), st.none(), st.booleans()).map(
        lambda k: ({k: "v"}, f"key of type {type(k).__name__}")
    ),
    st.integers(0xD800, 0xDFFF).map(lambda c: (f"a{chr(c)}", "lone surrogate")),
    st.just(0).map(lambda _: (_loop(), "contains itself")),
)


class Note(BaseModel):
    """A pydantic object in a message: the SDK encodes it itself, so it is let through."""

    text: str


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(
    bad=UNSENDABLE,
    index=st.integers(0, 2),
    key=st.sampled_from(["content", "name", "extra"]),
    asynchronous=st.booleans(),
)
def test_unsendable_values_are_refused_at_the_call(
    bad: tuple[Any, str], index: int, key: str, asynchronous: bool
) -> None:
    """DataError names the message index, the key and what the value is; no model call."""
    value, says = bad
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"} for _ in range(2)]
    messages.insert(index, {"role": "user", "content": "x", key: value})
    with ScriptedServer([say("never")]) as server:
        options = {"api_base": server.openai_base, "api_key": "sk-local"}

        def call() -> object:
            if asynchronous:
                return asyncio.run(af.arun("openai/scripted", messages, **options))
            return af.run("openai/scripted", messages, **options)

        with pytest.raises(DataError) as caught:
            call()
        assert server.remaining == 1  # nothing was sent
    said = str(caught.value)
    assert said.startswith(f"messages[{index}][{key!r}]"), said
    assert says in said, said


def test_objects_an_sdk_encodes_are_left_to_it() -> None:
    """A pydantic model inside a message is not refused here (the client library encodes it)."""
    with ScriptedServer([say("done")]) as server:
        result = af.run(
            "openai/scripted",
            [{"role": "user", "content": "hi", "metadata": Note(text="kept")}],
            api_base=server.openai_base,
            api_key="sk-local",
        )
    assert result.exit_reason is af.ExitReason.COMPLETED
