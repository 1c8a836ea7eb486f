"""Request validation moto leaves out and DynamoDB does not.

What it wraps
    ``moto.dynamodb.responses.DynamoHandler``'s ``put_item``,
    ``delete_item``, ``update_item``, ``transact_write_items``, ``query``
    and ``scan`` (moto 5.2.5): each request is checked first, then handed
    to stock moto unchanged.

Why
    DynamoDB refuses, with ValidationException (HTTP 400) and before it
    applies anything, a request

    - with an ExpressionAttributeValues (or ExpressionAttributeNames) entry
      that none of its expressions uses ("Value provided in
      ExpressionAttributeValues unused in expressions"); moto checks the
      values of UpdateItem only, and the names of a few operations: it
      accepted and applied such a PutItem, DeleteItem, TransactWriteItems
      (any action) and Query, the sweep's index Query included;
    - whose expression uses a ``:value`` or ``#name`` the request does not
      define; moto raised KeyError and answered HTTP 500, which the SDK
      retries as a server error;
    - whose PutItem or transaction Put item holds an index key attribute
      of another type than the table defines ("Type mismatch for Index
      Key"); moto checks that for UpdateItem only, stored the item and
      left it out of the index.

    So a store change that leaves a value unused, or writes an index key as
    a number, passed every local test and failed every request on DynamoDB.

What it does
    Placeholders are found by their syntax (``:`` or ``#`` followed by
    letters, digits or underscores; DynamoDB expressions have no string
    literals, so no other text can look like one). Each action of a
    transaction is checked on its own, as DynamoDB does. The messages are
    DynamoDB's.

Always installed (also under ``--stock``: it changes no answer to a valid
request, and the differential test's reference must refuse the same
requests); ``moto_server.py --no-request-validation`` leaves moto alone.
"""

import re
from typing import Any, Callable, Iterable

from moto.dynamodb.exceptions import MockValidationException
from moto.dynamodb.responses import DynamoHandler

_VALUE = re.compile(r":[A-Za-z0-9_]+")
_NAME = re.compile(r"#[A-Za-z0-9_]+")

# The expressions each operation may carry, in DynamoDB's order of checking.
_EXPRESSIONS = {
    "put_item": ("ConditionExpression",),
    "delete_item": ("ConditionExpression",),
    "update_item": ("UpdateExpression", "ConditionExpression"),
    "query": ("KeyConditionExpression", "FilterExpression", "ProjectionExpression"),
    "scan": ("FilterExpression", "ProjectionExpression"),
}
_ACTION_EXPRESSIONS = ("UpdateExpression", "ConditionExpression")


def check_placeholders(request: dict[str, Any], expressions: Iterable[str]) -> None:
    """Raise DynamoDB's ValidationException for an undefined or unused placeholder."""
    names = request.get("ExpressionAttributeNames") or {}
    values = request.get("ExpressionAttributeValues") or {}
    names_used: set[str] = set()
    values_used: set[str] = set()
    for field in expressions:
        text = request.get(field)
        if not isinstance(text, str):
            continue
        for name in _NAME.findall(text):
            if name not in names:
                raise MockValidationException(
                    f"Invalid {field}: An expression attribute name used in the document path "
                    f"is not defined; attribute name: {name}"
                )
            names_used.add(name)
        for value in _VALUE.findall(text):
            if value not in values:
                raise MockValidationException(
                    f"Invalid {field}: An expression attribute value used in expression "
                    f"is not defined; attribute value: {value}"
                )
            values_used.add(value)
    for name in names:
        if name not in names_used:
            raise MockValidationException(
                f"Value provided in ExpressionAttributeNames unused in expressions: keys: {{{name}}}"
            )
    for value in values:
        if value not in values_used:
            raise MockValidationException(
                f"Value provided in ExpressionAttributeValues unused in expressions: keys: {{{value}}}"
            )


def check_index_key_types(item: dict[str, Any], table: Any) -> None:
    """Raise DynamoDB's ValidationException for an index key attribute of the wrong type."""
    defined = {a["AttributeName"]: a["AttributeType"] for a in table.attr}
    for index in table.all_indexes():
        for element in index.schema:
            name = element["AttributeName"]
            value = item.get(name)
            if not isinstance(value, dict) or len(value) != 1 or name not in defined:
                continue
            actual = next(iter(value))
            if actual == "NULL":
                continue  # stock moto answers this one itself
            if actual != defined[name]:
                raise MockValidationException(
                    "One or more parameter values were invalid: Type mismatch for Index Key "
                    f"{name} Expected: {defined[name]} Actual: {actual} IndexName: {index.name}"
                )


def _table(handler: DynamoHandler, name: Any) -> Any:
    try:
        return handler.dynamodb_backend.get_table(name)
    except Exception:  # noqa: BLE001 - a missing table is stock moto's to answer
        return None


def _check(operation: str, handler: DynamoHandler) -> None:
    body = handler.body
    if operation == "transact_write_items":
        for action in body.get("TransactItems") or []:
            for kind, request in action.items():
                if not isinstance(request, dict):
                    continue
                check_placeholders(request, _ACTION_EXPRESSIONS)
                if kind == "Put" and isinstance(request.get("Item"), dict):
                    table = _table(handler, request.get("TableName"))
                    if table is not None:
                        check_index_key_types(request["Item"], table)
        return
    check_placeholders(body, _EXPRESSIONS[operation])
    if operation == "put_item" and isinstance(body.get("Item"), dict):
        table = _table(handler, body.get("TableName"))
        if table is not None:
            check_index_key_types(body["Item"], table)


def install() -> None:
    """Check each request of the wrapped operations before stock moto serves it."""
    for operation in (*_EXPRESSIONS, "transact_write_items"):
        stock: Callable[..., Any] = getattr(DynamoHandler, operation)

        def checked(self: DynamoHandler, _stock: Callable[..., Any] = stock, _op: str = operation) -> Any:
            _check(_op, self)
            return _stock(self)

        checked.__name__ = operation
        setattr(DynamoHandler, operation, checked)
