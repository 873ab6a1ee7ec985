"""Cost budgets fire on providers that report tokens, not dollars.

A turn's cost is the payload's own figure, else its usage priced by
genai-prices; a price that is unknown is said once, or stops the run, by
policy. genai-prices is imported only when a policy has a cost budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentfsm as af
from agentfsm._model.pricing import turn_cost
from agentfsm._model.types import Action, ExitReason, ModelTurn, Usage
from agentfsm.exceptions import PolicyError
from agentfsm.guards import CostBudget
from agentfsm.providers import normalize

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "providers"


def body(name: str) -> dict[str, Any]:
    """One corpus payload."""
    data: dict[str, Any] = json.loads((CORPUS / name).read_text(encoding="utf-8"))
    return data


PRICED = [
    "openai_chat/chat-tool_calls-single.json",
    "anthropic/messages-text-plus-4-parallel-tool_use.json",
    "gemini/generateContent-3-parallel-functionCalls-STOP.json",
    "openai_responses/responses-function_call.json",
]
OLLAMA = "ollama/api-chat-tool_calls-done_reason-stop.json"


class TestTurnCost:
    """Pricing one turn."""

    @pytest.mark.parametrize("name", PRICED)
    def test_a_token_only_payload_is_priced(self, name: str) -> None:
        """OpenAI, Anthropic, Gemini and Responses bodies carry no cost, yet get a price."""
        turn = normalize(body(name))
        assert turn.usage is not None
        assert turn.usage.cost is None
        cost = turn_cost(turn)
        assert cost is not None
        assert cost > 0

    def test_the_payloads_own_cost_wins(self) -> None:
        """A cost the provider reports (OpenRouter) is used as it is."""
        turn = ModelTurn(model="gpt-4o", provider="openai", usage=Usage(input_tokens=10, cost=7.5))
        assert turn_cost(turn) == 7.5

    def test_an_unknown_model_has_no_price(self) -> None:
        """A model genai-prices does not know, and a turn without usage, have no cost."""
        assert turn_cost(normalize(body(OLLAMA))) is None
        assert turn_cost(ModelTurn(model="gpt-4o", provider="openai")) is None


class TestCostBudgetFires:
    """A cost budget on providers that report only tokens."""

    @pytest.mark.parametrize("name", PRICED)
    def test_a_cost_budget_fires_on_priced_usage(self, name: str) -> None:
        """A budget smaller than one turn's price stops the run with COST_BUDGET."""
        ctl = af.Controller(af.Policy(max_cost=1e-9))
        decision = ctl.on_model_output(body(name))
        assert decision.action is Action.STOP
        assert decision.exit_reason is ExitReason.COST_BUDGET
        assert ctl.last_output is not None
        assert ctl.last_output.usage is not None
        assert ctl.last_output.usage.cost is not None

    def test_a_cost_budget_given_as_a_guard_prices_turns_too(self) -> None:
        """`guards=[CostBudget(...)]` needs prices just as `max_cost` does."""
        ctl = af.Controller(af.Policy(guards=["TokenBudget(1000000000) | CostBudget(1e-9)"]))
        decision = ctl.on_model_output(body(PRICED[0]))
        assert decision.exit_reason is ExitReason.COST_BUDGET


class TestUnknownPrice:
    """A turn whose price is unknown cannot silently satisfy a cost budget."""

    def test_an_unknown_price_is_said_once(self) -> None:
        """With on_unknown_price="warn" the first decision says so; later ones do not."""
        ctl = af.Controller(af.Policy(max_cost=1.0))
        first = ctl.on_model_output(body(OLLAMA))
        assert "'llama3.2' (ollama) is unknown" in first.reason
        ctl.on_tool_results([af.ToolResult(call_id=c.id, content="ok") for c in first.tool_calls])
        second = ctl.on_model_output(body(OLLAMA))
        assert "unknown" not in second.reason

    def test_an_unknown_price_stops_when_the_policy_says_so(self) -> None:
        """With on_unknown_price="stop" the run ends with COST_BUDGET and says why."""
        ctl = af.Controller(af.Policy(max_cost=1.0, on_unknown_price="stop"))
        decision = ctl.on_model_output(body(OLLAMA))
        assert decision.action is Action.STOP
        assert decision.exit_reason is ExitReason.COST_BUDGET
        assert "cannot be checked" in decision.reason

    def test_the_stop_choice_reads_back_from_its_repr(self) -> None:
        """`CostBudget(0.5, on_unknown='stop')` is its own repr, as a policy file writes it."""
        guard = CostBudget(0.5, on_unknown="stop")
        assert repr(guard) == "CostBudget(0.5, on_unknown='stop')"
        policy = af.Policy(guards=[repr(guard)])
        assert policy.guards == (guard,)

    def test_an_unknown_choice_is_refused(self) -> None:
        """`on_unknown` other than warn or stop is refused where it is given."""
        with pytest.raises(PolicyError, match="on_unknown"):
            CostBudget(0.5, on_unknown="ignore")  # type: ignore[arg-type]


class TestLazyImport:
    """The per-step path pays for prices only when a budget needs them."""

    def run_python(self, code: str) -> str:
        """Run `code` in a fresh interpreter and return its output."""
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        return done.stdout.strip()

    def test_no_cost_budget_never_imports_genai_prices(self) -> None:
        """A run without a cost budget never loads genai-prices (nor litellm)."""
        code = (
            "import json, sys, agentfsm as af\n"
            f"b = json.load(open({str(CORPUS / PRICED[0])!r}))\n"
            "af.Controller(af.Policy(max_turns=5)).on_model_output(b)\n"
            "print('genai_prices' in sys.modules, 'litellm' in sys.modules)"
        )
        assert self.run_python(code) == "False False"

    def test_a_cost_budget_imports_genai_prices_but_not_litellm(self) -> None:
        """A cost budget loads genai-prices when it prices a turn, and never litellm."""
        code = (
            "import json, sys, agentfsm as af\n"
            f"b = json.load(open({str(CORPUS / PRICED[0])!r}))\n"
            "af.Controller(af.Policy(max_cost=5)).on_model_output(b)\n"
            "print('genai_prices' in sys.modules, 'litellm' in sys.modules)"
        )
        assert self.run_python(code) == "True False"


@pytest.mark.litellm
@pytest.mark.filterwarnings("ignore:Item.*ReadOnly.*:UserWarning")
class TestLitellmCost:
    """litellm's own cost of a response object."""

    def test_litellms_response_cost_becomes_the_turns_cost(self) -> None:
        """`_hidden_params["response_cost"]` of a litellm ModelResponse is the turn's cost."""
        import litellm

        response = litellm.ModelResponse(
            model="gpt-4o",
            choices=[{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
            usage={"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        )
        response._hidden_params["response_cost"] = 0.25
        turn = normalize(response)
        assert turn.usage is not None
        assert turn.usage.cost == 0.25
