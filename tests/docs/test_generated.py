"""docs/_generated.py: the command line every docs/gen_*.py script shares."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

from tests.docs.scripts import DOCS, load

SCRIPTS = sorted(p.stem for p in DOCS.glob("gen_*.py"))


def test_it_writes_the_file_and_checks_it(tmp_path: Path) -> None:
    """It writes what `render` gives; `--check` writes nothing and says 1 when stale or missing."""
    main = load("_generated").main
    out = tmp_path / "page.md"
    assert main(out, lambda: "new\n", ["--check"]) == 1
    assert not out.exists()
    assert main(out, lambda: "new\n", []) == 0
    assert out.read_text(encoding="utf-8") == "new\n"
    assert main(out, lambda: "new\n", ["--check"]) == 0
    assert main(out, lambda: "newer\n", ["--check"]) == 1
    assert out.read_text(encoding="utf-8") == "new\n"


def test_it_says_what_it_wrote_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/gen_api.py says `wrote docs/api.md`, as it always has; the other scripts are quiet."""
    main = load("_generated").main
    out = tmp_path / "docs" / "api.md"
    out.parent.mkdir()
    main(out, lambda: "x", [])
    assert capsys.readouterr().out == ""
    main(out, lambda: "x", [], announce=True)
    assert capsys.readouterr().out == "wrote docs/api.md\n"


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_script_checks_its_committed_file(
    script: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run as `make docs` runs it (docs/ first on sys.path), each script finds the shared
    module and, with `--check`, its committed file current; the tests that load a script by
    path never reach that import."""
    monkeypatch.syspath_prepend(str(DOCS))
    monkeypatch.delitem(sys.modules, "_generated", raising=False)
    monkeypatch.setattr(sys, "argv", [str(DOCS / f"{script}.py"), "--check"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(DOCS / f"{script}.py"), run_name="__main__")
    assert done.value.code == 0
