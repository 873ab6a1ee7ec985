"""Read a guard back from its repr: `"MaxTurns(50) | RepeatedCall(3)"` -> the guard.

Only guard class names, literals, `|`, `&`, `~` and parentheses are allowed,
so a policy file can name guards without running arbitrary code.
"""

from __future__ import annotations

import ast
from typing import Any

from agentfsm.exceptions import PolicyError
from agentfsm.guards._base import AllOf, AnyOf, Guard, Not

__all__ = ["parse_guard"]


def parse_guard(text: str, registry: dict[str, type[Guard]]) -> Guard:
    """Build the guard that `text` describes, using the classes in `registry`."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise PolicyError(f"guard {text!r} is not an expression: {exc.msg}") from exc
    return _build(tree.body, text, registry)


def _build(node: ast.expr, text: str, registry: dict[str, type[Guard]]) -> Guard:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr | ast.BitAnd):
        left, right = _build(node.left, text, registry), _build(node.right, text, registry)
        return AnyOf(left, right) if isinstance(node.op, ast.BitOr) else AllOf(left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        return Not(_build(node.operand, text, registry))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        cls = registry.get(node.func.id)
        if cls is None:
            known = ", ".join(sorted(registry))
            raise PolicyError(f"unknown guard {node.func.id!r} in {text!r}; known: {known}")
        args = [_literal(a, text) for a in node.args]
        kwargs = {k.arg: _literal(k.value, text) for k in node.keywords if k.arg}
        try:
            return cls(*args, **kwargs)
        except (TypeError, ValueError, PolicyError) as exc:
            raise PolicyError(f"cannot build {node.func.id} in {text!r}: {exc}") from exc
    raise PolicyError(f"unsupported syntax in guard {text!r}: use Guard(args), |, & and ~ only")


def _literal(node: ast.expr, text: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError as exc:
        raise PolicyError(f"guard arguments must be literals in {text!r}") from exc
