"""Replay: feed a recorded run's steps through a fresh Controller and record what it decides.

The rules, in the order a reviewer asks about them:
- A model output goes to `on_model_output`. When the controller decides
  EXECUTE_TOOLS, the recorded results are fed for the calls it executes,
  paired by call id when the id is unambiguous, else by position (tau-bench
  reuses ids within a run). An executed call with no recorded result is
  counted in `missing_results`; the controller synthesizes its error result.
- A user message goes to `on_user_message`, or answers a pending ASK_HUMAN
  as `on_human_reply(approved=True, message=...)`. Recorded tool results
  while a human is asked mean the recorded agent went ahead: approved.
- After FINAL, a user message opens a new episode (a fresh Controller, same
  policy) once the next model output arrives: conversational traces
  (tau-bench) are many episodes, and the summary adds them up.
- After STOP (or FINAL with no user message before the next model output)
  replay of the run ends; `not_replayed` counts the model outputs left.
- When the recording ends while the controller still awaits something,
  `exit_reason` is None and `recorded_end` says how the recording ended.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from agentfsm._engine.controller import Controller
from agentfsm._engine.policy import Policy
from agentfsm._model._errors import at_call
from agentfsm._model.types import (
    Action,
    Decision,
    ModelTurn,
    ToolCall,
    ToolResult,
)
from agentfsm._replay.trajectories import (
    ApprovalChange,
    Charged,
    HumanReply,
    ModelOutput,
    RecordedRun,
    Step,
    Stopped,
    ToolResults,
    UserMessage,
)
from agentfsm._replay.trajectories._agentfsm import scope_of_record
from agentfsm._replay.trajectories._pairing import pair_results
from agentfsm.exceptions import AgentFSMError, DefinitionError, PolicyError, TraceError

_LATER_STEPS = (ToolResults, UserMessage, HumanReply, Stopped, ApprovalChange, Charged)
"""The steps other than a model output."""

__all__ = [
    "Comparison",
    "DecisionRecord",
    "JudgedCall",
    "ReplayResult",
    "compare",
    "divergence",
    "keyed",
    "recorded_policy",
    "replay_run",
]

Observer = Callable[[Mapping[str, Any]], None]
_AWAITS = {
    "end": "nothing",
    "execute": "results",
    "handoff": "results",
    "await_human": "human",
}
"""What a controller in each resting state waits for; anything else awaits the model."""


class DecisionRecord(NamedTuple):
    """One decision the controller made during replay, and what it answered.

    A named tuple, light and immutable: replay keeps one per decision (about two per
    model output).
    """

    turn: int
    """Model outputs replayed in this run when it decided (across episodes)."""
    episode: int
    """Which episode (fresh controller) of the run, from 1."""
    input: str
    """What it answered: `model_output`, `tool_results` or `human_reply`."""
    action: str
    priority: str
    layer: int
    guard: str
    fired: str
    reason: str
    exit_reason: str | None
    path: tuple[str, ...]

    def brief(self) -> dict[str, Any]:
        """The five fields `--json` prints for every decision."""
        return {
            "turn": self.turn,
            "action": self.action,
            "priority": self.priority,
            "guard": self.guard,
            "reason": self.reason,
        }


class JudgedCall(NamedTuple):
    """A call the replayed policy judged, kept when the replay has a shadow beside it.

    `agentfsm replay --against` replays each run under each policy with the other as its
    shadow, and compares the calls both reached by `turn` and `call_id`.
    """

    turn: int
    """Model outputs replayed in this run when the call was judged (across episodes)."""
    call_id: str
    tool: str
    call: str
    """The call in one short line (`name({...})`), for an example."""
    verdict: str
    """The replayed policy's verdict: allow, ask or deny."""
    source: str
    """What decided it: the rule, the table entry, the hook, or why the call was refused."""


