"""Review a run as a page: the path through the machine, turn by turn.

`build(paths, policy)` replays every run the files hold (any format `agentfsm replay`
reads) and returns one self-contained HTML page (`agentfsm report TRACE... -o report.html`):
the machine with the selected step's path highlighted, every step's normalized output,
decision and results, the budgets used, and with `against` where two policies differ.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from agentfsm.core.policy import Policy
from agentfsm.exceptions import TraceError
from agentfsm.replay.trajectories import expand_paths, read_runs
from agentfsm.report.collect import RunView, collect_run
from agentfsm.report.render import page

__all__ = ["Report", "build"]


@dataclass(slots=True)
class Report:
    """A built page and what went into it."""

    html: str
    runs: list[RunView]
    skipped: list[str] = field(default_factory=list)
    """Files found in directories whose format is not a recorded run."""

    @property
    def differs(self) -> bool:
        """Whether a second policy decided otherwise in any run."""
        return any(view.differs for view in self.runs)


def build(
    paths: Iterable[str],
    policy: Policy | None = None,
    *,
    against: Policy | None = None,
    title: str = "agentfsm run report",
) -> Report:
    """Replay the runs in `paths` (files, directories, globs) and render the page.

    Without `policy`, an agentfsm trace replays under the policy and tools it recorded (so
    the page shows what the live run decided) and other formats under the defaults.

    Raises:
        TraceError: a file named explicitly is unreadable or malformed (the message names
            the file and line), or no run was found at all.
    """
    views: list[RunView] = []
    skipped: list[str] = []
    files = expand_paths(paths)
    for path, explicit in files:
        try:
            views.extend(collect_run(run, policy, against) for run in read_runs(path))
        except TraceError as exc:
            if explicit or "unknown trajectory format" not in exc.message:
                raise
            skipped.append(path)
    if not files:
        raise TraceError("no trace files given or found", path=None, line=None)
    shown = Policy() if policy is None else policy
    html = page(views, shown, title=title, against=against, skipped=skipped)
    return Report(html, views, skipped)
