"""The report as one self-contained HTML page.

Everything a model, a tool or a file name wrote is escaped; the page's only script is the
one in `assets`, allowed by its hash in the Content-Security-Policy, so even text that
slipped through could not run.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import shutil
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agentfsm._engine.policy import Policy
from agentfsm._report._approvals import covered_row
from agentfsm._report._approvals import section as approvals_section
from agentfsm._report.assets import SCRIPT, STYLE
from agentfsm._report.collect import Difference, RunView, StepView

__all__ = ["machine_svg", "page"]

FOLD = 600
"""Texts longer than this are folded behind a summary line."""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _script_json(data: Any) -> str:
    """JSON that is safe inside a <script> element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def machine_svg(policy: Policy) -> str | None:
    """The machine drawn by Graphviz with ids on states and edges, or None without Graphviz."""
    if shutil.which("dot") is None:
        return None
    from agentfsm._diagrams import dot, render

    svg = render(dot(policy.routes, ids=True), "svg").decode("utf-8")
    start = svg.find("<svg")
    svg = svg[start:]
    return svg.replace(
        "<svg", '<svg role="img" aria-labelledby="machine-title" focusable="false"', 1
    )


def _text(value: str, *, label: str) -> str:
    """A text block; long ones fold behind their first line."""
    if not value:
        return '<span class="muted">(empty)</span>'
    body = f"<pre>{_e(value)}</pre>"
    if len(value) <= FOLD:
        return body
    first = value[:120].splitlines()[0] if value[:120].strip() else value[:120]
    return (
        f"<details><summary>{_e(label)}: {_e(first)}… ({len(value):,} characters)</summary>"
        f"{body}</details>"
    )


def _call(call: Mapping[str, Any]) -> str:
    name = _e(call.get("name", "?"))
    ident = _e(call.get("id", ""))
    if call.get("error"):
        args = _text(str(call.get("raw_arguments") or ""), label="raw arguments")
        return (
            f"<li><code>{name}</code> <span class='muted'>id {ident}</span> "
            f"<span class='badge own'>broken</span> {_e(call['error'])}{args}</li>"
        )
    args = _text(str(call.get("arguments_text", "{}")), label="arguments")
    return f"<li><code>{name}</code> <span class='muted'>id {ident}</span>{args}</li>"


def _result(result: Mapping[str, Any], *, own: bool) -> str:
    badges = "<span class='badge own'>made by the controller</span> " if own else ""
    if result.get("is_error"):
        badges += "<span class='badge'>error</span> "
    call_id = _e(result.get("call_id", ""))
    content = _text(str(result.get("content", "")), label="content")
    return f"<li>{badges}<span class='muted'>for call {call_id}</span>{content}</li>"


def _output(step: StepView) -> str:
    out = step.output
    if out is None:
        return ""
    claimed = _e(out.get("finish_reason", "unknown"))
    raw = out.get("raw_finish_reason")
    raw_text = f" (raw {_e(json.dumps(raw))})" if raw is not None else ""
    decision = step.decision
    routed = f"{_e(decision.get('action', ''))} at {_e(decision.get('priority', ''))}"
    if decision.get("priority") == "P7":
        routed += " — the structure overruled the provider's claim"
    calls = out.get("tool_calls") or []
    parts = [
        "<dl class='kv'>",
        f"<dt>finish reason claimed</dt><dd>{claimed}{raw_text}"
        + (" · <strong>truncated</strong>" if out.get("truncated") else "")
        + "</dd>",
        f"<dt>as reconciled</dt><dd>{routed}</dd>",
        f"<dt>text</dt><dd>{_text(str(out.get('text', '')), label='text')}</dd>",
    ]
    if calls:
        items = "".join(_call(c) for c in calls)
        parts.append(f"<dt>tool calls</dt><dd><ul>{items}</ul></dd>")
    parts.append("</dl>")
    return "".join(parts)


