"""Write docs/checkpoint.schema.json, the JSON Schema of `Controller.dump()`'s data.

Run `python docs/gen_checkpoint_schema.py` after changing the format's models in
`agentfsm/_engine/persistence.py`; a test fails while the committed file differs from what this
script writes. `--check` only says whether it is up to date (exit 1 when stale).
"""

from __future__ import annotations

import json
from pathlib import Path

from agentfsm._engine.persistence import dump_schema

OUT = Path(__file__).resolve().parent / "checkpoint.schema.json"


def render() -> str:
    """The schema as committed: indented JSON text ending in a newline."""
    return json.dumps(dump_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    # Here, not at the top: only a run as a script has docs/ on sys.path (tests load by path).
    from _generated import main

    raise SystemExit(main(OUT, render))
