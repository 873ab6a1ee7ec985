"""Fixtures of the replay tests: traces recorded live by the real agent frameworks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.processes import python

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def span_recordings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of real recordings (`tests/replay/record_spans.py`), made once per session."""
    folder = tmp_path_factory.mktemp("span-recordings")
    done = python("-m", "tests.replay.record_spans", folder, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return folder