def _given(step: StepView) -> str:
    if not step.given:
        return ""
    if step.kind == "human_reply":
        reply = step.given[0]
        approved = reply.get("approved")
        if isinstance(approved, dict):  # answered call by call
            verdict = ", ".join(
                f"{_e(i)} {'approved' if a else 'declined'}" for i, a in approved.items()
            )
        else:
            verdict = "approved" if approved else "declined"
        message = reply.get("message")
        extra = f": {_e(message)}" if message else ""
        return f"<p><strong>human reply</strong>: {verdict}{extra}</p>"
    items = "".join(_result(r, own=False) for r in step.given)
    return f"<p><strong>results given</strong></p><ul>{items}</ul>"


def _decision(step: StepView) -> str:
    d = step.decision
    parts = [
        "<dl class='kv'>",
        f"<dt>decision</dt><dd><strong>{_e(d.get('action', ''))}</strong> · "
        f"{_e(d.get('priority', ''))} · layer {_e(d.get('layer', ''))}"
        + (f" · exit {_e(d['exit_reason'])}" if d.get("exit_reason") else "")
        + "</dd>",
        f"<dt>guard</dt><dd><code>{_e(d.get('guard', ''))}</code>"
        + (
            f" (fired: <code>{_e(d['fired'])}</code>)"
            if d.get("fired") and d.get("fired") != d.get("guard")
            else ""
        )
        + "</dd>",
        f"<dt>reason</dt><dd class='reason'>{_e(d.get('reason', ''))}</dd>",
        covered_row(d),
    ]
    if d.get("action") in ("execute_tools", "ask_human", "handoff") and d.get("tool_calls"):
        names = ", ".join(f"<code>{_e(c.get('name', '?'))}</code>" for c in d["tool_calls"])
        parts.append(f"<dt>calls</dt><dd>{names}</dd>")
    own = d.get("results") or []
    if own:
        items = "".join(_result(r, own=True) for r in own)
        parts.append(f"<dt>results sent back</dt><dd><ul>{items}</ul></dd>")
    b = step.budgets
    parts.append(
        f"<dt>used so far</dt><dd>turn {b.turn} · {b.tokens:,} tokens · ${b.cost:.4f} · "
        f"{b.tool_calls} tool call(s)</dd>"
    )
    parts.append("</dl>")
    return "".join(parts)


_KIND = {"model_output": "model output", "tool_results": "tool results", "human_reply": "human"}


def _step(run: int, step: StepView) -> str:
    action = str(step.decision.get("action", ""))
    cls = "step stop" if action == "stop" else "step final" if action == "final" else "step"
    notes = "".join(f"<p><strong>user</strong>: {_e(n)}</p>" for n in step.notes)
    path = " → ".join(_e(s) for s in step.path)
    return (
        f'<li class="{cls}" id="r{run}s{step.index}" tabindex="0" data-run="{run}" '
        f'data-step="{step.index}" aria-label="step {step.index + 1}: {_e(action)}">'
        f"<div class='head'><h3>Step {step.index + 1} · turn {step.turn} · "
        f"{_e(_KIND.get(step.kind, step.kind))}</h3>"
        f"<span class='badge'>{_e(action)}</span>"
        f"<span class='badge'>{_e(step.decision.get('priority', ''))}</span>"
        f"<span class='path'>{path}</span></div>"
        f"{notes}{_output(step)}{_given(step)}{_decision(step)}</li>"
    )


