"""`agentfsm report`: one self-contained page per set of runs, escaped and bounded."""

from __future__ import annotations

import html
import os
import re
import subprocess
from pathlib import Path

import pytest

from agentfsm import Policy
from agentfsm._report import build
from agentfsm._report.collect import MAX_TEXT, clip
from tests.processes import python
from tests.report.conftest import INJECTED, write_doom_loop, write_final

TAU = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "trajectories"


def report_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `python -m agentfsm report ARGS` in a fresh interpreter."""
    return python(
        "-m",
        "agentfsm",
        "report",
        *args,
        cwd=cwd,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        timeout=120,
    )


class TestContent:
    def test_every_decision_is_a_step_with_its_path(self, doom_trace: Path) -> None:
        """Each decision of the run is one step on the page, with the states it passed."""
        report = build([str(doom_trace)])
        (view,) = report.runs
        assert len(view.steps) == len(view.result.decisions) == 7
        assert report.html.count('class="step') == 7
        last = view.steps[-1]
        assert last.decision["action"] == "stop"
        assert last.decision["exit_reason"] == "doom_loop"
        assert last.path == ["await_model", "parse", "validate", "end"]
        assert "RepeatedCall(3)" in report.html

    def test_budgets_and_finish_reasons_are_shown(self, final_trace: Path) -> None:
        """A step shows the finish reason as claimed and as reconciled, and the budgets used."""
        report = build([str(final_trace)])
        first = report.runs[0].steps[0]
        assert first.output is not None
        assert first.output["finish_reason"] == "tool_calls"
        assert first.budgets.tool_calls == 1
        assert "finish reason claimed" in report.html
        assert "as reconciled" in report.html
        assert "1 tool call(s)" in report.html

    def test_the_loop_ladder_is_shown_against_the_exact_rule(self) -> None:
        """ToolBench's five-in-a-row run under the ladder: the page shows the warnings, the ask
        and the stop rung, and marks where the default policy decided otherwise."""
        run = TAU / "toolbench" / "data_example" / "answer" / "G3_answer"
        (path,) = run.glob("8_*.json")
        report = build([str(path)], Policy(loops=True), against=Policy())
        (view,) = report.runs
        assert view.result.exit_reason == "doom_loop"
        assert "loop warning: search_basic_free_for_streaming_availability(" in report.html
        for rung in ("ask", "stop"):
            assert f"LoopRung({rung!r})" in html.unescape(report.html)
        assert view.differs
        assert view.against_exit == "doom_loop"

    def test_foreign_formats_are_reported(self) -> None:
        """A tau-bench file from the corpus becomes a page like an agentfsm trace."""
        files = sorted((TAU / "tau-bench").glob("*.json"))
        if not files:
            pytest.fail(f"trajectory corpus missing: expected tau-bench files under {TAU}")
        report = build([str(files[0])])
        assert report.runs
        assert all(v.format == "tau-bench" for v in report.runs)
        assert sum(len(v.steps) for v in report.runs) > 0


class TestBadInput:
    def test_tool_output_is_escaped_never_markup(self, doom_trace: Path) -> None:
        """Script and tags a tool wrote appear as text; none of it is markup in the page."""
        html = build([str(doom_trace)]).html
        assert INJECTED not in html
        assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html
        assert html.count("<script") == 2  # the data block and the page's own script
        assert "<b>bold</b>" not in html

    def test_the_page_only_runs_its_own_script(self, doom_trace: Path) -> None:
        """The Content-Security-Policy allows one script, by hash, and no network."""
        html = build([str(doom_trace)]).html
        csp = re.search(r'Content-Security-Policy" content="([^"]+)"', html)
        assert csp is not None
        assert "default-src 'none'" in csp.group(1)
        assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]+'$", csp.group(1))
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)

    def test_long_output_is_cut_with_its_size(self) -> None:
        """A text above MAX_TEXT keeps MAX_TEXT characters and says how many were cut."""
        text = "x" * (MAX_TEXT + 1234)
        cut = clip(text)
        assert cut.startswith("x" * MAX_TEXT)
        assert "1,234 more characters" in cut
        assert len(cut) < MAX_TEXT + 100

    def test_a_torn_last_line_names_file_and_line(self, doom_trace: Path, tmp_path: Path) -> None:
        """A trace cut mid-line is refused with its file and line, exit 2, no page."""
        torn = tmp_path / "torn.jsonl"
        torn.write_bytes(doom_trace.read_bytes()[:-40])
        lines = torn.read_text().count("\n") + 1
        done = report_cli(str(torn), "-o", str(tmp_path / "out.html"), cwd=tmp_path)
        assert done.returncode == 2
        assert f"torn.jsonl:{lines}" in done.stderr
        assert not (tmp_path / "out.html").exists()

    def test_a_run_with_no_steps_is_a_correct_page(self, doom_trace: Path, tmp_path: Path) -> None:
        """A trace that only started gives a page saying nothing was routed."""
        started = tmp_path / "started.jsonl"
        started.write_text(doom_trace.read_text().splitlines()[0] + "\n")
        html = build([str(started)]).html
        assert "nothing was routed" in html

    def test_odd_file_names_are_escaped(self, tmp_path: Path) -> None:
        """A file name with markup characters is shown as text."""
        odd = write_final(tmp_path / "a<b>&'\"x.jsonl")
        html = build([str(odd)]).html
        assert "a&lt;b&gt;&amp;&#x27;&quot;x.jsonl" in html
        assert "a<b>" not in html

    def test_a_missing_output_folder_is_a_usage_error(self, final_trace: Path) -> None:
        """`-o` into a folder that does not exist exits 2 naming it."""
        done = report_cli(str(final_trace), "-o", "no/such/dir/r.html", cwd=final_trace.parent)
        assert done.returncode == 2
        assert "does not exist" in done.stderr


class TestCommand:
    def test_writes_one_page_for_a_directory(self, tmp_path: Path) -> None:
        """A directory of traces gives one page with a table of runs by exit reason."""
        runs = tmp_path / "runs"
        runs.mkdir()
        write_doom_loop(runs / "one.jsonl")
        write_final(runs / "two.jsonl", turns=2)
        (runs / "notes.json").write_text('{"not": "a trace"}')
        out = tmp_path / "report.html"
        done = report_cli(str(runs), "-o", str(out), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        html = out.read_text()
        shown = (
            "Runs by exit reason",
            "<td>doom_loop</td>",
            "<td>completed</td>",
            "href='#r0'",
            "href='#r1'",
            "1 file(s) skipped",
        )
        assert [part for part in shown if part not in html] == []

    def test_against_lists_the_differing_turns_and_exits_one(
        self, doom_trace: Path, tmp_path: Path
    ) -> None:
        """With a looser second policy, the stopped step is listed side by side; exit 1."""
        loose = tmp_path / "loose.json"
        loose.write_text('{"repeat_threshold": 6}')
        out = tmp_path / "r.html"
        done = report_cli(str(doom_trace), "--against", str(loose), "-o", str(out), cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        html = out.read_text()
        assert "Where the policies differ" in html
        row = re.search(r"<tr class='difference'>(.*?)</tr>", html)
        assert row is not None
        assert "stop" in row.group(1)
        assert "execute_tools" in row.group(1)

    def test_same_policy_exits_zero(self, doom_trace: Path) -> None:
        """Against an identical policy nothing differs."""
        report = build([str(doom_trace)], Policy(), against=Policy())
        assert not report.differs
        assert "decided the same at every step" in report.html


class TestRecordedPolicy:
    def test_an_agentfsm_trace_is_shown_as_it_was_decided_live(self, tmp_path: Path) -> None:
        """A run recorded under a loose policy is reported under that policy, not the defaults."""
        from agentfsm import Action, Controller, ToolResult
        from agentfsm._replay.trace import TraceWriter
        from agentfsm.testing import call, turn

        path = tmp_path / "loose.jsonl"
        with TraceWriter(path) as writer:
            ctl = Controller(Policy(repeat_threshold=6), observers=[writer])
            for i in range(4):
                d = ctl.on_model_output(turn("", [call("poll", {"job": 1}, id=f"p{i}")]))
                assert d.action is Action.EXECUTE_TOOLS
                ctl.on_tool_results([ToolResult(call_id=f"p{i}", content="pending")])
            assert ctl.on_model_output(turn("done")).action is Action.FINAL
        (view,) = build([str(path)]).runs
        assert view.exit_reason == "completed"
        strict = Policy(on_repeat="stop")
        assert build([str(path)], strict).runs[0].exit_reason != "completed"


def _loose_trace(path: Path, policy: Policy) -> Path:
    from agentfsm import Controller
    from agentfsm._replay.trace import TraceWriter
    from agentfsm.testing import turn

    with TraceWriter(path) as writer:
        Controller(policy, observers=[writer]).on_model_output(turn("done"))
    return path


class TestHeaderNamesThePolicy:
    """The page's header names the policy the runs replayed under, and where it came from."""

    def test_the_recorded_policy_not_the_defaults(self, tmp_path: Path) -> None:
        """A proxy's or a Controller's trace records its policy, which the runs replay under:
        the header used to show the defaults (max_turns 50) instead."""
        recorded = Policy(max_turns=7, permission_rules=["deny rm", "ask bash(command~git *)"])
        html = build([str(_loose_trace(tmp_path / "a.jsonl", recorded))]).html
        header = html[html.index("<header") : html.index("</header>")]
        assert "policy (recorded in the trace): max_turns 7" in header
        assert "<code>deny rm</code>, <code>ask bash(command~git *)</code>" in header

    def test_given_mixed_and_none(self, tmp_path: Path) -> None:
        a = _loose_trace(tmp_path / "a.jsonl", Policy(max_turns=7))
        b = _loose_trace(tmp_path / "b.jsonl", Policy(max_turns=9))
        given = build([str(a)], Policy(max_turns=3)).html
        assert "policy (given): max_turns 3" in given
        mixed = build([str(a), str(b)]).html
        assert "each run&#x27;s own: the traces recorded 2 different policies" in mixed
        tau = build([str(sorted((TAU / "tau-bench").glob("*.json"))[0])]).html
        assert "policy (the defaults: the traces record no policy): max_turns 50" in tau


class TestArguments:
    @pytest.mark.parametrize(
        ("kwargs", "error"),
        [
            ({"paths": None}, "InvalidInputError"),
            ({"paths": [1]}, "InvalidInputError"),
            ({"paths": ["x"], "policy": {"max_turns": 3}}, "PolicyError"),
            ({"paths": ["x"], "against": "loose.toml"}, "PolicyError"),
            ({"paths": ["x"], "title": None}, "InvalidInputError"),
        ],
    )
    def test_bad_arguments_raise_agentfsm_errors_naming_them(
        self, kwargs: dict[str, object], error: str
    ) -> None:
        """A wrong kind of argument to build() is refused before any file is read."""
        from agentfsm.exceptions import AgentFSMError

        with pytest.raises(AgentFSMError) as caught:
            build(**kwargs)  # type: ignore[arg-type]
        assert type(caught.value).__name__ == error
