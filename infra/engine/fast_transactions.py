"""TransactWriteItems for moto without copying whole tables.

What it replaces
    ``moto.dynamodb.models.DynamoDBBackend.transact_write_items`` (moto 5.2.5).

Why
    Stock moto ``copy.deepcopy``-s every table a transaction names, including
    all of that table's stream records, before it applies anything, and puts
    the copy back in place of the table when the transaction is cancelled or
    invalid. A single-item transaction therefore costs time proportional to
    the table's whole history (hundreds of milliseconds after a few thousand
    writes), and after a cancellation the table - and its stream shard - is a
    different object: every shard iterator handed out before still points at
    the old shard and never sees another record (the stream goes stale).

What it does instead
    The same action-by-action evaluation as stock moto (same checks, in the
    same order, through the same ``get_item`` / ``put_item`` /
    ``update_item`` / ``delete_item`` calls, so every answer, error and
    cancellation reason is the one stock moto gives; only the condition,
    already evaluated on the same state, is not parsed a second time). Before an action
    writes, its item's current value (one item, deep-copied) and the length
    of its table's stream are noted in an undo log. When the transaction is
    cancelled (any action's condition failed, or an action could not be
    applied) or invalid (ValidationException), exactly the items it touched
    are put back and the stream records it appended are dropped; nothing
    else of the table is copied or replaced. Requests are served one at a
    time (moto_server.py), so no other request can observe the intermediate
    state: a cancelled transaction leaves no item and no stream record
    behind, and the stream shard object never changes.

    One deliberate difference: stock moto raises the "only one of Check, Put,
    Update or Delete" ValidationException in the middle of its loop without
    rolling back the actions before it (they stay applied). DynamoDB
    validates the request before it applies anything; so does this function,
    together with the 100-action limit.

How it is proven
    ``internal/enginecontract`` (the DynamoDB behaviours the project relies
    on) runs against the fast path, and ``internal/enginecontract``'s
    differential test sends the same seeded random sequences of PutItem,
    UpdateItem, DeleteItem, ConditionCheck and TransactWriteItems (many
    cancelled or invalid) to a stock moto and to this one and compares every
    answer, the final items and the stream records.

Install with ``install()``; ``moto_server.py --stock-transactions`` leaves
stock moto in place (the differential test's reference).
"""

import copy
from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend

_OPERATIONS = {"ConditionCheck", "Put", "Delete", "Update"}


class _UndoLog:
    """The items and stream lengths a transaction changed, to put back."""

    def __init__(self) -> None:
        # (table name, hash, range) -> (table, hash, range, item before or None)
        self._items: dict[tuple[Any, Any, Any], tuple[Any, Any, Any, Any]] = {}
        # id(shard) -> (shard, sequence number the next record would get)
        self._streams: dict[int, tuple[Any, int]] = {}

    def before_write(self, table: Any, hash_value: Any, range_value: Any) -> None:
        key = (table.name, hash_value, range_value)
        if key not in self._items:
            before = table.get_item(hash_value, range_value)
            self._items[key] = (table, hash_value, range_value, copy.deepcopy(before))
        shard = table.stream_shard
        if shard is not None and id(shard) not in self._streams:
            self._streams[id(shard)] = (
                shard,
                shard.starting_sequence_number + len(shard.items),
            )

    def rollback(self) -> None:
        for table, hash_value, range_value, before in self._items.values():
            if range_value is None:
                if before is None:
                    table.items.pop(hash_value, None)
                else:
                    table.items[hash_value] = before
            elif before is None:
                inner = table.items.get(hash_value)
                if inner is not None:
                    inner.pop(range_value, None)
                    if not inner:
                        del table.items[hash_value]
            else:
                table.items[hash_value][range_value] = before
        for shard, next_sequence in self._streams.values():
            keep = max(0, next_sequence - shard.starting_sequence_number)
            del shard.items[keep:]


def transact_write_items(
    self: DynamoDBBackend, transact_items: list[dict[str, Any]]
) -> None:
    """Stock semantics, undo log instead of table copies (see the module)."""
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    for item in transact_items:
        if len(item) > 1:
            raise TransactWriteSingleOpException

    undo = _UndoLog()
    target_items: set[tuple[str, str]] = set()

    def check_unicity(table_name: str, key: dict[str, Any]) -> None:
        unique = (str(table_name), str(dict(sorted(key.items()))))
        if unique in target_items:
            raise MultipleTransactionsException()
        target_items.add(unique)

    errors: list[tuple[Any, Any, Any]] = []  # [(Code, Message, Item), ..]
    for item in transact_items:
        original_item = None
        try:
            op_type, op = next(iter(item.items()))
            if op_type not in _OPERATIONS:
                raise ValueError("Unsupported transaction operation")

            table_name = op["TableName"]
            condition_expression = op.get("ConditionExpression")
            names = op.get("ExpressionAttributeNames")
            values = op.get("ExpressionAttributeValues")

            if op_type == "Put":
                attrs = op["Item"]
                table = self.get_table(table_name)
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]

            check_unicity(table_name, key)

            current = self.get_item(table_name, key)
            if condition_expression is not None:
                condition = get_filter_expression(condition_expression, names, values)
                if not condition.expr(current):
                    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)

            if op_type != "ConditionCheck":
                table = self.get_table(table_name)
                undo.before_write(table, *self.get_keys_value(table, key))
            if op_type == "Put":
                self.put_item(
                    table_name,
                    op["Item"],
                    condition_expression=None,  # checked above, on this same state
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            elif op_type == "Delete":
                self.delete_item(
                    table_name,
                    key,
                    condition_expression=None,  # checked above, on this same state
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            elif op_type == "Update":
                self.update_item(
                    table_name,
                    key,
                    update_expression=op["UpdateExpression"],
                    condition_expression=None,  # checked above, on this same state
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            undo.rollback()
            raise
        except ConditionalCheckFailed as e:
            errors.append(("ConditionalCheckFailed", str(e.message), original_item))
        except Exception as e:  # noqa: BLE001 - stock moto reports any other error as a reason
            errors.append((type(e).__name__, str(e), original_item))

    if any(code is not None for code, _, _ in errors):
        undo.rollback()
        raise TransactionCanceledException(errors)


def install() -> None:
    """Replace stock moto's transact_write_items with this module's."""
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
