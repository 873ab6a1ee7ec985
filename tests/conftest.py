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
