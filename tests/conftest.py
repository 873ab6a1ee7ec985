"""Where the shared trajectory corpus is: `../shared/corpus/trajectories` beside the repo."""

from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "trajectories"


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The trajectory corpus directory; the test fails (not skips) when it is missing."""
    if not (CORPUS / "SOURCES.md").is_file():
        pytest.fail(f"trajectory corpus missing: expected it at {CORPUS.resolve()}")
    return CORPUS.resolve()