@dataclass(slots=True)
class ReplayResult:
    """What a policy decided over one recorded run, with the counts a summary needs."""

    source: str
    run: str
    format: str
    steps: int = 0
    """Model outputs replayed."""
    exit_reason: str | None = None
    """Why the last episode's controller ended; None when it was still waiting."""
    decisions: list[DecisionRecord] = field(default_factory=list)
    tool_calls: int = 0
    """Calls the controller decided to execute, those a human's approval cleared included."""
    recorded_calls: int = 0
    """Calls in the replayed model outputs."""
    recorded_end: str | None = None
    """How the recording says the run ended."""
    episodes: int = 1
    episode_exits: list[str | None] = field(default_factory=list)
    not_replayed: int = 0
    """Recorded model outputs left after the controller ended the run."""
    missing_results: int = 0
    """Executed calls with no recorded result (the controller synthesized one)."""
    unmatched_results: int = 0
    """Recorded results for calls the controller did not execute."""
    actions: Counter[str] = field(default_factory=Counter)
    exits: Counter[str] = field(default_factory=Counter)
    """Exit reasons of every decision that ended an episode."""
    stops: list[str] = field(default_factory=list)
    """The reason of every STOP and ASK_HUMAN decision."""
    notes: list[str] = field(default_factory=list)
    judged: list[JudgedCall] = field(default_factory=list)
    """Every call the policy judged, with its verdict; kept only when a shadow is given."""

    def add(self, decision: Decision, kind: str, keep: bool) -> None:
        """Count one decision, and keep it when asked to."""
        # A vocabulary member is its own value as a str: `str()` gives that text, without the
        # two Python calls of enum's `.value` (read tens of times per decision below).
        action = str(decision.action)
        self.actions[action] += 1
        # Counted on every input, as the controller's budget counts them: the calls a human's
        # approval clears run too.
        if decision.action is Action.EXECUTE_TOOLS:
            self.tool_calls += len(decision.tool_calls)
        exit_reason = None
        if decision.exit_reason is not None:
            exit_reason = str(decision.exit_reason)
            self.exits[exit_reason] += 1
        if action in _STOPPING:
            self.stops.append(f"{action}: {decision.reason}")
        if keep:
            record = DecisionRecord(
                turn=self.steps,
                episode=self.episodes,
                input=kind,
                action=action,
                priority=str(decision.priority),
                layer=decision.layer,
                guard=decision.guard,
                fired=decision.fired,
                reason=decision.reason,
                exit_reason=exit_reason,
                path=tuple(map(str, decision.path)),
            )
            self.decisions.append(record)

    def close_episode(self, exit_reason: Any) -> None:
        """Close the current episode with its exit reason and count the next one."""
        self.episode_exits.append(None if exit_reason is None else str(exit_reason))
        self.episodes = len(self.episode_exits) + 1

    def summary(self) -> dict[str, Any]:
        """Every count of the run as a JSON object, without the decisions."""
        return {
            "source": self.source,
            "run": self.run,
            "format": self.format,
            "steps": self.steps,
            "exit_reason": self.exit_reason,
            "recorded_end": self.recorded_end,
            "tool_calls": self.tool_calls,
            "recorded_calls": self.recorded_calls,
            "episodes": len(self.episode_exits),
            "not_replayed": self.not_replayed,
            "missing_results": self.missing_results,
            "unmatched_results": self.unmatched_results,
            "actions": dict(self.actions),
            "stops": self.stops,
        }


_STOPPING = frozenset({Action.STOP.value, Action.ASK_HUMAN.value})


@dataclass(frozen=True, slots=True)
class Comparison:
    """Where two replays of the same run decided differently."""

    against: dict[int, str | None]
    """For each differing decision of the first replay (by index), the other's action."""
    extra: int
    """Decisions the second replay made beyond the first's last one."""
    exit_reasons: tuple[str | None, str | None]

    @property
    def differs(self) -> bool:
        """Whether any decision or the exit reason differs."""
        return bool(self.against) or self.extra > 0 or self.exit_reasons[0] != self.exit_reasons[1]


@at_call
def compare(first: ReplayResult, second: ReplayResult) -> Comparison:
    """Align two replays' decisions by (turn, order within the turn) and list the differences."""
    for name, value in (("first", first), ("second", second)):
        if not isinstance(value, ReplayResult):
            raise TraceError(
                f"compare takes two ReplayResults (from replay_run); {name} is a "
                f"{type(value).__name__}"
            )
    theirs = dict(keyed(second.decisions))
    against: dict[int, str | None] = {}
    seen = set()
    for index, (key, record) in enumerate(keyed(first.decisions)):
        seen.add(key)
        other = theirs.get(key)
        if other is None or other.action != record.action:
            against[index] = None if other is None else other.action
    extra = sum(1 for key in theirs if key not in seen)
    return Comparison(against, extra, (first.exit_reason, second.exit_reason))


