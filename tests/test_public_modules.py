"""Public names report the public module users import them from (`agentfsm.Decision`, not
`agentfsm._model.types.Decision`): in reprs, in pickles, on the docs pages.

`agentfsm._public.publish`, called once at the end of each public package, sets `__module__`;
these tests walk every public `__all__`, so the next class added is covered, and prove that
pydantic still builds, validates and dumps the renamed models and that pickles name the public
module and load back.
"""

from __future__ import annotations

import importlib
import io
import json
import pickle
import subprocess
import sys
from enum import Enum
from types import FunctionType, ModuleType
from typing import Any

import pytest
from pydantic import BaseModel

import agentfsm as af
import agentfsm.durable as durable
import agentfsm.exceptions as exceptions
import agentfsm.providers as providers
import agentfsm.testing as testing
from agentfsm._model.records import Record
from agentfsm._public import class_source, defined_in, publish
from tests.docs.scripts import load

GEN = load("gen_api")
PUBLIC = GEN.public_modules()


def _exported() -> list[tuple[str, str, Any]]:
    """(public module, name, value) for every class and function in a public `__all__`."""
    found = []
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)  # resolves the lazy names of `agentfsm` too
            if isinstance(value, type | FunctionType) and value.__module__.startswith("agentfsm"):
                found.append((module_name, name, value))
    return found


EXPORTED = _exported()


def _ids(entry: tuple[str, str, Any]) -> str:
    return f"{entry[0]}.{entry[1]}"


def test_the_walk_sees_the_private_definitions() -> None:
    """The walk is not vacuous: it covers names the private modules define."""
    names = {f"{m}.{n}" for m, n, _ in EXPORTED}
    assert {"agentfsm.Decision", "agentfsm.run", "agentfsm.guards.MaxTurns"} <= names
    assert defined_in(af.Decision) == "agentfsm._model.types"
    assert defined_in(af.RunResult) == "agentfsm._runner.session"


@pytest.mark.parametrize("entry", EXPORTED, ids=_ids)
def test_every_public_name_reports_a_public_module(entry: tuple[str, str, Any]) -> None:
    """Its `__module__` is one of the documented public modules (no `_` segment), and that
    module holds it under its qualified name, which is how a pickle finds it again."""
    _, _, value = entry
    assert value.__module__ in PUBLIC, value.__module__
    assert not any(part.startswith("_") for part in value.__module__.split("."))
    assert getattr(importlib.import_module(value.__module__), value.__qualname__) is value


def test_reprs_show_the_public_path() -> None:
    assert repr(af.Decision) == "<class 'agentfsm.Decision'>"
    assert repr(af.guards.MaxTurns) == "<class 'agentfsm.guards.MaxTurns'>"
    assert af.State.__module__ == "agentfsm"
    assert providers.Provider.__module__ == "agentfsm.providers"
    assert af.StreamAccumulator.__module__ == "agentfsm.providers"


def test_the_source_of_a_published_class_is_still_found() -> None:
    """`inspect.getsource` looks a class up by `__module__`; `class_source` (the docs' reader)
    finds it in the module that defines it."""
    assert class_source(af.Decision).startswith("class Decision(")
    assert class_source(af.guards.MaxTurns).startswith("class MaxTurns(")


_FRESH = """
import json, sys
sys.path.insert(0, {root!r})
import importlib
from pydantic import BaseModel
from agentfsm._model.records import Record, validator_of
from tests.docs.scripts import load

gen = load("gen_api")
models = {{}}
for name in gen.public_modules():
    module = importlib.import_module(name)
    for n in module.__all__:
        value = getattr(module, n)
        if isinstance(value, type) and issubclass(value, (BaseModel, Record)):
            models[value] = f"{{value.__module__}}.{{value.__qualname__}}"
out = {{}}
for model, name in models.items():
    schema = model.model_json_schema()
    # A record (Decision, RunSnapshot) is checked by a pydantic model made from its fields.
    checked = validator_of(model) if issubclass(model, Record) else model
    out[name] = [checked.__pydantic_complete__, json.loads(json.dumps(schema)) == schema]
print(json.dumps(out))
"""


