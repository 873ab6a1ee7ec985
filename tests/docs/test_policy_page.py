"""docs/policy.md and docs/policy.schema.json say what a policy file is, and cannot drift."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from jsonschema import Draft202012Validator

import agentfsm as af
from agentfsm.exceptions import PolicyError
from agentfsm.guards import CostBudget, TokenBudget
from tests.docs.scripts import DOCS, load

ROOT = DOCS.parent
PAGE = DOCS / "policy.md"


def generator() -> ModuleType:
    """docs/gen_policy_schema.py, loaded as a module."""
    return load("gen_policy_schema")


def validator() -> Draft202012Validator:
    """A validator of the committed schema."""
    return Draft202012Validator(json.loads((DOCS / "policy.schema.json").read_text("utf-8")))


def examples(language: str) -> list[str]:
    """The page's fenced blocks of one language."""
    text = PAGE.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.DOTALL | re.MULTILINE)


def errors(data: Any) -> list[str]:
    """What the committed schema finds wrong with `data`."""
    return [error.message for error in validator().iter_errors(data)]


class TestSchemaFile:
    def test_the_committed_schema_is_current(self) -> None:
        """docs/policy.schema.json equals what the script writes from Policy now."""
        committed = (DOCS / "policy.schema.json").read_text(encoding="utf-8")
        assert committed == generator().render(), (
            "docs/policy.schema.json is stale: run `python docs/gen_policy_schema.py`"
        )

    def test_the_schema_is_valid_2020_12(self) -> None:
        """The schema is a valid JSON Schema, draft 2020-12."""
        schema = json.loads((DOCS / "policy.schema.json").read_text("utf-8"))
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        Draft202012Validator.check_schema(schema)

    def test_every_file_field_is_described(self) -> None:
        """The schema has every field a file can hold, each with its docstring; code has none."""
        properties = generator().schema()["$defs"]["Policy"]["properties"]
        code = {"permission", "verifiers"}
        file_only = {"cedar_policies", "cedar_schema"}  # read into `cedar`
        assert set(properties) == (set(af.Policy.model_fields) - code) | file_only
        assert all(prop["description"] for prop in properties.values())

    def test_make_docs_writes_it(self) -> None:
        """`make docs` runs the generator beside the other two."""
        assert "docs/gen_policy_schema.py" in (ROOT / "Makefile").read_text(encoding="utf-8")


class TestSchemaAgreesWithTheLoader:
    def test_a_saved_policy_fits(self) -> None:
        """`to_json()` of a policy using every file field fits the schema and loads back equal."""
        policy = af.Policy(
            max_turns=9,
            max_tool_calls=4,
            max_tokens=1000,
            max_cost=0.5,
            max_seconds=60,
            max_context_tokens=8000,
            on_repeat="stop",
            on_unknown_price="stop",
            on_incomplete="ask",
            on_deny="stop",
            no_progress_threshold=None,
            permissions={"*": "ask", "read": "allow"},
            permission_rules=["deny bash(command~rm -rf *, cwd=/srv/*)", "allow re*"],
            handoffs=["research"],
            final_tools=["submit"],
            guards=[TokenBudget(10) | CostBudget(1.0)],
        )
        data = json.loads(json.dumps(policy.to_json()))
        assert errors(data) == []
        assert af.Policy.from_mapping(data) == policy

    @pytest.mark.parametrize(
        "data",
        [
            {"policy": {"max_turns": 3}},
            {"permission_rules": "deny rm"},
            {"final_tools": "submit", "handoffs": "research", "guards": "MaxTurns(3)"},
            {"permission_rules": [{"action": "ask", "tool": "x", "args": {"p": "a*"}}]},
        ],
    )
    def test_shorthands_fit_and_load(self, data: dict[str, Any]) -> None:
        """What the loader accepts as shorthand, the schema accepts too."""
        assert errors(data) == []
        af.Policy.from_mapping(data.get("policy", data))

    @pytest.mark.parametrize(
        "data",
        [
            {"max_turn": 3},
            {"max_turns": 0},
            {"on_repeat": "warn"},
            {"permissions": {"rm": "DENY"}},
            {"permission_rules": [{"action": "deny", "tool": "rm", "arg": {}}]},
            {"guards": [3]},
        ],
    )
    def test_mistakes_are_refused_by_both(self, data: dict[str, Any]) -> None:
        """A misspelled field or a value out of range fails the schema and the loader alike."""
        assert errors(data) != []
        with pytest.raises(PolicyError):
            af.Policy.from_mapping(data)


class TestPage:
    def test_every_field_has_a_row(self) -> None:
        """The page's table has a row for each field of Policy."""
        text = PAGE.read_text(encoding="utf-8")
        for name in af.Policy.model_fields:
            assert re.search(rf"^\| `{name}` \|", text, re.MULTILINE), name

    @pytest.mark.parametrize("suffix", [".json", ".toml"])
    def test_file_examples_load_and_fit(self, suffix: str, tmp_path: Path) -> None:
        """The JSON and TOML examples load with Policy.from_file, fit the schema, and agree."""
        (text,) = examples(suffix[1:])
        path = tmp_path / f"policy{suffix}"
        path.write_text(text, encoding="utf-8")
        data = tomllib.loads(text) if suffix == ".toml" else json.loads(text)
        assert errors(data) == []
        loaded = af.Policy.from_file(path)
        other = "toml" if suffix == ".json" else "json"
        (twin,) = examples(other)
        twin_path = tmp_path / f"twin.{other}"
        twin_path.write_text(twin, encoding="utf-8")
        assert af.Policy.from_file(twin_path) == loaded

    def test_python_examples_run(self) -> None:
        """Each Python block builds its policy as printed."""
        found = examples("python")
        assert found
        for code in found:
            namespace: dict[str, Any] = {}
            exec(compile(code, str(PAGE), "exec"), namespace)
            assert isinstance(namespace["policy"], af.Policy)
