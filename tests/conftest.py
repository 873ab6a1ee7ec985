"""Shared test set-up: hypothesis profiles, the marks of litellm tests, and where the trajectory
corpus is.

Property tests carry no example counts of their own: the profile decides. `quick` is
the default, so the README's test command stays short; CI also runs the suite's
properties with `--hypothesis-profile=deep`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "quick",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "deep",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("quick")  # `--hypothesis-profile=deep` (hypothesis' own option) overrides

LITELLM_CLIENT = [
    pytest.mark.litellm,
    # litellm (1.110) builds its streaming Delta schema lazily, on the first streamed
    # chunk, and pydantic warns that litellm's TypedDicts (ChatCompletionThinkingBlock,
    # ...) use `ReadOnly`: the warning is about litellm's types, not ours.
    pytest.mark.filterwarnings(
        "ignore:Items? .+ on TypedDict class .+ using the `ReadOnly` qualifier"
        ":UserWarning:pydantic._internal._generate_schema"
    ),
    # litellm reads every attribute of a streamed usage object, which pydantic 2.11+
    # answers with this deprecation when it reaches `model_computed_fields`.
    pytest.mark.filterwarnings(
        "ignore:Accessing the 'model_(computed_)?fields' attribute on the instance is deprecated"
        ":pydantic.warnings.PydanticDeprecatedSince211"
    ),
]
"""The marks of a test that drives litellm's real client: `pytestmark = LITELLM_CLIENT`."""

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "trajectories"


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The trajectory corpus directory; the test fails (not skips) when it is missing."""
    if not (CORPUS / "SOURCES.md").is_file():
        pytest.fail(f"trajectory corpus missing: expected it at {CORPUS.resolve()}")
    return CORPUS.resolve()


# The modules whose tests start processes, clusters or servers (seconds each) run first. Under
# pytest-xdist the suite ends when its last long test does: started early, the long tests run
# side by side and the short ones fill the gaps; collected in name order, Ray and the examples
# came last and ran alone at the end.
SLOW_FIRST = (
    "tests/replay/test_replay_ray.py",
    "tests/durable/",
    "tests/integrations/test_real_clients.py",
    "tests/integrations/test_langgraph_checkpoint.py",
    "tests/test_examples_and_api.py",
    "tests/docs/",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the slow modules' tests to the front, keeping the order within each part."""
    items.sort(key=lambda item: not item.nodeid.startswith(SLOW_FIRST))