def test_every_public_model_builds_its_schema_in_a_fresh_interpreter() -> None:
    """The models defer their build; pydantic resolves what is left then in
    `sys.modules[cls.__module__]`. In a fresh interpreter (nothing built before publishing),
    every public model's schema builds and round-trips through JSON."""
    root = str(GEN.ROOT)
    out = subprocess.run(
        [sys.executable, "-c", _FRESH.format(root=root)],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    ).stdout
    built = json.loads(out.strip().splitlines()[-1])
    assert {"agentfsm.Decision", "agentfsm.Policy", "agentfsm.RunResult"} <= set(built)
    assert "agentfsm.durable.DurableResult" in built
    assert all(not name.split(".")[1].startswith("_") for name in built)
    assert built == {name: [True, True] for name in built}


def test_a_private_module_loaded_first_is_published_by_the_next_public_import() -> None:
    """A lazy name whose module some other import loaded first is published by the next
    public package's `publish`, before `agentfsm.<name>` is ever touched."""
    code = (
        "import agentfsm._runner.loop as loop\n"
        "import agentfsm.testing\n"
        "print(loop.RunResult.__module__, loop.run.__module__, loop.arun.__module__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=GEN.ROOT
    ).stdout.split()
    assert out == ["agentfsm", "agentfsm", "agentfsm"]


def _samples() -> dict[type[BaseModel], BaseModel]:
    call = af.ToolCall(id="c1", name="read", arguments={"path": "a"})
    decision = af.Decision(
        action=af.Action.EXECUTE_TOOLS,
        priority=af.Priority.P4,
        layer=1,
        reason="calls",
        guard="HasToolCalls()",
        tool_calls=[call],
    )
    return {
        af.Decision: decision,
        af.ModelTurn: testing.turn("hi", [call], usage=(3, 4)),
        af.ToolCall: call,
        af.ToolResult: af.ToolResult(call_id="c1", content="ok"),
        af.Usage: af.Usage(input_tokens=3, output_tokens=4),
        af.Policy: af.Policy(max_turns=3, permissions={"rm": "deny"}),
        af.guards.LoopLadder: af.guards.LoopLadder(
            warn=2, tools={"read": af.guards.ToolLoops(stop=0, volatile=["offset"])}
        ),
        af.guards.ToolLoops: af.guards.ToolLoops(ask=4, words="query"),
        af.RunSnapshot: testing.snapshot(turn=2),
        af.Left: af.Left(tokens=10, turns=2, spent=af.ExitReason.TOKEN_BUDGET, why="spent"),
        af.Hold: af.Hold(run_id="r", tokens=3, cost=0.5),
        af.ShadowVerdict: af.ShadowVerdict(
            call_id="c1", tool="read", enforced="allow", shadow="deny", source="rule 'deny read'"
        ),
        af.ToolSpec: af.ToolSpec(name="read", description="reads"),
        af.Approval: af.Approval(
            id="a1", tool="read", scope="uses", pattern="path=a*", uses_left=2
        ),
        af.RunResult: af.RunResult(exit_reason=af.ExitReason.COMPLETED, text="done"),
        testing.Reply: testing.say("hello"),
        testing.ScriptedCall: testing.scripted_call("read", {"path": "a"}),
        durable.DurableResult: durable.DurableResult(
            run_id="r",
            exit_reason=af.ExitReason.COMPLETED,
            text="done",
            turns=1,
            decisions=[decision],
            messages=[],
            events=[],
        ),
    }


SAMPLES = _samples()


