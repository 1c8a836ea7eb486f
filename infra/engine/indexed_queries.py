"""Query for moto without reading the whole table.

What it replaces
    ``moto.dynamodb.models.table.Table.query`` (moto 5.2.5) gets its
    candidates differently; everything else is stock code. The write paths
    ``Table.put_item`` and ``DynamoDBBackend.update_item`` are wrapped to
    note what they wrote.

Why
    Stock moto answers every Query by walking ``Table.all_items()``: every
    item of the table, sorted, then filtered by the key condition. A Query
    on a global secondary index of a 3,000-item table took 70 ms of CPU in
    the single-threaded engine, and every write queued behind it; the cost
    grows with the table, not with the answer.

What it does instead
    Stock ``Table.query`` runs unchanged, except that for the duration of
    the call the table's ``all_items()`` returns only candidates, in the
    order stock ``all_items()`` would return them:

    - a Query on the table (or on a local secondary index, whose hash key
      is the table's): the items stored under that hash value;
    - a Query on a global secondary index: the items whose primary keys a
      per-table, per-index map lists under the queried value of the index's
      (first) hash key attribute.

    The map is a superset: it is built from all items the first time an
    index is queried, and every item ``Table.put_item`` or
    ``DynamoDBBackend.update_item`` (in place) writes afterwards is added
    under its current value; deletions and value changes are not removed
    eagerly. Stock ``query`` then applies its own key condition to every
    candidate, so a stale candidate (deleted, or no longer that value) is
    dropped - and removed from the map, since only a later write can give it
    that value again, and that write adds it back. Every item stock moto
    would answer is among the candidates, and candidates keep stock's order,
    so the items, their order, ``Count``, ``ScannedCount``, ``Limit``,
    ``LastEvaluatedKey``, ``ExclusiveStartKey``, filters and projections are
    stock moto's. Anything this module does not recognise (no hash key
    condition, an unknown index, a value that cannot be hashed) takes stock
    moto's path unchanged.

    Why the map lives on the table object: a stock transaction's rollback
    puts a deep copy of the table back, and the copy carries the map of
    that same state; a table that is deleted, restored or reset takes its
    map with it (a restored table builds a new one on first use).
    Transactions of ``fast_transactions`` write through the wrapped backend
    calls, and their rollback puts back items written before, which the map
    already lists. Requests are served one at a time (moto_server.py), so no
    write runs while ``all_items`` is narrowed.

How it is proven
    ``test_indexed_queries.py`` compares this module's answers with stock
    moto's in one process; ``internal/enginecontract``'s differential test
    sends seeded random sequences of writes, transactions and Queries on the
    table and on a global secondary index (ranges, Limit, ExclusiveStartKey,
    descending) to ``--stock`` and to this engine and compares every answer.

Install with ``install()``; ``moto_server.py --stock-queries`` (or
``--stock``) leaves stock moto in place.
"""

from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

_STATE = "_intentgate_index_candidates"

_stock_query = Table.query
_stock_put_item = Table.put_item
_stock_update_item = DynamoDBBackend.update_item


class _IndexMap:
    """Index hash value -> primary keys of items ever written with it."""

    def __init__(self, attribute: str) -> None:
        self.attribute = attribute
        self.keys: dict[DynamoType, set[tuple[DynamoType, DynamoType | None]]] = {}
        # Items whose value cannot be a dict key (a list or map where the
        # index expects a scalar): candidates of every query, stock drops them.
        self.unhashable: set[tuple[DynamoType, DynamoType | None]] = set()

    def add(self, item: Item) -> None:
        value = item.attrs.get(self.attribute)
        if value is None:
            return
        key = (item.hash_key, item.range_key)
        try:
            self.keys.setdefault(value, set()).add(key)
        except TypeError:
            self.unhashable.add(key)


def _maps(table: Table) -> dict[str, _IndexMap]:
    state = table.__dict__.get(_STATE)
    if state is None:
        state = {}
        setattr(table, _STATE, state)
    return state


def _ordered(items: list[Item]) -> list[Item]:
    """Stock ``all_items()``'s order (its sort key, verbatim)."""
    return sorted(
        items,
        key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key,
    )


def _stored_under(table: Table, hash_value: DynamoType) -> list[Item]:
    stored = table.items.get(hash_value)  # .get: the defaultdict must not grow
    if stored is None:
        return []
    if table.range_key_attr:
        return list(stored.values())
    return [stored]


def _current(table: Table, key: tuple[DynamoType, DynamoType | None]) -> Item | None:
    stored = table.items.get(key[0])
    if stored is None:
        return None
    if key[1] is None:
        return stored if isinstance(stored, Item) else None
    return stored.get(key[1]) if isinstance(stored, dict) else None


