"""Guard text from outside (a policy file, a saved run) is bounded before Python parses it:
past a limit it is a PolicyError naming the limit, never a RecursionError or MemoryError."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import agentfsm as af
from agentfsm._model import limits
from agentfsm.exceptions import CheckpointError, PolicyError
from agentfsm.guards import AnyOf, MaxTurns, Not, parse_guard
from tests.processes import python

HOSTILE = {
    "50,000 | terms": ("|".join(["MaxTurns(3)"] * 50_000), "MAX_GUARD_CHARS"),
    "200,000 ~": ("~" * 200_000 + "MaxTurns(3)", "MAX_GUARD_CHARS"),
    "600 | terms in few characters": ("|".join(["A()"] * 600), "MAX_GUARD_OPERATORS"),
    "400 ~ in few characters": ("~" * 400 + "MaxTurns(3)", "MAX_GUARD_NESTING"),
    "100 brackets": ("(" * 100 + "MaxTurns(3)" + ")" * 100, "MAX_GUARD_NESTING"),
    "a literal nested 500 deep": ("MaxTurns(" + "[" * 500 + "]" * 500 + ")", "MAX_GUARD_NESTING"),
}


class TestGuardTextLimits:
    """parse_guard, Policy and Controller.load refuse hostile guard text by its limit."""

    @pytest.mark.parametrize("case", sorted(HOSTILE))
    def test_parse_guard_names_the_limit(self, case: str) -> None:
        """Each hostile text used to raise RecursionError or MemoryError from Python's parser."""
        text, limit = HOSTILE[case]
        with pytest.raises(PolicyError, match=limit):
            parse_guard(text)

    @pytest.mark.parametrize("case", sorted(HOSTILE))
    def test_a_policy_refuses_it(self, case: str) -> None:
        """A Policy given the text as a guard raises PolicyError naming the limit."""
        text, limit = HOSTILE[case]
        with pytest.raises(PolicyError, match=limit):
            af.Policy(guards=[text])

    def test_a_saved_run_with_it_does_not_load(self) -> None:
        """A dump whose guards were replaced by hostile text is a CheckpointError naming the limit
        (it used to be a MemoryError)."""
        data = af.Controller(af.Policy(guards=["MaxTurns(3)"])).dump()
        data["policy"]["data"]["guards"] = [HOSTILE["200,000 ~"][0]]
        with pytest.raises(CheckpointError, match=r"saved policy: .*MAX_GUARD_CHARS"):
            af.Controller.load(data)

    def test_text_within_the_limits_still_reads_back(self) -> None:
        """A chain of 400 guards and 31 negations parse as the guards they describe."""
        chain = parse_guard(" | ".join(f"MaxTurns({n})" for n in range(1, 401)))
        assert chain == AnyOf(*(MaxTurns(n) for n in range(1, 401)))
        negated = parse_guard("~" * 31 + "MaxTurns(3)")
        assert isinstance(negated, Not)

    def test_operators_inside_string_literals_are_not_counted(self) -> None:
        """A `|` in a quoted argument is text, not an operator."""
        reason = "|" * (limits.MAX_GUARD_OPERATORS + 10)
        guard = parse_guard(f"Otherwise(reason={reason!r})")
        assert reason in repr(guard)

    def test_the_limits_are_read_when_parsing(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A host can raise a limit before reading a policy (limits are read at call time)."""
        text = " | ".join(["MaxTurns(3)"] * 3)
        monkeypatch.setattr(limits, "MAX_GUARD_OPERATORS", 1)
        with pytest.raises(PolicyError, match="MAX_GUARD_OPERATORS"):
            parse_guard(text)
        monkeypatch.setattr(limits, "MAX_GUARD_OPERATORS", 2)
        assert parse_guard(text) == AnyOf(MaxTurns(3), MaxTurns(3), MaxTurns(3))


class TestPolicyFilesOnTheCommandLine:
    """Every `--policy` command exits 2 with one line naming the limit."""

    @pytest.mark.parametrize(
        "command",
        [("diagram",), ("replay", "{trace}"), ("report", "{trace}")],
        ids=["diagram", "replay", "report"],
    )
    def test_exit_two_naming_the_limit(self, tmp_path: Path, command: tuple[str, ...]) -> None:
        """A policy file with 50,000 `|` terms used to exit 1 with a RecursionError traceback."""
        policy = tmp_path / "p.json"
        policy.write_text(json.dumps({"guards": [HOSTILE["50,000 | terms"][0]]}))
        trace = tmp_path / "t.jsonl"
        with af.TraceWriter(trace) as writer:
            af.Controller(observers=[writer]).on_model_output(af.ModelTurn(text="hi"))
        args = [a.format(trace=trace) for a in command]
        done = python(
            "-m",
            "agentfsm",
            *args,
            "--policy",
            str(policy),
            timeout=120,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert "MAX_GUARD_CHARS" in done.stderr
        assert str(policy) in done.stderr
