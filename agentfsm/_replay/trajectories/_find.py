"""Finding the line of one item in a whole JSON document, for an error about that item.

A document is parsed whole, so the parser's positions are gone by the time a reader finds an
item it cannot use; the item's id (a span id, unique in its file) is searched for instead, as
the value of its key. Only an error pays for the search, and the text is read once per file.
"""

from __future__ import annotations

import re

from agentfsm._model import limits
from agentfsm._replay.trace import open_trace

__all__ = ["LineFinder"]


class LineFinder:
    """The line on which `"key": "value"` first stands in a file, read when first asked."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._text: str | None = None

    def line_of(self, key: str, value: str) -> int | None:
        """The 1-based line of `"key": "value"`, or None when the file does not hold it."""
        if self._text is None:
            try:
                with open_trace(self.path) as raw:
                    self._text = raw.read(limits.MAX_DOCUMENT_BYTES).decode("utf-8", "replace")
            except OSError:
                self._text = ""
        pattern = f'"{re.escape(key)}"\\s*:\\s*"{re.escape(value)}"'
        found = re.search(pattern, self._text)
        return None if found is None else self._text.count("\n", 0, found.start()) + 1