def _index_candidates(
    table: Table, index: Any, value: DynamoType
) -> list[Item]:
    attribute = index.schema[0]["AttributeName"]
    maps = _maps(table)
    index_map = maps.get(index.name)
    if index_map is None or index_map.attribute != attribute:
        index_map = _IndexMap(attribute)
        for item in table.all_items():
            index_map.add(item)
        maps[index.name] = index_map
    listed = index_map.keys.get(value, set())
    candidates = []
    for key in list(listed):
        item = _current(table, key)
        current = None if item is None else item.attrs.get(attribute)
        if current is not None and current == value:
            candidates.append(item)
        else:
            listed.discard(key)  # only a later write can make it a match again
    if not listed:
        index_map.keys.pop(value, None)
    for key in index_map.unhashable:
        item = _current(table, key)
        if item is not None:
            candidates.append(item)
    return candidates


def _candidates(
    table: Table,
    hash_key: DynamoType | None,
    index_name: str | None,
    hash_key_conditions: Any,
) -> list[Item] | None:
    """The items a Query can answer, or None for stock moto's whole-table walk."""
    if not index_name:
        if hash_key is None:
            return None
        return _stored_under(table, hash_key)
    index = {i.name: i for i in table.all_indexes()}.get(index_name)
    if index is None or not index.schema or index.schema[0].get("KeyType") != "HASH":
        return None  # stock raises the error
    attribute = index.schema[0]["AttributeName"]
    conditions = dict(hash_key_conditions or [])
    value = conditions.get(attribute)
    if value is None:
        return None
    if attribute == table.hash_key_attr:
        return _stored_under(table, value)
    return _index_candidates(table, index, value)


def query(self: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
    """Stock ``Table.query`` over candidates instead of every item (see the module)."""
    index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
    try:
        candidates = _candidates(
            self, hash_key, index_name, kwargs.get("hash_key_conditions")
        )
    except TypeError:  # an unhashable queried value
        candidates = None
    if candidates is None:
        return _stock_query(self, hash_key, *args, **kwargs)
    ordered = _ordered(candidates)
    self.all_items = lambda: list(ordered)  # type: ignore[method-assign]
    try:
        return _stock_query(self, hash_key, *args, **kwargs)
    finally:
        del self.all_items


def _note(table: Table, hash_value: DynamoType, range_value: DynamoType | None) -> None:
    maps = table.__dict__.get(_STATE)
    if not maps:
        return
    item = _current(table, (hash_value, range_value))
    if item is not None:
        for index_map in maps.values():
            index_map.add(item)


def _key_values(
    table: Table, attrs: dict[str, Any]
) -> tuple[DynamoType, DynamoType | None] | None:
    if not isinstance(attrs, dict) or table.hash_key_attr not in attrs:
        return None
    range_value = None
    if table.range_key_attr is not None:
        if table.range_key_attr not in attrs:
            return None
        range_value = DynamoType(attrs[table.range_key_attr])
    return DynamoType(attrs[table.hash_key_attr]), range_value


def _noted(table: Table, attrs: dict[str, Any]) -> None:
    """Add the item now stored under ``attrs``' key to the table's index maps.

    Called whether or not the write raised, so that a write that changed the
    item before failing is listed too; a key that cannot be read drops the
    maps (rebuilt on the next query) rather than risk a missing candidate.
    """
    if not table.__dict__.get(_STATE):
        return
    try:
        key = _key_values(table, attrs)
    except Exception:  # noqa: BLE001 - the write itself reports the bad key
        key = None
    if key is None:
        table.__dict__[_STATE] = {}
        return
    _note(table, *key)


def put_item(self: Table, item_attrs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """Stock ``Table.put_item``; the stored item is noted in the index maps."""
    try:
        return _stock_put_item(self, item_attrs, *args, **kwargs)
    finally:
        _noted(self, item_attrs)


def update_item(
    self: DynamoDBBackend, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any
) -> Any:
    """Stock ``update_item`` (it changes the item in place); the item is noted."""
    try:
        return _stock_update_item(self, table_name, key, *args, **kwargs)
    finally:
        table = self.tables.get(table_name)
        if table is not None:
            _noted(table, key)


def install() -> None:
    """Answer Queries from candidates; note writes in the index maps."""
    Table.query = query  # type: ignore[method-assign]
    Table.put_item = put_item  # type: ignore[method-assign]
    DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]


def uninstall() -> None:
    """Put stock moto back (tests compare the two)."""
    Table.query = _stock_query  # type: ignore[method-assign]
    Table.put_item = _stock_put_item  # type: ignore[method-assign]
    DynamoDBBackend.update_item = _stock_update_item  # type: ignore[method-assign]
