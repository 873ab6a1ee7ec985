"""The docs cannot drift: the reference is regenerated and compared, the pages' examples run."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.docs.scripts import DOCS, load
from tests.processes import python

PAGES = {
    "langgraph": "completed",
    "openai_agents": "completed",
    "pydantic_ai": "completed",
    "mini_swe_agent": "doom_loop",
}
"""Each integration page, and the exit reason its example ends with."""
NEEDS = {
    "langgraph": ("langgraph", "langchain_openai"),
    "openai_agents": ("agents",),
    "pydantic_ai": ("pydantic_ai",),
    "mini_swe_agent": ("minisweagent", "litellm"),
}
"""The framework each page's example drives (its extra)."""
GLUE_LIMIT = 10


def generator() -> ModuleType:
    """docs/gen_reference.py, loaded as a module."""
    return load("gen_reference")


def example(page: str) -> str:
    """The first Python block of an integration page."""
    text = (DOCS / "integrations" / f"{page}.md").read_text(encoding="utf-8")
    found = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert found, f"docs/integrations/{page}.md has no python example"
    return found.group(1)


class TestReference:
    """docs/reference.md is what docs/gen_reference.py renders from the models' docstrings."""

    def test_reference_is_current(self) -> None:
        """The committed page equals a fresh rendering (run `make docs` when this fails)."""
        committed = (DOCS / "reference.md").read_text(encoding="utf-8")
        assert committed == generator().render(), "docs/reference.md is stale: run `make docs`"

    def test_every_field_is_listed(self) -> None:
        """Each field of each documented model has a row, with its docstring."""
        module = generator()
        text = module.render()
        for model in module.MODELS:
            for name in model.model_fields:
                assert re.search(rf"^\| `{name}` \|", text, re.MULTILINE), (
                    f"{model.__name__}.{name}"
                )

    def test_the_host_rules_are_stated(self) -> None:
        """The page says where the controller's error results travel and that ids go back."""
        text = generator().render()
        assert "`Decision.results`" in text
        assert "written back into the host's history" in text


class TestIntegrationPages:
    """Each integration page's example runs, as printed, and needs at most ten glue lines."""

    @pytest.mark.parametrize(
        "page",
        [pytest.param(page, marks=pytest.mark.needs(*NEEDS[page])) for page in sorted(PAGES)],
    )
    def test_example_runs(self, page: str, tmp_path: Path) -> None:
        """The example runs in a fresh interpreter and ends with the exit reason it shows."""
        script = tmp_path / f"example_{page}.py"
        script.write_text(example(page), encoding="utf-8")
        done = python(str(script), timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1].endswith(PAGES[page]), done.stdout

    @pytest.mark.parametrize("page", sorted(PAGES))
    def test_glue_is_at_most_ten_lines(self, page: str) -> None:
        """The lines marked `# agentfsm` (all the example adds to the framework) are <= 10."""
        glue = [line for line in example(page).splitlines() if line.rstrip().endswith("# agentfsm")]
        assert 0 < len(glue) <= GLUE_LIMIT, glue
