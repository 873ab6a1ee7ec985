"""mini-swe-agent governed by agentfsm, on its own litellm model (tool calls)."""

import sys
import tempfile

from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel

import agentfsm as af
from agentfsm.integrations.mini_swe_agent import GovernedAgent


def main(base_url: str, api_key: str = "sk-local") -> str:
    """Run a task in a scratch directory; print the submission and return the exit reason."""
    model = LitellmModel(
        model_name="openai/gpt-4o-mini",
        model_kwargs={"api_base": base_url, "api_key": api_key},
        cost_tracking="ignore_errors",  # a local server's model has no price
    )
    with tempfile.TemporaryDirectory() as scratch:
        agent = GovernedAgent(
            model,
            LocalEnvironment(cwd=scratch),
            policy=af.Policy(max_turns=8),
            system_template="You are a helpful assistant that runs bash commands.",
            instance_template="{{task}}",
            step_limit=8,
        )
        result = agent.run("Write hello into a file named out, then submit its content.")
    print(result["submission"])
    return str(agent.controller.exit_reason)


if __name__ == "__main__":
    print(main(sys.argv[1]))  # e.g. http://127.0.0.1:8000/v1
