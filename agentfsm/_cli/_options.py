"""Argparse helpers shared by the subcommands."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

__all__ = ["Once"]

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
