"""Layer 4 guards: loop risk (repetition, no progress, endless retries)."""

from __future__ import annotations

from agentfsm._model.call_identity import describe
from agentfsm._model.snapshot import RunSnapshot
from agentfsm._model.types import ExitReason, Priority
from agentfsm.exceptions import PolicyError
from agentfsm.guards._base import ON_OUTPUT, Guard, Hit, check_number, runs_any

__all__ = ["LoopRung", "NoProgress", "RepeatedCall", "RetriesExhausted"]


class _Threshold(Guard):
    minimum = 1
    acts_on_answers = False

    def __init__(self, n: int) -> None:
        check_number(type(self).__name__, "threshold", n, minimum=self.minimum, integer=True)
        self.n = n

    def _args(self) -> tuple[tuple[object, ...], dict[str, object]]:
        return (self.n,), {}


class RepeatedCall(_Threshold):
    """Stop (or ask) at the `n`-th identical consecutive round of tool calls.

    A round is every call of one turn, refused and denied ones included
    (identical parallel calls in one turn are one round); a user message resets
    the count. With `feedback=True` the guard reports a round that validation
    already refused as a repeat (`on_repeat="feedback"`): it applies only when
    none of the turn's calls runs, and the model is told why.
    """

    phases = ON_OUTPUT
    layer = 4
    priority = Priority.P6
    exit_reason = ExitReason.DOOM_LOOP

    def __init__(self, n: int, *, feedback: bool = False) -> None:
        super().__init__(n)
        if not isinstance(feedback, bool):
            raise PolicyError(f"RepeatedCall: feedback must be True or False, not {feedback!r}")
        self.feedback = feedback

    def _args(self) -> tuple[tuple[object, ...], dict[str, object]]:
        return (self.n,), ({"feedback": True} if self.feedback else {})

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if snap.repeat_streak < self.n or (self.feedback and runs_any(snap)):
            return None
        said = "; not executed, the model is told why" if self.feedback else ""
        return Hit(
            self,
            f"{snap.repeated or _calls(snap)} would be the {_nth(snap.repeat_streak)} identical "
            f"call in a row{said}",
            self.exit_reason,
        )


class LoopRung(Guard):
    """Apply when the round's calls reach `rung` of the policy's loop ladder (or a stronger one).

    The ladder (`Policy(loops=...)`, `agentfsm.guards.intent`) counts calls of one intent
    in a row, paraphrases included; validate writes the rung reached into the snapshot.
    `LoopRung("stop")` ends the run as DOOM_LOOP with a reason that says how to go on;
    `LoopRung("ask")` asks a human whether the repeat may run.
    """

    phases = ON_OUTPUT
    layer = 4
    priority = Priority.P6
    exit_reason = ExitReason.DOOM_LOOP
    acts_on_answers = False

    def __init__(self, rung: str) -> None:
        if rung not in ("ask", "stop"):
            raise PolicyError(f"LoopRung: rung must be 'ask' or 'stop', not {rung!r}")
        self.rung = rung

    def _args(self) -> tuple[tuple[object, ...], dict[str, object]]:
        return (self.rung,), {}

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        reached = snap.loop_rung
        if reached != "stop" and (self.rung == "stop" or reached != "ask"):
            return None
        what = f"{snap.repeated or _calls(snap)} would be the {_nth(snap.repeat_streak)} call "
        what += "of the same intent in a row, each with the same result"
        if self.rung == "stop":
            what += (
                "; to go on: send a user message (it resets the count), change the call, "
                "or raise the tool's `stop` rung in the policy's `loops`"
            )
        return Hit(self, what, self.exit_reason if self.rung == "stop" else None)


class NoProgress(_Threshold):
    """Stop when `n` rounds in a row learned nothing new.

    A tool round learns nothing when the same calls already gave the same
    results in one of the last 8 rounds (this catches A, B, A, B ping-pong that
    `RepeatedCall` misses); an answer learns nothing when it fails the
    completion checks.
    """

    layer = 4
    priority = Priority.P6
    exit_reason = ExitReason.NO_PROGRESS

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if snap.same_results_in_a_row >= self.n:
            return Hit(
                self,
                (
                    f"{snap.same_results_in_a_row} tool rounds in a row repeated recent calls "
                    "with identical results"
                ),
                self.exit_reason,
            )
        if snap.incomplete_in_a_row >= self.n:
            return Hit(
                self,
                f"{snap.incomplete_in_a_row} answers in a row failed the completion checks",
                self.exit_reason,
            )
        return None


class RetriesExhausted(_Threshold):
    """Give up when `n` recoveries in a row did not produce a usable output (0: at the first)."""

    minimum = 0

    layer = 4
    priority = Priority.P0
    exit_reason = ExitReason.UNRECOVERABLE_OUTPUT

    def __call__(self, snap: RunSnapshot) -> Hit | None:
        if snap.retries_in_a_row < self.n:
            return None
        return Hit(
            self,
            f"{snap.retries_in_a_row} retries in a row did not give a usable output",
            self.exit_reason,
        )


def _nth(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _calls(snap: RunSnapshot) -> str:
    return describe((*snap.executable, *snap.needs_approval))
