"""Argparse helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["Once", "bounded", "subcommand"]

_N = TypeVar("_N", int, float)

_GIVEN = "_agentfsm_given_once"
"""The namespace attribute holding the destinations a `Once` option has already set."""


class Once(argparse.Action):
    """Store an option's value, and refuse the option given a second time (exit 2).

    argparse keeps the last of a repeated single-valued option, so `--policy strict.json
    --policy lax.json` would silently drop the strict policy; a repeat is a usage error
    naming both values instead.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        given: set[str] = getattr(namespace, _GIVEN, set())
        if self.dest in given:
            first = getattr(namespace, self.dest)
            parser.error(
                f"{option_string or '/'.join(self.option_strings)} given twice "
                f"({first!r}, then {values!r}): give it once"
            )
        setattr(namespace, _GIVEN, given | {self.dest})
        setattr(namespace, self.dest, values)


def subcommand(
    subparsers: Any, name: str, summary: str, doc: str | None
) -> argparse.ArgumentParser:
    """Register subcommand `name` on an argparse subparsers object: `summary` is its line in
    `agentfsm --help`; `doc`, its module docstring, the text of its own `--help` as written."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=summary,
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def bounded(
    kind: Callable[[str], _N], what: str, minimum: _N, maximum: _N | None = None
) -> Callable[[str], _N]:
    """An argparse type: a finite `kind` from `minimum` to `maximum`; anything else is a usage
    error (exit 2) saying `expected <what>, got <the text>`."""

    def parse(text: str) -> _N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not (math.isfinite(value) and minimum <= value) or (
            maximum is not None and value > maximum
        ):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
        return value

    return parse
