"""The report in a real browser: Debian's headless Chromium driven by Playwright.

The page is opened from a file (no server, no network), as it would be from a ticket.
Screenshots are kept under `.artifacts/report/`. Without Chromium or Graphviz these tests
skip and say why; CI installs both and sets AGENTFSM_REQUIRE_BROWSER=1, which turns the
skip into a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentfsm import Policy
from agentfsm._report import build

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / ".artifacts" / "report"
# Under pytest-xdist, the module's tests share one worker and so one Chromium.
pytestmark = pytest.mark.xdist_group("browser")
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return "Chromium is not installed (Debian: apt-get install chromium)"
    if shutil.which("dot") is None:
        return "Graphviz 'dot' is not installed (Debian: apt-get install graphviz)"
    try:
        import axe_playwright_python  # noqa: F401
        import playwright  # noqa: F401
    except ImportError:
        return "playwright and axe-playwright-python are not installed (pip install -e '.[dev]')"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module."""
    missing = _missing()
    if missing is not None:
        if os.environ.get("AGENTFSM_REQUIRE_BROWSER"):
            pytest.fail(f"browser tests required but {missing}")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


def open_page(browser: Any, html: str, tmp_path: Path, name: str) -> Any:
    """Write the report to a file and open it in a new page."""
    path = tmp_path / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(path.as_uri())
    page.wait_for_function("document.body.dataset.step !== undefined")
    page.errors = errors
    return page


def shot(page: Any, name: str) -> Path:
    """Keep a screenshot of the page as a test artifact."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(target), full_page=False)
    assert target.stat().st_size > 10_000
    return target


def classes(page: Any, element_id: str) -> list[str]:
    """The classes of an SVG element of the machine, by id."""
    value = page.evaluate(
        "(id) => { const el = document.querySelector('.machine svg').getElementById(id);"
        " return el ? el.getAttribute('class') : null; }",
        element_id,
    )
    assert value is not None, f"#{element_id} is not in the diagram"
    return str(value).split()


class TestInBrowser:
    def test_the_selected_steps_path_is_highlighted(
        self, browser: Any, doom_trace: Path, tmp_path: Path
    ) -> None:
        """Step 1's path is lit on load; clicking the last step lights the edge into `end`."""
        page = open_page(browser, build([str(doom_trace)]).html, tmp_path, "doom")
        assert "on" in classes(page, "n-execute")
        assert "on" in classes(page, "e-validate-budget_check")
        assert "on" not in classes(page, "n-end")
        page.click("#r0s6 h3")
        assert page.get_attribute("#r0s6", "aria-current") == "step"
        assert "on" in classes(page, "n-end")
        assert "on" in classes(page, "e-validate-end")
        assert "on" not in classes(page, "n-execute")
        assert "visited" in classes(page, "n-execute")
        assert page.input_value("#scrub-0") == "6"
        shot(page, "doom-last-step")
        assert page.errors == []

    def test_the_scrubber_moves_the_highlight(
        self, browser: Any, doom_trace: Path, tmp_path: Path
    ) -> None:
        """Moving the slider selects that step, shows its decision and moves the path."""
        page = open_page(browser, build([str(doom_trace)]).html, tmp_path, "scrub")
        page.fill("#scrub-0", "1")
        assert page.get_attribute("#r0s1", "aria-current") == "step"
        assert "on" in classes(page, "e-execute-budget_check")
        assert page.inner_text("#at-0") == "step 2 of 7"
        decision = page.inner_text("#r0s6")
        assert "doom_loop" in decision
        assert "RepeatedCall(3)" in decision
        page.focus("#r0s2")
        page.keyboard.press("ArrowDown")
        assert page.get_attribute("#r0s3", "aria-current") == "step"

    def test_what_a_tool_wrote_is_shown_never_run(
        self, browser: Any, doom_trace: Path, tmp_path: Path
    ) -> None:
        """Script in a tool result is visible text; it never runs and adds no element."""
        page = open_page(browser, build([str(doom_trace)]).html, tmp_path, "escaped")
        assert page.evaluate("window.pwned") is None
        assert page.locator("#r0s1").inner_text().count("<script>window.pwned = 1</script>") == 1
        assert page.locator("main img").count() == 0
        assert page.locator("main b").count() == 0

    def test_the_diff_of_two_policies_is_side_by_side(
        self, browser: Any, doom_trace: Path, tmp_path: Path
    ) -> None:
        """Against a looser policy, the stopped step shows both decisions in one row."""
        stop = Policy(on_repeat="stop")  # the doom-loop stop, not the default feedback
        report = build(
            [str(doom_trace)], stop, against=Policy(on_repeat="stop", repeat_threshold=6)
        )
        page = open_page(browser, report.html, tmp_path, "against")
        row = page.locator("tr.difference").first
        cells = row.locator("td").all_inner_texts()
        assert "stop" in cells[1]
        assert "RepeatedCall(3)" in cells[1]
        assert "execute_tools" in cells[2]
        row.locator("a").click()
        assert page.evaluate("location.hash") == "#r0s6"
        shot(page, "against")

    def test_no_serious_accessibility_violations(
        self, browser: Any, doom_trace: Path, final_trace: Path, tmp_path: Path
    ) -> None:
        """axe-core, run in the page, finds no serious or critical violation."""
        from axe_playwright_python.sync_playwright import Axe

        report = build([str(doom_trace), str(final_trace)], against=Policy(repeat_threshold=6))
        page = open_page(browser, report.html, tmp_path, "axe")
        response = Axe().run(page).response
        serious = [
            (v["id"], v["impact"], v["help"])
            for v in response["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        assert serious == []
        assert response["passes"], "axe ran no check at all"
