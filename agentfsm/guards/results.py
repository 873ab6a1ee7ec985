"""Layer 2 guards: what the tool results say."""

from __future__ import annotations

from agentfsm._model.snapshot import RunSnapshot
from agentfsm._model.types import ExitReason, Priority
from agentfsm.exceptions import PolicyError
from agentfsm.guards._base import ON_RESULTS, Guard, Hit, cached, check_number

__all__ = ["FinalTool", "ResultsReady", "ToolErrorLimit", "ToolFailed"]


class ToolErrorLimit(Guard):
    """Stop when `n` repair rounds in a row failed: P5 repairs are bounded.

    A round is one turn's calls and their results; it failed when any of its calls
    failed or was refused, however many did, so a parallel batch that failed whole is
    one round and its errors reach the model unless it was the `n`-th. Past the bound
    the failure is no longer recoverable, so the stop is a P6 boundary, evaluated
    before the model's intent like every other limit.
    """

    layer = 2
    priority = Priority.P6
    exit_reason = ExitReason.TOOL_ERRORS
    acts_on_answers = False

    def __init__(self, n: int) -> None:
        check_number("ToolErrorLimit", "limit", n, minimum=1, integer=True)
        self.n = n

    def _args(self) -> tuple[tuple[object, ...], dict[str, object]]:
        return (self.n,), {}

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if snap.tool_errors_in_a_row < self.n:
            return None
        return Hit(
            self,
            f"{snap.tool_errors_in_a_row} rounds of tool calls in a row failed (limit {self.n})",
            self.exit_reason,
        )


class ToolFailed(Guard):
    """Feed the errors back to the model when a call failed or was refused.

    A call a user message skipped did not fail: its result says so, and it is no error here.
    """

    layer = 2
    priority = Priority.P5

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        skipped = snap.skipped
        if not snap.rejected:
            for result in snap.results:
                if result.is_error and result.call_id not in skipped:
                    break
            else:
                return None
        failed = [r for r in snap.rejected if r.is_error]
        failed += [r for r in snap.results if r.is_error and r.call_id not in skipped]
        why = "; ".join(f"{r.call_id}: {_short(r.content)}" for r in failed[:3])
        more = f" (+{len(failed) - 3} more)" if len(failed) > 3 else ""
        return Hit(
            self,
            f"{len(failed)} tool call(s) failed, errors go back to the model: {why}{more}",
            self.exit_reason,
        )


class FinalTool(Guard):
    """Check the answer when a call to one of `names` succeeded: its result is the answer.

    The host decides the end (mini-swe-agent's submit command, the OpenAI Agents
    SDK's `StopAtTools`), and the result is a final output like a model's answer:
    the edge leads to verify, whose completion checks end the run as completed or
    continue it with their reason (P4). An error result from such a tool (a skipped
    call's too) does not end the run.
    """

    phases = ON_RESULTS
    layer = 3
    priority = Priority.P3
    exit_reason = ExitReason.COMPLETED

    def __init__(self, *names: str) -> None:
        if not names or not all(isinstance(n, str) and n for n in names):
            raise PolicyError(f"FinalTool needs one or more tool names, got {names!r:.80}")
        self.names = frozenset(names)

    def _args(self) -> tuple[tuple[object, ...], dict[str, object]]:
        return tuple(sorted(self.names)), {}

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        for result in snap.results:
            if result.name in self.names and not result.is_error:
                return Hit(
                    self,
                    f"{result.name} ({result.call_id}) returned: its result is the answer",
                    self.exit_reason,
                )
        return None


class ResultsReady(Guard):
    """Call the model again when every call has its result."""

    phases = ON_RESULTS
    layer = 2
    priority = Priority.P1

    def __init__(self) -> None:
        self._hits: dict[int, Hit] = {}
        """Hits by the number of results: the reason is the same for every round of that size."""

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if snap.phase != "tool_results":
            return None
        count = len(snap.results)
        hit = self._hits.get(count)
        if hit is None:
            reason = f"{count} result(s) ready for the model"
            hit = cached(self._hits, count, Hit(self, reason, self.exit_reason))
        return hit


def _short(content: object, limit: int = 80) -> str:
    text = content if isinstance(content, str) else repr(content)
    return text if len(text) <= limit else text[: limit - 3] + "..."