def _differences(view: RunView, run: int) -> str:
    if not view.compared:
        return ""
    if not view.differs:
        return "<p>The second policy decided the same at every step.</p>"
    rows = "".join(_difference_row(run, d) for d in view.differences)
    return (
        f"<h3>Where the policies differ</h3><p>exit: {_e(view.exit_reason)} "
        f"against {_e(view.against_exit or 'still waiting')}</p>"
        "<table class='diff'><thead><tr><th scope='col'>step</th>"
        "<th scope='col'>this policy</th><th scope='col'>the other policy</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _difference_row(run: int, d: Difference) -> str:
    mine = d.mine
    theirs = d.theirs
    other = (
        "<span class='muted'>no decision here</span>"
        if theirs is None
        else f"<strong>{_e(theirs.action)}</strong> {_e(theirs.priority)} "
        f"<code>{_e(theirs.guard)}</code><br>{_e(theirs.reason)}"
    )
    return (
        f"<tr class='difference'><td><a href='#r{run}s{d.step}'>step {d.step + 1}</a>"
        f" (turn {d.turn})</td><td><strong>{_e(mine.action)}</strong> {_e(mine.priority)} "
        f"<code>{_e(mine.guard)}</code><br>{_e(mine.reason)}</td><td>{other}</td></tr>"
    )


def _shadow(view: RunView) -> str:
    """Where the recorded shadow policy would have decided a call otherwise; nothing when the
    run had no shadow."""
    if not view.shadow:
        return ""
    differ = [v for v in view.shadow if v.get("shadow") != v.get("enforced")]
    moves = Counter(f"{v.get('enforced')} → {v.get('shadow')}" for v in differ)
    counts = "".join(f"<tr><td>{_e(m)}</td><td>{n}</td></tr>" for m, n in moves.most_common())
    rows = "".join(
        f"<tr class='difference'><td>{_e(v.get('turn', ''))}</td>"
        f"<td><code>{_e(v.get('tool', '?'))}</code> <span class='muted'>id "
        f"{_e(v.get('call_id', ''))}</span></td><td>{_e(v.get('enforced', ''))}</td>"
        f"<td><strong>{_e(v.get('shadow', ''))}</strong></td><td>{_e(v.get('source', ''))}</td>"
        "</tr>"
        for v in differ
    )
    head = (
        f"<h3>Shadow policy</h3><p>{len(differ)} of {len(view.shadow)} call(s) judged "
        "differently by the shadow policy (recorded, never enforced).</p>"
    )
    if not differ:
        return head
    return (
        f"{head}<table class='shadow-counts'><thead><tr><th scope='col'>enforced → shadow</th>"
        f"<th scope='col'>calls</th></tr></thead><tbody>{counts}</tbody></table>"
        "<table class='diff shadow'><thead><tr><th scope='col'>turn</th>"
        "<th scope='col'>call</th><th scope='col'>enforced</th><th scope='col'>shadow</th>"
        f"<th scope='col'>shadow's rule</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _run(index: int, view: RunView) -> str:
    result = view.result
    count = len(view.steps)
    summary = (
        f"<p>{_e(view.format)} · {result.steps} model output(s) · {count} step(s) · "
        f"{result.tool_calls} call(s) executed · {len(result.episode_exits)} episode(s) · "
        f"exit <strong>{_e(view.exit_reason)}</strong>"
        + (f" · recorded end: {_e(result.recorded_end)}" if result.recorded_end else "")
        + "</p>"
    )
    if count:
        scrub = (
            f"<div class='scrub'><button type='button' class='move' data-run='{index}' "
            f"data-by='-1' aria-label='previous step'>◀</button>"
            f"<input type='range' class='scrubber' id='scrub-{index}' data-run='{index}' "
            f"min='0' max='{count - 1}' value='0' aria-label='step of run {index + 1}'>"
            f"<button type='button' class='move' data-run='{index}' data-by='1' "
            f"aria-label='next step'>▶</button>"
            f"<output id='at-{index}' for='scrub-{index}'>step 1 of {count}</output></div>"
        )
        steps = "".join(_step(index, s) for s in view.steps)
        body = f"{scrub}<ol class='steps'>{steps}</ol>"
    else:
        body = "<p>This run has no steps: nothing was routed.</p>"
    return (
        f"<section class='run' id='r{index}' aria-labelledby='r{index}-title'>"
        f"<h2 id='r{index}-title'>Run {index + 1}: {_e(view.run)} "
        f"<span class='muted'>({_e(view.source)})</span></h2>"
        f"{summary}{_differences(view, index)}{_shadow(view)}{approvals_section(view.approvals)}"
        f"{body}</section>"
    )


def _index(views: Sequence[RunView]) -> str:
    exits = Counter(v.exit_reason for v in views)
    by_exit = "".join(
        f"<tr><td>{_e(reason)}</td><td>{count}</td></tr>" for reason, count in exits.most_common()
    )
    rows = "".join(
        f"<tr><td><a href='#r{i}'>{_e(v.run)}</a></td><td>{_e(v.source)}</td>"
        f"<td>{_e(v.format)}</td><td>{v.result.steps}</td><td>{_e(v.exit_reason)}</td>"
        + (f"<td>{'differs' if v.differs else 'same'}</td>" if v.compared else "")
        + "</tr>"
        for i, v in enumerate(views)
    )
    compared = any(v.compared for v in views)
    return (
        "<h2>Runs by exit reason</h2><table><thead><tr><th scope='col'>exit reason</th>"
        f"<th scope='col'>runs</th></tr></thead><tbody>{by_exit}</tbody></table>"
        "<table><thead><tr><th scope='col'>run</th><th scope='col'>file</th>"
        "<th scope='col'>format</th><th scope='col'>model outputs</th>"
        "<th scope='col'>exit reason</th>"
        + ("<th scope='col'>other policy</th>" if compared else "")
        + f"</tr></thead><tbody>{rows}</tbody></table>"
    )


RULES_SHOWN = 8
"""Permission rules the header names before it only counts the rest."""


def _rules(policy: Policy) -> str:
    rules = [str(rule) for rule in policy.permission_rules]
    if not rules:
        return ""
    shown = ", ".join(f"<code>{_e(rule)}</code>" for rule in rules[:RULES_SHOWN])
    more = f" and {len(rules) - RULES_SHOWN} more" if len(rules) > RULES_SHOWN else ""
    return f", rules: {shown}{more}"


def page(
    views: Sequence[RunView],
    policy: Policy,
    *,
    title: str = "agentfsm run report",
    against: Policy | None = None,
    skipped: Iterable[str] = (),
    of: int | None = None,
    origin: str = "",
) -> str:
    """The whole report: the machine, an index of the runs, and every run step by step.

    `of` is how many runs were replayed when `views` holds only those that differ; `origin`
    says where `policy` came from (given, recorded in the trace, the defaults).
    """
    svg = machine_svg(policy)
    machine = (
        svg
        if svg is not None
        else "<p>The diagram needs Graphviz's <code>dot</code> program, which is not "
        "installed (Debian: apt-get install graphviz); each step still lists its path.</p>"
    )
    data = {"runs": [[s.path for s in v.steps] for v in views]}
    script_hash = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{script_hash}'"
    )
    guards = ", ".join(repr(g) for g in policy.guards) or "none beyond the limits"
    skipped_list = list(skipped)
    notes = (
        f"<p>{len(skipped_list)} file(s) skipped: {_e(', '.join(skipped_list[:5]))}"
        + ("…" if len(skipped_list) > 5 else "")
        + "</p>"
        if skipped_list
        else ""
    )
    other = (
        "" if against is None else f"<p>Compared with a second policy: {_e(against.to_json())}</p>"
    )
    if of is not None:
        other += f"<p>Only the runs whose decisions differ: {len(views)} of {of}.</p>"
    runs = "".join(_run(i, v) for i, v in enumerate(views)) or (
        "<p>No run differs.</p>"
        if of
        else "<p>No recorded run was found in the files given: nothing was routed.</p>"
    )
    index = _index(views) if len(views) > 1 else ""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>"
        f"<header class='page'><h1>{_e(title)}</h1>"
        f"<p>{len(views)} run(s) · policy{_e(f' ({origin})' if origin else '')}: "
        f"max_turns {policy.max_turns}, repeat_threshold {policy.repeat_threshold}, "
        f"guards: {_e(guards)}{_rules(policy)}</p>{other}{notes}"
        "</header><div class='layout'>"
        "<aside class='machine' tabindex='0' aria-label='state machine'>"
        "<h2 id='machine-title'>The machine, with the selected step's path</h2>"
        "<p class='legend'>Blue and bold: the selected step. Light blue: every state and edge "
        "the run visited. Click a step, or use the slider or ↑/↓ on a focused step.</p>"
        f"{machine}</aside><main class='runs'>{index}{runs}</main></div>"
        f"<script type='application/json' id='report-data'>{_script_json(data)}</script>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )
