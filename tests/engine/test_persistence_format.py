"""The checkpoint format is one model: its JSON Schema is committed, and older dumps still load."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from jsonschema import Draft202012Validator

import agentfsm as af
from agentfsm._engine.persistence import RunDump, dump_schema
from agentfsm.exceptions import CheckpointError
from agentfsm.testing import call, turn

DOCS = Path(__file__).resolve().parents[2] / "docs"

OLDER_DUMP = """\
{
 "format": "agentfsm.run",
 "version": 1,
 "run_id": "old-1",
 "policy": {
  "data": {
   "max_turns": 9,
   "max_tool_calls": null,
   "max_retries": 2,
   "max_consecutive_tool_errors": 5,
   "repeat_threshold": 3,
   "on_repeat": "feedback",
   "no_progress_threshold": 6,
   "max_tokens": null,
   "max_cost": null,
   "on_unknown_price": "warn",
   "max_seconds": null,
   "max_context_tokens": null,
   "on_incomplete": "continue",
   "on_deny": "feedback",
   "permissions": {
    "write_file": "ask"
   },
   "guards": [],
   "handoffs": [],
   "final_tools": [],
   "permission_rules": []
  },
  "code": []
 },
 "tools": [
  {
   "name": "search",
   "description": "",
   "parameters": null,
   "callable": false
  },
  {
   "name": "write_file",
   "description": "",
   "parameters": null,
   "callable": false
  }
 ],
 "engine": "compiled",
 "last_output": {
  "text": "",
  "tool_calls": [
   {
    "id": "s2",
    "name": "search",
    "arguments": {
     "q": "y"
    },
    "raw_arguments": null,
    "error": null,
    "kind": "function"
   },
   {
    "id": "w1",
    "name": "write_file",
    "arguments": {
     "path": "a"
    },
    "raw_arguments": null,
    "error": null,
    "kind": "function"
   }
  ],
  "finish_reason": "tool_calls",
  "raw_finish_reason": "tool_calls",
  "truncated": false,
  "usage": null,
  "refusal": null,
  "reasoning": null,
  "error": null,
  "provider": null,
  "model": null,
  "server_tool_calls": 0
 },
 "run": {
  "clock": null,
  "context_tokens": 15,
  "cost": 0.0,
  "episode": 1,
  "episode_start": 0,
  "exit_reason": null,
  "incomplete": 0,
  "interjection": null,
  "last_call": {
   "t": [
    "search",
    {
     "t": [
      {
       "t": [
        "q",
        "x"
       ]
      }
     ]
    }
   ]
  },
  "last_results": [
   [
    {
     "t": [
      {
       "t": [
        "search",
        {
         "t": [
          {
           "t": [
            "q",
            "x"
           ]
          }
         ]
        }
       ]
      }
     ]
    },
    [
     [
      false,
      {
       "hits": [
        1,
        2
       ]
      }
     ]
    ]
   ]
  ],
  "pending": [],
  "pending_allowed": [
   {
    "id": "s2",
    "name": "search",
    "arguments": {
     "q": "y"
    },
    "raw_arguments": null,
    "error": null,
    "kind": "function"
   }
  ],
  "pending_approval": [
   {
    "id": "w1",
    "name": "write_file",
    "arguments": {
     "path": "a"
    },
    "raw_arguments": null,
    "error": null,
    "kind": "function"
   }
  ],
  "pending_rejected": [],
  "pending_sigs": {
   "s1": {
    "t": [
     "search",
     {
      "t": [
       {
        "t": [
         "q",
         "x"
        ]
       }
      ]
     }
    ]
   }
  },
  "policy": null,
  "price_warned": false,
  "prices": null,
  "retries": 0,
  "run_id": "old-1",
  "same_results": 0,
  "specs": null,
  "started": 0.0,
  "state": "await_human",
  "streak": 1,
  "tokens": 15,
  "tool_calls_used": 1,
  "tool_errors": 0,
  "turn": 2
 }
}
"""
"""A run paused for approval, dumped by agentfsm before the format was a model (version 1)."""


def generator() -> ModuleType:
    """docs/gen_checkpoint_schema.py, loaded as a module."""
    spec = importlib.util.spec_from_file_location("gen_schema", DOCS / "gen_checkpoint_schema.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def committed_schema() -> dict[str, Any]:
    """docs/checkpoint.schema.json as committed."""
    loaded: dict[str, Any] = json.loads((DOCS / "checkpoint.schema.json").read_text("utf-8"))
    return loaded


def dumps() -> list[dict[str, Any]]:
    """Dumps of runs in each resting state, with tools, code-free guards and both engines."""
    tools: list[Any] = ["search", {"name": "rm", "parameters": {"type": "object"}}]
    policy = af.Policy(permissions={"rm": "ask"}, guards=[af.guards.MaxTurns(4)])
    fresh = af.Controller(policy, tools=tools)
    executing = af.Controller(policy, tools=tools, engine="transitions")
    executing.on_model_output(turn(calls=[call("search", {"q": [1, {"a": None}]}, id="s")]))
    asking = af.Controller(policy, tools=tools)
    asking.on_model_output(turn(calls=[call("rm", {"p": "x"}, id="r"), call("search", id="s")]))
    ended = af.Controller(policy)
    ended.on_model_output(turn(calls=[call("search", id="s")], usage=(5, 5)))
    ended.on_tool_results([af.ToolResult(call_id="s", content={"hits": 2})])
    ended.on_model_output(turn("done"))
    return [ctl.dump() for ctl in (fresh, executing, asking, ended)]


def put(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    """Set the value at `path` (keys and list indexes) of a dump, as an edit by hand would."""
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


class TestSchemaFile:
    def test_the_committed_schema_is_current(self) -> None:
        """docs/checkpoint.schema.json equals what the script writes from the models now."""
        committed = (DOCS / "checkpoint.schema.json").read_text(encoding="utf-8")
        assert committed == generator().render(), (
            "docs/checkpoint.schema.json is stale: run `python docs/gen_checkpoint_schema.py`"
        )

    def test_the_schema_is_the_models(self) -> None:
        """dump_schema() is RunDump's own JSON Schema, declared as draft 2020-12."""
        schema = dump_schema()
        assert schema.pop("$schema") == "https://json-schema.org/draft/2020-12/schema"
        assert schema == RunDump.model_json_schema()
        Draft202012Validator.check_schema(committed_schema())

    def test_every_dump_fits_the_schema(self) -> None:
        """Dumps in every resting state, and an older dump, fit the committed schema."""
        validator = Draft202012Validator(committed_schema())
        for data in [*dumps(), json.loads(OLDER_DUMP)]:
            assert list(validator.iter_errors(data)) == [], data["run"]["state"]

    @pytest.mark.parametrize(
        ("path", "value"),
        [
            (("run", "turn"), -1),
            (("run", "cost"), "free"),
            (("run", "state"), "flying"),
            (("run", "policy"), {"max_turns": 1000}),
            (("run", "mood"), "happy"),
            (("run", "last_call"), {"x": ["search"]}),
            (("run", "last_results"), [[{"t": []}, []]] * 9),
            (("run", "pending_approval", 0, "name"), 5),
            (("tools",), "everything"),
            (("tools", 0, "callable"), "no"),
            (("policy", "code"), [1]),
            (("engine",), "fast"),
            (("extra",), 1),
        ],
    )
    def test_a_value_the_schema_refuses_load_refuses(
        self, path: tuple[Any, ...], value: Any
    ) -> None:
        """A dump edited outside the schema fails it, and load raises CheckpointError."""
        data = dumps()[2]
        put(data, path, value)
        assert list(Draft202012Validator(committed_schema()).iter_errors(data)), path
        with pytest.raises(CheckpointError, match=f"run {data['run_id']}"):
            af.Controller.load(data)