def keyed(records: list[DecisionRecord]) -> list[tuple[tuple[int, int, int], DecisionRecord]]:
    """Each decision with the key `compare` aligns by: (episode, turn, order within the turn)."""
    out = []
    order: Counter[tuple[int, int]] = Counter()
    for record in records:
        order[(record.episode, record.turn)] += 1
        out.append(((record.episode, record.turn, order[(record.episode, record.turn)]), record))
    return out


def recorded_policy(run: RecordedRun) -> Policy | None:
    """The policy an agentfsm trace recorded for `run`, rebuilt; None when it recorded none.

    Raises TraceError when the recorded policy cannot be rebuilt (a guard given
    as a plain function records only its name): pass a policy file instead.
    """
    data = run.info.get("policy")
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise TraceError(f"{run.source}: run {run.id}: the recorded policy is not an object")
    try:
        return Policy.from_mapping(data, source=f"{run.source}: run {run.id}: recorded policy")
    except PolicyError as exc:
        raise TraceError(f"{exc.message}; replay it with --policy FILE instead") from exc


def divergence(run: RecordedRun, result: ReplayResult) -> str | None:
    """Where a replay decided otherwise than its recording did, in one line; None if nowhere.

    Only agentfsm traces record decisions. Decisions are compared by action,
    priority, guard and exit reason, in order (reasons may differ in notes only).
    """
    recorded = run.recorded
    if recorded is None:
        return None
    replayed = [(d.action, d.priority, d.guard, d.exit_reason) for d in result.decisions]
    for index, (live, again) in enumerate(zip(recorded, replayed, strict=False)):
        if live != again:
            turn = result.decisions[index].turn
            return (
                f"decision {index + 1} (turn {turn}) was {_brief(live)} when recorded, "
                f"{_brief(again)} in replay"
            )
    if len(recorded) != len(replayed):
        return f"{len(recorded)} decisions were recorded, {len(replayed)} replayed"
    return None


def _brief(decision: tuple[str, str, str, str | None]) -> str:
    action, priority, guard, exit_reason = decision
    end = f" ({exit_reason})" if exit_reason else ""
    return f"{action}{end} {priority} {guard}"


@at_call
def replay_run(
    run: RecordedRun,
    policy: Any = None,
    *,
    observers: Iterable[Observer] = (),
    keep_decisions: bool = True,
    shadow: Any = None,
) -> ReplayResult:
    """Replay one recorded run through `policy`; by default the one its trace recorded.

    An agentfsm trace records its policy and declared tools: with `policy`
    None the replay uses them (so replay gives the live decisions), other
    formats the default Policy. A given `policy` overrides the recorded one;
    the recorded tools are kept.

    Args:
        run: The recorded run; its steps are iterated once.
        policy: An `agentfsm.Policy`, or None for the recorded one (or the defaults).
        observers: Passed to every Controller the replay creates (e.g. a TraceWriter).
        keep_decisions: Keep every decision in the result (False keeps only counts).
        shadow: A candidate policy judged beside `policy` on every replayed call; its
            verdicts are in the decision events `observers` receive (docs/shadow.md).
    """
    if not isinstance(run, RecordedRun):
        raise TraceError(
            "replay_run takes a RecordedRun (from agentfsm._replay.trajectories.read_runs), "
            f"not {type(run).__name__}"
        )
    if isinstance(observers, str | bytes | Mapping) or not isinstance(observers, Iterable):
        raise DefinitionError(
            f"observers must be a list of callables, not {type(observers).__name__}"
        )
    replayer = _Replayer(run, policy, tuple(observers), keep_decisions, shadow)
    for step in run.steps:
        replayer.feed(step)
    return replayer.finish()


