"""Review a run as a page: the path through the machine, turn by turn.

`build(paths, policy)` replays every run the files hold (any format `agentfsm replay`
reads) and returns one self-contained HTML page (`agentfsm report TRACE... -o report.html`):
the machine with the selected step's path highlighted, every step's normalized output,
decision and results, the budgets used, and with `against` where two policies differ.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from agentfsm._engine.policy import Policy
from agentfsm._replay.engine import recorded_policy
from agentfsm._replay.trajectories import RecordedRun, expand_paths, read_runs
from agentfsm._report.collect import RunView, collect_run
from agentfsm._report.render import page
from agentfsm.exceptions import InvalidInputError, PolicyError, TraceError

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
    paths: str | Iterable[str],
    policy: Policy | None = None,
    *,
    against: Policy | None = None,
    title: str = "agentfsm run report",
    only_diff: bool = False,
    on_run: Callable[[RunView], None] | None = None,
) -> Report:
    """Replay the runs in `paths` (files, directories, globs) and render the page.

    Without `policy`, an agentfsm trace replays under the policy and tools it recorded (so
    the page shows what the live run decided) and other formats under the defaults.
    With `only_diff` the page shows only the runs where `against` decided otherwise
    (`Report.runs` still holds every run); `on_run` is called with each run replayed.

    Raises:
        TraceError: a file named explicitly is unreadable or malformed (the message names
            the file and line), or no run was found at all.
        InvalidInputError: `paths` is not strings, or `title` is not a str.
        PolicyError: `policy` or `against` is not a Policy.
    """
    _check_arguments(paths, policy, against, title)
    if on_run is not None and not callable(on_run):
        raise InvalidInputError(f"on_run must be callable, not {type(on_run).__name__}")
    views: list[RunView] = []
    skipped: list[str] = []
    recorded: dict[str, Policy | None] = {}
    files = expand_paths([paths] if isinstance(paths, str) else paths)
    if only_diff and against is None:
        raise PolicyError("only_diff needs a second policy (against) to compare with")
    for path, explicit in files:
        try:
            for run in read_runs(path):
                if policy is None:
                    _note_recorded(recorded, run)
                views.append(collect_run(run, policy, against))
                if on_run is not None:
                    on_run(views[-1])
        except TraceError as exc:
            if explicit or "unknown trajectory format" not in exc.message:
                raise
            skipped.append(path)
    if not files:
        raise TraceError("no trace files given or found", path=None, line=None)
    shown, origin = _header_policy(policy, recorded)
    listed = [view for view in views if view.differs] if only_diff else views
    of = len(views) if only_diff else None
    html = page(listed, shown, title=title, against=against, skipped=skipped, of=of, origin=origin)
    return Report(html, views, skipped)


def _note_recorded(recorded: dict[str, Policy | None], run: RecordedRun) -> None:
    """Remember the policy `run`'s trace recorded (None: it recorded none), once per text."""
    found = recorded_policy(run)
    key = "" if found is None else json.dumps(found.to_json(), sort_keys=True, default=str)
    recorded.setdefault(key, found)


def _header_policy(policy: Policy | None, recorded: dict[str, Policy | None]) -> tuple[Policy, str]:
    """The policy the page's header names, and where it came from.

    Without `policy`, each run replayed under the policy its trace recorded (an MCP proxy's
    session, a Controller's run), or the defaults for a format that records none: the header
    names that policy, not the defaults, when every run recorded the same one.
    """
    if policy is not None:
        return policy, "given"
    if len(recorded) == 1:
        (only,) = recorded.values()
        if only is not None:
            return only, "recorded in the trace"
        return Policy(), "the defaults: the traces record no policy"
    if not recorded:
        return Policy(), "the defaults"
    return Policy(), (
        f"each run's own: the traces recorded {len(recorded)} different policies "
        "(the limits shown are the defaults)"
    )


def _check_arguments(paths: object, policy: object, against: object, title: object) -> None:
    """Refuse arguments of the wrong kind where they are given, naming them."""
    listed = [paths] if isinstance(paths, str) else paths
    if not isinstance(listed, list | tuple) or not all(isinstance(p, str) for p in listed):
        raise InvalidInputError(f"paths must be a list of str, not {paths!r:.80}")
    for name, value in (("policy", policy), ("against", against)):
        if value is not None and not isinstance(value, Policy):
            raise PolicyError(f"{name} must be a Policy or None, not {type(value).__name__}")
    if not isinstance(title, str):
        raise InvalidInputError(f"title must be a str, not {type(title).__name__}")
