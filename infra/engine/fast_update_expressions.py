"""UpdateExpression parsing for moto, once per distinct expression.

What it replaces
    ``moto.dynamodb.parsing.expressions.UpdateExpressionParser.make``
    (moto 5.2.5), with the same function behind a bounded cache keyed by the
    expression text.

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
    (valid, invalid, placeholder-heavy) under stock and with the cache and
    requires equal answers and items, and checks that serving requests leaves
    a cached tree unchanged; ``internal/enginecontract``'s differential test
    compares a stock and a patched engine over seeded random sequences.
"""

import functools
from typing import Any

from moto.dynamodb.parsing.expressions import UpdateExpressionParser

CACHE_SIZE = 1024

_stock_make = UpdateExpressionParser.__dict__["make"]


@functools.lru_cache(maxsize=CACHE_SIZE)
def _parse(expression: str) -> Any:
    return _stock_make.__func__(UpdateExpressionParser, expression)


def _make(cls: type, expression: Any) -> Any:
    if cls is UpdateExpressionParser and isinstance(expression, str):
        return _parse(expression)
    return _stock_make.__func__(cls, expression)


def install() -> None:
    """Parse each distinct UpdateExpression once."""
    UpdateExpressionParser.make = classmethod(_make)  # type: ignore[method-assign,assignment]


def uninstall() -> None:
    """Put stock moto's parser back (tests compare the two)."""
    UpdateExpressionParser.make = _stock_make  # type: ignore[method-assign]
    _parse.cache_clear()