class _Replayer:
    """The replay of one run: the live controller and what it has decided so far."""

    def __init__(
        self,
        run: RecordedRun,
        policy: Any,
        observers: tuple[Observer, ...],
        keep: bool,
        shadow: Any = None,
    ) -> None:
        if policy is None:
            policy = recorded_policy(run) or Policy()
        self.policy = policy
        self.tools = run.info.get("tools")
        self.run = run
        self.observers = observers
        self.keep = keep
        self.result = ReplayResult(source=run.source, run=run.id, format=run.format)
        self.now = [0.0]
        """The replayed run's clock: the time the recording gives for the step being fed
        (it stands still where the recording gives none)."""
        self.clock = partial(list.__getitem__, self.now, 0)
        """Reads `now` with no reference back to this replayer, so a finished run's
        controllers are freed at once instead of waiting in a cycle for the collector."""
        self.shadow = shadow
        """A candidate policy the replayed controllers judge every call by (never enforced)."""
        self.ctl = self._new_controller()
        self.last: Decision | None = None
        self.turn_calls: list[ToolCall] = []
        self.waiting_users: list[str] = []
        self.stopped = False

    def _new_controller(self) -> Any:
        run_id = f"{self.run.id}#{self.result.episodes}"
        return Controller(
            self.policy,
            self.tools,
            run_id=run_id,
            observers=self.observers,
            clock=self.clock,
            shadow=self.shadow,
        )

    # -- what the controller waits for -----------------------------------------------------

    def _awaits(self) -> str:
        return _AWAITS.get(self.ctl.state, "model")

    def _record(self, decision: Decision, kind: str) -> Decision:
        self.last = decision
        self.result.add(decision, kind, self.keep)
        return decision

    # -- steps -----------------------------------------------------------------------------

    def feed(self, step: Step) -> None:
        elapsed = getattr(step, "elapsed", None)
        if elapsed is not None:
            self.now[0] = elapsed
        if isinstance(step, ModelOutput):
            self._model(step.turn)
        elif not isinstance(step, _LATER_STEPS):
            raise TraceError(
                f"{self.run.source}: run {self.run.id}: a step is a {type(step).__name__}, not "
                "a ModelOutput, ToolResults, UserMessage, HumanReply, Stopped, ApprovalChange "
                "or Charged"
            )
        elif not self.stopped:
            self._later(step)

    def _later(self, step: Step) -> None:
        """A step after a model output, given to the Controller as the recording did."""
        if isinstance(step, ToolResults):
            self._results(step.results)
        elif isinstance(step, UserMessage):
            self._user(step.text)
        elif isinstance(step, HumanReply):
            self._human(step)
        elif isinstance(step, Stopped):
            self._stop(step)
        elif isinstance(step, ApprovalChange):
            self._approval(step)
        elif isinstance(step, Charged):
            self.ctl.charge(step.usage)

    def _model(self, turn: ModelTurn) -> None:
        if self.stopped or not self._ready_for_model():
            self.stopped = True
            self.result.not_replayed += 1
            return
        self.result.steps += 1
        decision = self._record(self.ctl.on_model_output(turn), "model_output")
        if decision.shadow:
            self._judged(turn, decision)
        self.turn_calls = turn.tool_calls  # read, never changed
        self.result.recorded_calls += len(turn.tool_calls)

    def _judged(self, turn: ModelTurn, decision: Decision) -> None:
        """Keep the policy's verdict on each call of `turn` (the shadow judged them too)."""
        recorded = turn.tool_calls
        calls = {call.id: call for call in recorded}
        for index, judged in enumerate(decision.shadow):
            call = calls.get(judged.call_id)
            if call is None and index < len(recorded) and recorded[index].name == judged.tool:
                call = recorded[index]  # recorded without an id: the controller gave it one
            brief = judged.tool if call is None else _brief_call(call)
            self.result.judged.append(
                JudgedCall(
                    self.result.steps,
                    judged.call_id,
                    judged.tool,
                    brief,
                    judged.enforced,
                    judged.enforced_source,
                )
            )

    def _ready_for_model(self) -> bool:
        """Bring the controller to await the model as the recording did; False if it ended."""
        awaits = self._awaits()
        if awaits == "model":
            return True
        if awaits == "nothing":
            return self._next_episode()
        if awaits == "human":
            self._record(self.ctl.on_human_reply(approved=True), "human_reply")
            awaits = self._awaits()
        if awaits == "results":
            self.result.missing_results += len(self.last.tool_calls if self.last else ())
            self._record(self.ctl.on_tool_results([]), "tool_results")
        return not self.ctl.done

    def _next_episode(self) -> bool:
        if self.last is None or self.last.action is not Action.FINAL or not self.waiting_users:
            return False
        self.result.close_episode(self.ctl.exit_reason)
        self.ctl = self._new_controller()
        self.last = None
        for text in self.waiting_users:
            self.ctl.on_user_message(text)
        self.waiting_users = []
        return True

    def _results(self, results: tuple[ToolResult, ...]) -> None:
        awaits = self._awaits()
        if awaits == "nothing":
            return
        if awaits == "human":
            self._record(self.ctl.on_human_reply(approved=True), "human_reply")
            awaits = self._awaits()
        if awaits != "results" or self.last is None:
            self.result.unmatched_results += len(results)
            return
        paired, missing = pair_results(self.turn_calls, self.last.tool_calls, results)
        self.result.missing_results += missing
        self.result.unmatched_results += len(results) - len(paired)
        self._record(self.ctl.on_tool_results(paired), "tool_results")

    def _user(self, text: str) -> None:
        awaits = self._awaits()
        if awaits == "nothing":
            self.waiting_users.append(text)
        elif awaits == "human":
            self._record(self.ctl.on_human_reply(approved=True, message=text), "human_reply")
        elif awaits == "model" or self._ready_for_model():
            self.ctl.on_user_message(text)

    def _human(self, step: HumanReply) -> None:
        if self._awaits() == "human":
            asked = [c.id for c in self.ctl.pending_calls]
            approved, messages, arguments = _fitted(step, asked)
            remember = step.remember and {i: s for i, s in step.remember.items() if i in asked}
            decision = self.ctl.on_human_reply(
                approved, step.message, messages=messages, arguments=arguments, remember=remember
            )
            self._record(decision, "human_reply")
        else:
            self.result.notes.append("a recorded human reply came when no human was asked")

    def _approval(self, step: ApprovalChange) -> None:
        """A grant or revocation of the host's, given again (the ids match under the policy
        that made them; under another, a revocation of an id it never made is a note)."""
        record = step.approval
        try:
            if step.granted:
                self.now[0] = float(record.get("granted_at") or 0.0)
                self.ctl.grant(
                    str(record["tool"]),
                    scope=scope_of_record(record),
                    pattern=record.get("pattern"),
                    arguments=None if record.get("pattern") is not None else record["arguments"],
                    source=str(record.get("source") or "host"),
                )
            else:
                self.ctl.revoke(str(record["id"]))
        except (AgentFSMError, KeyError, TypeError) as exc:
            what = "grant" if step.granted else "revocation"
            self.result.notes.append(f"a recorded {what} of an approval was not replayed: {exc}")

    def _stop(self, step: Stopped) -> None:
        # Under another policy the run may have ended before the host stopped it: then
        # the host's stop came too late to change anything, as it would have live.
        if not self.ctl.done:
            self._record(self.ctl.stop(step.reason, step.message), "stop")

    def finish(self) -> ReplayResult:
        exit_reason = self.ctl.exit_reason if self.ctl.done else None
        self.result.close_episode(exit_reason)
        self.result.exit_reason = None if exit_reason is None else str(exit_reason)
        self.result.recorded_end = self.run.end
        return self.result


_BRIEF_CALL = 120
"""Characters of a call's arguments an impact example shows."""


def _brief_call(call: ToolCall) -> str:
    try:
        text = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):  # an example only: never fail the replay
        text = "{...}"
    if len(text) > _BRIEF_CALL:
        text = text[: _BRIEF_CALL - 3] + "..."
    return f"{call.name}({text})"


def _fitted(
    step: HumanReply, asked: list[str]
) -> tuple[bool | dict[str, bool], dict[str, str] | None, dict[str, dict[str, Any]] | None]:
    """A recorded per-call reply fitted to the calls this policy asks about.

    Replayed under its own policy, the same calls are asked and the reply is given
    as recorded. Under another policy, a call asked now but not then had gone ahead
    live (approved, as recorded results while a human is asked are), and the texts
    and edits of calls not asked now are dropped.
    """
    approved = step.approved
    if type(approved) is dict:
        approved = {i: approved.get(i, True) for i in asked}
        yes = [i for i in asked if approved[i]]
    else:
        yes = asked if approved else []
    messages = step.messages and {i: t for i, t in step.messages.items() if i in asked}
    arguments = step.arguments and {i: a for i, a in step.arguments.items() if i in yes}
    return approved, messages, arguments
