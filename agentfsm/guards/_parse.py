"""Read a guard back from its repr: `"MaxTurns(50) | RepeatedCall(3)"` -> the guard.

Only guard class names, literals, `|`, `&`, `~` and parentheses are allowed,
so a policy file can name guards without running arbitrary code. The text is
bounded before Python parses it (`agentfsm._model.limits`: its length, its
operators, its nesting), so a hostile policy file is a PolicyError naming the
limit, not a RecursionError or MemoryError from the parser.
"""

from __future__ import annotations

import ast
import io
import tokenize
from typing import Any

from agentfsm._model import limits
from agentfsm.exceptions import PolicyError
from agentfsm.guards._base import AllOf, AnyOf, Guard, Not

__all__ = ["parse_guard"]

_OPERATORS = frozenset({"|", "&", "~"})
_OPENING = frozenset({"(", "[", "{"})
_CLOSING = frozenset({")", "]", "}"})


def parse_guard(text: str, registry: dict[str, type[Guard]]) -> Guard:
    """Build the guard that `text` describes, using the classes in `registry`."""
    _check_bounds(text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise PolicyError(f"guard {text!r} is not an expression: {exc.msg}") from exc
    _check_nesting(text, _depth(tree.body))
    return _build(tree.body, text, registry)


def _check_bounds(text: str) -> None:
    """Refuse text past the limits before Python's parser sees it (it recurses per operator)."""
    if len(text) > limits.MAX_GUARD_CHARS:
        raise PolicyError(
            f"guard text of {len(text):,} characters {_shown(text)}: the limit is "
            f"{limits.MAX_GUARD_CHARS:,} (agentfsm._model.limits.MAX_GUARD_CHARS)"
        )
    operators, nesting = _shape(text)
    if operators > limits.MAX_GUARD_OPERATORS:
        raise PolicyError(
            f"guard text {_shown(text)} has {operators:,} |, & and ~ operators: the limit is "
            f"{limits.MAX_GUARD_OPERATORS:,} (agentfsm._model.limits.MAX_GUARD_OPERATORS)"
        )
    _check_nesting(text, nesting)


def _check_nesting(text: str, nesting: int) -> None:
    if nesting > limits.MAX_GUARD_NESTING:
        raise PolicyError(
            f"guard text {_shown(text)} nests {nesting:,} levels deep: the limit is "
            f"{limits.MAX_GUARD_NESTING:,} (agentfsm._model.limits.MAX_GUARD_NESTING)"
        )


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 60 else f"{text[:60]!r}..."


def _shape(text: str) -> tuple[int, int]:
    """The operators of `text` and its deepest bracket nesting, read from its tokens.

    The tokenizer works in a loop, not by recursion; `|` inside a string literal
    is a string, not an operator.
    """
    operators = depth = deepest = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type != tokenize.OP:
                continue
            if token.string in _OPERATORS:
                operators += 1
            elif token.string in _OPENING:
                depth += 1
                deepest = max(deepest, depth)
            elif token.string in _CLOSING:
                depth -= 1
    except (tokenize.TokenError, SyntaxError) as exc:
        why = exc.args[0] if exc.args else type(exc).__name__
        raise PolicyError(f"guard {text[:200]!r} is not an expression: {why}") from exc
    return operators, deepest


def _build(node: ast.expr, text: str, registry: dict[str, type[Guard]]) -> Guard:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr | ast.BitAnd):
        parts = [_build(n, text, registry) for n in _chain(node)]
        return AnyOf(*parts) if isinstance(node.op, ast.BitOr) else AllOf(*parts)
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


def _depth(node: ast.expr) -> int:
    """How deep the guard tree is: each `~`, and each chain of one operator, is a level."""
    deepest = 0
    todo: list[tuple[ast.expr, int]] = [(node, 1)]
    while todo:
        node, level = todo.pop()
        deepest = max(deepest, level)
        if isinstance(node, ast.BinOp):
            todo.extend((operand, level + 1) for operand in _chain(node))
        elif isinstance(node, ast.UnaryOp):
            todo.append((node.operand, level + 1))
    return deepest


def _chain(node: ast.BinOp) -> list[ast.expr]:
    """The operands of `a | b | c` (one operator, parsed as a left-leaning tree), in order.

    Walked in a loop, so a long chain costs no recursion; `AnyOf` flattens the same way.
    """
    op = type(node.op)
    operands: list[ast.expr] = []
    left: ast.expr = node
    while isinstance(left, ast.BinOp) and type(left.op) is op:
        operands.append(left.right)
        left = left.left
    operands.append(left)
    operands.reverse()
    return operands


def _literal(node: ast.expr, text: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError as exc:
        raise PolicyError(f"guard arguments must be literals in {text!r}") from exc