class _Recorder(pickle.Unpickler):
    """Loads a pickle, keeping each `module.name` it looks up (every class and function it
    refers to by name)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.seen: set[str] = set()

    def find_class(self, module: str, name: str) -> Any:
        self.seen.add(f"{module}.{name}")
        return super().find_class(module, name)


def _globals_named(data: bytes) -> set[str]:
    recorder = _Recorder(data)
    recorder.load()
    return recorder.seen


def _private_modules(data: bytes) -> list[str]:
    """The agentfsm names a pickle looks up in a module with a `_` segment."""
    return [
        name
        for name in _globals_named(data)
        if name.startswith("agentfsm.")
        and any(part.startswith("_") for part in name.split(".")[:-1])
    ]


def test_every_public_model_has_a_sample() -> None:
    """A public model added later without a sample here fails, so it is covered too."""
    models = {
        v for _, _, v in EXPORTED if isinstance(v, type) and issubclass(v, BaseModel | Record)
    }
    assert models == set(SAMPLES)


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
@pytest.mark.parametrize("model", list(SAMPLES), ids=lambda m: m.__qualname__)
def test_every_public_model_validates_dumps_and_pickles(
    model: type[BaseModel], protocol: int
) -> None:
    sample = SAMPLES[model]
    assert model.model_validate(sample.model_dump()) == sample
    assert model.model_validate_json(sample.model_dump_json()) == sample
    data = pickle.dumps(sample, protocol=protocol)
    assert pickle.loads(data) == sample
    assert f"{model.__module__}.{model.__qualname__}" in _globals_named(data)
    assert _private_modules(data) == []


ENUMS = [v for _, _, v in EXPORTED if isinstance(v, type) and issubclass(v, Enum)]


def test_the_enums_are_found() -> None:
    assert {af.Action, af.State, af.ExitReason, af.FinishReason, af.Priority} <= set(ENUMS)
    assert providers.Provider in ENUMS


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.__qualname__)
def test_enum_members_pickle_by_their_public_module(enum: type[Enum]) -> None:
    for member in enum:
        data = pickle.dumps(member, protocol=pickle.HIGHEST_PROTOCOL)
        assert pickle.loads(data) is member
        assert _globals_named(data) == {f"{enum.__module__}.{enum.__qualname__}"}


ERRORS = [
    v
    for module in (exceptions, durable)
    for v in vars(module).values()
    if isinstance(v, type) and issubclass(v, af.AgentFSMError) and v.__name__ in module.__all__
]


def test_the_errors_are_found() -> None:
    assert {af.AgentFSMError, exceptions.DataError, durable.StrandedRunsError} <= set(ERRORS)


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: e.__qualname__)
def test_every_public_error_pickles_with_its_context(error: type[af.AgentFSMError]) -> None:
    raised = error("bad thing", state="execute", turn=3, where="here")
    data = pickle.dumps(raised, protocol=pickle.HIGHEST_PROTOCOL)
    again = pickle.loads(data)
    assert type(again) is error
    assert str(again) == str(raised)
    assert (again.message, again.state, again.turn, again.details) == (
        "bad thing",
        "execute",
        3,
        {"where": "here"},
    )
    assert f"{error.__module__}.{error.__qualname__}" in _globals_named(data)
    assert _private_modules(data) == []


FUNCTIONS = [v for _, _, v in EXPORTED if isinstance(v, FunctionType)]


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f"{f.__module__}.{f.__qualname__}")
def test_public_functions_pickle_by_reference(function: FunctionType) -> None:
    assert pickle.loads(pickle.dumps(function)) is function


def test_a_module_value_in_an_all_is_not_walked() -> None:
    """`af.guards` (a module in `__all__`) is neither renamed nor walked as a class."""
    assert isinstance(af.guards, ModuleType)
    assert af.guards.__name__ == "agentfsm.guards"


_FORWARD = """
from __future__ import annotations
from pydantic import BaseModel, ConfigDict

class Outer(BaseModel):
    model_config = ConfigDict(defer_build=True)
    inner: _Inner

class _Inner(BaseModel):
    value: int
"""


def test_a_model_with_an_open_forward_reference_is_resolved_before_it_moves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A deferred model whose annotation names a private class defined after it cannot resolve
    that name in the public module; `publish` resolves it first, in the module defining both."""
    private = ModuleType("agentfsm._forward_probe")
    public = ModuleType("agentfsm.forward_probe")
    monkeypatch.setitem(sys.modules, private.__name__, private)
    monkeypatch.setitem(sys.modules, public.__name__, public)
    exec(compile(_FORWARD, "<probe>", "exec"), vars(private))  # our own text, run as a module
    outer = private.Outer
    assert outer.__pydantic_fields_complete__ is False
    public.Outer = outer  # type: ignore[attr-defined]
    publish(public.__name__, vars(public), ["Outer"])
    assert outer.__module__ == "agentfsm.forward_probe"
    assert defined_in(outer) == "agentfsm._forward_probe"
    assert outer.model_validate({"inner": {"value": 1}}).inner.value == 1
    assert "_Inner" in json.dumps(outer.model_json_schema())
