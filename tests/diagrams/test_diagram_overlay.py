"""`agentfsm diagram --trace` overlays the path recorded runs took, whatever their format."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TRAJECTORIES = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "trajectories"


class TestForeignTraceOverlay:
    def test_a_tau_bench_file_is_replayed_and_counted(self) -> None:
        """A tau-bench file is replayed through the policy; visited edges carry counts."""
        path = TRAJECTORIES / "tau-bench" / "gpt-4o-airline.json"
        assert path.exists(), f"the trajectory corpus is expected at {TRAJECTORIES}"
        out = subprocess.run(
            [sys.executable, "-m", "agentfsm", "diagram", "--trace", str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert 'state "parse ×2454" as PARSE' in out
        assert "P1 HasToolCalls() ×1164" in out
        assert "classDef visited" in out
