"""The README's "Embed it" snippet is a faithful excerpt of a runnable example."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARK = "# --- the agent"


def _example_excerpt() -> str:
    text = (ROOT / "examples" / "openai_agent.py").read_text(encoding="utf-8")
    start = text.index("\n", text.index(MARK)) + 1
    return text[start : text.index("# -----", start)].strip()


def _readme_snippet() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Embed it as the controller") :]
    block = section[section.index("```python\n") + len("```python\n") :]
    block = block[: block.index("```\n")]
    return block[block.index("def agent(") :].strip()


class TestReadmeEmbedSnippet:
    def test_snippet_equals_the_example(self) -> None:
        """Every line of the README's agent loop is the example's, which runs as a test."""
        assert _readme_snippet() == _example_excerpt()

    def test_example_calls_the_one_permission_check(self) -> None:
        """The example asks may_run before running each call, as every executing path must."""
        assert "ctl.may_run(call.id)" in _example_excerpt()
