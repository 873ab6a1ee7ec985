"""Every size and depth that an input controls, bounded here and nowhere else.

A payload, a stream or a trace file comes from outside: a provider, a proxy,
a file on disk. Past these limits agentfsm refuses the input with a
`PayloadError` or `TraceError` that names the limit, instead of spending
gigabytes or hitting Python's recursion limit. Each limit is far above what a
real provider or a real trace produces; a host that needs more can raise the
value here before reading (they are read at call time, not copied at import).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "MAX_GUARD_CHARS",
    "MAX_GUARD_NESTING",
    "MAX_GUARD_OPERATORS",
    "MAX_INPUT_EVENTS",
    "MAX_JSON_INDENT",
    "MAX_JSON_PATH_STEPS",
    "MAX_LINE_BYTES",
    "MAX_POLICY_BYTES",
    "MAX_STREAM_EVENTS",
    "nesting_exceeds",
]

MAX_DEPTH = 100
"""Deepest nesting of objects and arrays accepted in tool-call arguments and JSON text.

Real arguments nest a handful of levels; Python's own recursion limit (1,000
frames) is what a deeper value would hit in `json`, `repr` or the trace writer.
A call whose arguments nest deeper is kept but marked broken (never executed)."""

MAX_JSON_PATH_STEPS = MAX_DEPTH
"""Steps in one Gemini `partialArgs` `jsonPath` (`$.a.b[0].c` has four)."""

MAX_JSON_INDENT = 64
"""Widest indent the models' JSON dumps accept (`model_dump_json(indent=...)`).

Pydantic's serializer aborts the whole process, with no exception to catch,
when the indented text cannot be allocated (`indent=2**40`)."""

MAX_STREAM_EVENTS = 1_000_000
"""Events one `StreamAccumulator` folds; a real turn sends thousands at most."""

MAX_LINE_BYTES = 32 << 20
"""Longest line read from a trace or JSON-lines trajectory (32 MiB).

Lines are read with this bound, so a 1 GB file without a newline costs 32 MiB
to reject, not gigabytes."""

MAX_DOCUMENT_BYTES = 256 << 20
"""Largest single-document trajectory file (`.json`) loaded whole (256 MiB).

Every file a user names is read only when it is a regular file, and never past
the size it had when opened (`agentfsm._model._files`): a JSON-lines trace of any
size streams, but `/dev/zero`, a FIFO or a growing file cannot make it endless."""

MAX_POLICY_BYTES = 16 << 20
"""Largest policy file (JSON or TOML) read (16 MiB); a real one is a few kilobytes."""

MAX_INPUT_EVENTS = 32
"""Events of one input a trace reader holds back in case a `step_retracted` takes them back.

One input writes its own event, the model output, one transition per edge
walked (a handful) and the decision; a retraction of more is refused."""


MAX_GUARD_CHARS = 20_000
"""Longest guard text read back into a guard (a policy file's `guards`, a dump's reprs).

Policy files and saved runs come from outside; Python's own parser runs out of
recursion (or memory) on a few thousand operators, long before this many
characters could hold a real policy's guards."""

MAX_GUARD_OPERATORS = 500
"""Most `|`, `&` and `~` operators in one guard's text (a few hundred guards joined)."""

MAX_GUARD_NESTING = 32
"""Deepest nesting in one guard's text: of its brackets (`(`, `[`, `{`), and of its guard
tree (each `~`, and each chain of one operator, is a level)."""


def nesting_exceeds(value: object, limit: int) -> bool:
    """Whether a JSON-like value nests dicts and lists deeper than `limit` levels.

    Iterative, so it never recurses itself. A dict or list is level 1, a dict
    inside it level 2, and so on; anything else has no level.
    """
    frontier: list[object] = [value] if type(value) in _CONTAINERS else []
    level = 0
    while frontier:
        level += 1
        if level > limit:
            return True
        nested: list[object] = []
        for node in frontier:
            items: Iterable[object] = node.values() if isinstance(node, dict) else node  # type: ignore[assignment]
            nested.extend(item for item in items if type(item) in _CONTAINERS)
        frontier = nested
    return False


_CONTAINERS = (dict, list)
