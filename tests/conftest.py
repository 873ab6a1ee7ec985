"""Shared test set-up: hypothesis profiles, and where the trajectory corpus is.

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

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "trajectories"


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The trajectory corpus directory; the test fails (not skips) when it is missing."""
    if not (CORPUS / "SOURCES.md").is_file():
        pytest.fail(f"trajectory corpus missing: expected it at {CORPUS.resolve()}")
    return CORPUS.resolve()
