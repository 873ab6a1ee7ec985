"""Text for a terminal: one line of whatever an error or a reason says."""

from __future__ import annotations

__all__ = ["one_line"]


def one_line(text: str, limit: int = 2000) -> str:
    """Make `text` one line: line breaks and other control characters escaped, long text cut."""
    if text.isprintable() and len(text) <= limit:
        return text
    escaped = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return escaped if len(escaped) <= limit else f"{escaped[:limit]}... ({len(escaped)} chars)"
