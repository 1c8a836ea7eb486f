"""UpdateExpression parsing for moto, once per distinct expression.

What it replaces
    ``moto.dynamodb.parsing.expressions.UpdateExpressionParser.make``
    (moto 5.2.5), with the same function behind a bounded cache keyed by the
    expression text; and ``ActionCountValidator.traverse`` (the check that no
    clause kind appears twice), with a one-pass equivalent (see
    ``_count_actions``): stock's is quadratic in the number of actions, about
    a fifth of a 20-action UpdateItem's CPU.

Why
    Stock moto tokenizes and parses an UpdateItem's expression twice per
    request (once in the request handler, once in the backend), and each
    parse builds a tree whose nodes point at their parents: reference cycles
    that only the garbage collector frees. On a devstack replay an UpdateItem
    with a 20-action SET expression cost about 30 ms of CPU, a fifth of it in
    these two parses, and its cyclic garbage drove a young-generation
    collection every few requests.

What it does instead
    The parse result of an expression text is kept (at most 1,024 texts, least
    recently used dropped) and handed out again. That is safe because the
    tree is only read: the request handler looks up its placeholders, and the
    backend's validator deep-copies it before it substitutes values and the
    item (``Validator.__init__``). An expression that fails to parse raises
    every time, as stock (exceptions are not cached).

How it is proven
    ``test_fast_update_expressions.py`` runs the same UpdateItem sequence
    (valid, invalid - repeated clauses among them - and placeholder-heavy)
    under stock and patched and
    requires equal answers and items, and checks that serving requests leaves
    a cached tree unchanged; ``internal/enginecontract``'s differential test
    compares a stock and a patched engine over seeded random sequences.
"""

import functools
from typing import Any

from moto.dynamodb.exceptions import TooManyClauses
from moto.dynamodb.parsing.ast_nodes import (
    Expression,
    Node,
    UpdateExpression,
    UpdateExpressionAddClause,
    UpdateExpressionFunction,
    UpdateExpressionRemoveClause,
    UpdateExpressionSetClause,
)
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.dynamodb.parsing.validators import ActionCountValidator

CACHE_SIZE = 1024

_stock_make = UpdateExpressionParser.__dict__["make"]


@functools.lru_cache(maxsize=CACHE_SIZE)
def _parse(expression: str) -> Any:
    return _stock_make.__func__(UpdateExpressionParser, expression)


def _make(cls: type, expression: Any) -> Any:
    if cls is UpdateExpressionParser and isinstance(expression, str):
        return _parse(expression)
    return _stock_make.__func__(cls, expression)


_stock_count_traverse = ActionCountValidator.traverse
_CLAUSES = (("ADD", UpdateExpressionAddClause), ("REMOVE", UpdateExpressionRemoveClause), ("SET", UpdateExpressionSetClause))


def _count_actions(self: ActionCountValidator, root: Any) -> Any:
    """ActionCountValidator's check in one pass instead of one per node.

    Stock calls ``find_clauses`` three times on every UpdateExpression node
    of the tree (most nodes are), each walking the node's whole subtree:
    quadratic in the number of actions. This visits the nodes in the same
    order (children first), counts each node's clauses exactly as
    ``find_clauses`` does (a clause of the type counts and is not descended
    into; Expression and function nodes are), remembering each node's
    count, and raises the same TooManyClauses at the same node.
    """
    memo: dict[tuple[int, type], int] = {}

    def count(node: Any, clause: type) -> int:
        key = (id(node), clause)
        if key not in memo:
            total = 0
            for child in node.children or []:
                if type(child) is clause:
                    total += 1
                elif isinstance(child, (Expression, UpdateExpressionFunction)):
                    total += count(child, clause)
            memo[key] = total
        return memo[key]

    def visit(node: Any) -> None:
        if not isinstance(node, Node):
            return
        for child in node.children or []:
            visit(child)
        if isinstance(node, UpdateExpression):
            for name, clause in _CLAUSES:
                if count(node, clause) > 1:
                    raise TooManyClauses(name)

    visit(root)
    return root


def install() -> None:
    """Parse each distinct UpdateExpression once; count its clauses in one pass."""
    UpdateExpressionParser.make = classmethod(_make)  # type: ignore[method-assign,assignment]
    ActionCountValidator.traverse = _count_actions  # type: ignore[method-assign]


def uninstall() -> None:
    """Put stock moto's parser back (tests compare the two)."""
    UpdateExpressionParser.make = _stock_make  # type: ignore[method-assign]
    ActionCountValidator.traverse = _stock_count_traverse  # type: ignore[method-assign]
    _parse.cache_clear()