class TestOlderDumps:
    def test_a_dump_from_before_the_model_loads_and_decides(self) -> None:
        """A version-1 dump written by the codec tables loads, dumps back the same, and decides.

        Only the fields added since (approvals, refusals, a failed round, per-tool counts)
        come back, empty.
        """
        data = json.loads(OLDER_DUMP)
        loaded = af.Controller.load(copy.deepcopy(data), clock=lambda: 100.0)
        dumped = loaded.dump()
        added = ("approved", "refused", "round_failed", "tool_counts")
        assert [dumped["run"].pop(name) for name in added] == [[], {}, False, {}]
        assert dumped == data
        assert (loaded.state, [c.id for c in loaded.pending_calls]) == ("await_human", ["w1"])
        d = loaded.on_human_reply(approved=True)
        assert [c.id for c in d.tool_calls] == ["s2", "w1"]

    def test_a_dump_without_the_clock_field_loads(self) -> None:
        """Dumps made before the clock was a Run field have no 'clock': they still load."""
        data = json.loads(OLDER_DUMP)
        del data["run"]["clock"]
        assert af.Controller.load(data).state == "await_human"


class TestFailClosed:
    @pytest.mark.parametrize(
        ("path", "value", "words"),
        [
            (("run", "run_id"), "someone-else", "run_id 'someone-else' is not the dump's"),
            (("run", "policy"), {"max_turns": 1000}, "saved field 'policy' is invalid"),
            (("run", "specs"), [], "saved field 'specs' is invalid"),
            (("run", "pending_sigs"), [["s1", "search"]], "saved field 'pending_sigs' is invalid"),
            (("run", "last_results"), [[{"t": []}, [[1, "x"]]]], "'last_results' is invalid"),
            (("extra",), 1, "'extra'"),
        ],
    )
    def test_a_value_not_understood_is_refused(
        self, path: tuple[str, ...], value: Any, words: str
    ) -> None:
        """Values the codec tables ignored or coerced are now refused, naming the run and place."""
        data = json.loads(OLDER_DUMP)
        put(data, path, value)
        with pytest.raises(CheckpointError, match="old-1") as caught:
            af.Controller.load(data)
        assert words in caught.value.message
