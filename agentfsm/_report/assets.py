"""The report page's inline style and script: no file, no server, no network."""

from __future__ import annotations

__all__ = ["SCRIPT", "STYLE"]

STYLE = """
:root { --ink:#1b1b1b; --muted:#4a4a4a; --line:#c8c8c8; --on:#0b5cad; --bad:#a0281c;
        --ok:#1d6b2a; --paper:#ffffff; --tint:#f3f5f8; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--ink);
       background:var(--paper); }
header.page { padding:12px 20px; border-bottom:1px solid var(--line); }
header.page h1 { font-size:20px; margin:0 0 4px; }
header.page p { margin:2px 0; color:var(--muted); }
.layout { display:grid; grid-template-columns:minmax(280px, 38%) 1fr; gap:0; }
.machine { position:sticky; top:0; align-self:start; max-height:100vh; overflow:auto;
           padding:12px; border-right:1px solid var(--line); background:var(--tint); }
.machine h2 { font-size:15px; margin:0 0 6px; }
.machine svg { width:100%; height:auto; }
.machine .legend { font-size:12px; color:var(--muted); margin:4px 0 8px; }
svg .node.visited polygon, svg .node.visited path, svg .node.visited ellipse { fill:#dbe8f7; }
svg .edge.visited path { stroke:#6b94c4; stroke-width:1.6px; }
svg .node.on polygon, svg .node.on path, svg .node.on ellipse { stroke:var(--on);
   stroke-width:3px; fill:#c4dcf5; }
svg .edge.on path { stroke:var(--on); stroke-width:3.5px; }
svg .edge.on polygon { stroke:var(--on); fill:var(--on); }
.runs { padding:12px 20px; min-width:0; }
table { border-collapse:collapse; margin:6px 0 14px; }
th, td { border:1px solid var(--line); padding:3px 8px; text-align:left; vertical-align:top; }
th { background:var(--tint); }
section.run { border-top:2px solid var(--line); padding-top:8px; margin-top:18px; }
section.run h2 { font-size:17px; margin:4px 0; overflow-wrap:anywhere; }
.scrub { display:flex; gap:8px; align-items:center; margin:6px 0; flex-wrap:wrap; }
.scrub input[type=range] { flex:1; min-width:160px; }
button { font:inherit; padding:2px 10px; border:1px solid #767676; background:#fff;
         color:var(--ink); border-radius:4px; cursor:pointer; }
ol.steps { list-style:none; padding:0; margin:0; }
li.step { border:1px solid var(--line); border-left:4px solid var(--line); border-radius:4px;
          margin:6px 0; padding:6px 10px; content-visibility:auto;
          contain-intrinsic-size:auto 120px; }
li.step:focus { outline:2px solid var(--on); outline-offset:1px; }
li.step[aria-current="step"] { border-left-color:var(--on); background:#f4f8fd; }
li.step.stop { border-left-color:var(--bad); }
li.step.final { border-left-color:var(--ok); }
.head { display:flex; flex-wrap:wrap; gap:6px 12px; align-items:baseline; }
.head h3 { font-size:14px; margin:0; }
.badge { display:inline-block; padding:0 6px; border-radius:3px; border:1px solid #767676;
         font-size:12px; }
.badge.own { border-color:var(--bad); color:var(--bad); }
.path { color:var(--muted); font-size:12px; overflow-wrap:anywhere; }
.reason { overflow-wrap:anywhere; }
code, pre { font-family:ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
            font-size:12px; }
pre { white-space:pre-wrap; overflow-wrap:anywhere; margin:2px 0; background:var(--tint);
      padding:4px 6px; border-radius:3px; }
dl.kv { display:grid; grid-template-columns:max-content 1fr; gap:2px 10px; margin:4px 0; }
dl.kv dt { color:var(--muted); }
dl.kv dd { margin:0; min-width:0; }
details > summary { cursor:pointer; color:var(--muted); }
.diff td { width:50%; }
.muted { color:var(--muted); }
"""

SCRIPT = """
(function () {
  var data = JSON.parse(document.getElementById('report-data').textContent);
  var svg = document.querySelector('.machine svg');
  function mark(cls, states) {
    if (!svg) { return; }
    svg.querySelectorAll('.' + cls).forEach(function (el) { el.classList.remove(cls); });
    for (var i = 0; i < states.length; i++) {
      var node = svg.getElementById('n-' + states[i]);
      if (node) { node.classList.add(cls); }
      if (i > 0) {
        var edge = svg.getElementById('e-' + states[i - 1] + '-' + states[i]);
        if (edge) { edge.classList.add(cls); }
      }
    }
  }
  function visited(run) {
    var all = [];
    data.runs[run].forEach(function (path) { all = all.concat(path, ['|']); });
    mark('visited', all);
  }
  function select(run, step, scroll) {
    var paths = data.runs[run];
    if (!paths || !paths.length) { return; }
    step = Math.max(0, Math.min(paths.length - 1, step));
    document.querySelectorAll('li.step[aria-current]').forEach(function (el) {
      el.removeAttribute('aria-current');
    });
    var item = document.getElementById('r' + run + 's' + step);
    if (item) {
      item.setAttribute('aria-current', 'step');
      if (scroll) { item.scrollIntoView({block: 'nearest'}); }
    }
    var range = document.getElementById('scrub-' + run);
    if (range) { range.value = step; }
    var label = document.getElementById('at-' + run);
    if (label) { label.textContent = 'step ' + (step + 1) + ' of ' + paths.length; }
    visited(run);
    mark('on', paths[step]);
    document.body.dataset.run = run;
    document.body.dataset.step = step;
  }
  document.querySelectorAll('li.step').forEach(function (el) {
    var run = +el.dataset.run, step = +el.dataset.step;
    el.addEventListener('click', function () { select(run, step, false); });
    el.addEventListener('focus', function () { select(run, step, false); });
    el.addEventListener('keydown', function (ev) {
      var to = ev.key === 'ArrowDown' || ev.key === 'j' ? step + 1 :
               ev.key === 'ArrowUp' || ev.key === 'k' ? step - 1 : null;
      if (to === null) { return; }
      ev.preventDefault();
      var next = document.getElementById('r' + run + 's' + to);
      if (next) { next.focus(); }
    });
  });
  document.querySelectorAll('input.scrubber').forEach(function (el) {
    el.addEventListener('input', function () { select(+el.dataset.run, +el.value, true); });
  });
  document.querySelectorAll('button.move').forEach(function (el) {
    el.addEventListener('click', function () {
      var run = +el.dataset.run, range = document.getElementById('scrub-' + run);
      select(run, +range.value + (+el.dataset.by), true);
    });
  });
  window.agentfsmReport = {select: select};
  var first = data.runs.findIndex(function (p) { return p.length > 0; });
  if (first >= 0) { select(first, 0, false); }
})();
"""
