"""The README's Controller loop, and docs/embedding.md's whole excerpt, are a runnable example's."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARK = "# --- the agent"


def _example_excerpt() -> str:
    text = (ROOT / "examples" / "openai_agent.py").read_text(encoding="utf-8")
    start = text.index("\n", text.index(MARK)) + 1
    return text[start : text.index("# -----", start)].strip()


def _example_loop() -> str:
    """The example's `agent` function alone, without the helpers after it."""
    excerpt = _example_excerpt()
    return excerpt[: excerpt.index("\n\n\ndef run_tool")].strip()


def _snippet(path: Path, heading: str) -> str:
    """The first Python block after `heading`, from `def agent(` to the block's end."""
    text = path.read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    block = section[section.index("```python\n") + len("```python\n") :]
    block = block[: block.index("```\n")]
    return block[block.index("def agent(") :].strip()


class TestReadmeEmbedSnippet:
    def test_readme_loop_equals_the_example(self) -> None:
        """Every line of the README's agent loop is the example's, which runs as a test."""
        snippet = _snippet(ROOT / "README.md", "## Embed it as the controller")
        assert snippet == _example_loop()

    def test_embedding_page_equals_the_example(self) -> None:
        """docs/embedding.md shows the whole excerpt: the loop and its two helpers."""
        snippet = _snippet(ROOT / "docs" / "embedding.md", "## The loop")
        assert snippet == _example_excerpt()

    def test_example_calls_the_one_permission_check(self) -> None:
        """The example asks may_run before running each call, as every executing path must."""
        assert "ctl.may_run(call.id)" in _example_loop()
