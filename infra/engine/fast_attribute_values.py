"""Response serialization of DynamoDB attribute values for moto, in one pass.

What it replaces
    For the ``dynamodb`` and ``dynamodbstreams`` services only, the
    serialization of the ``AttributeValue`` structure by
    ``moto.core.serialize.JSONSerializer`` (moto 5.2.5): every item, key,
    stream image and cancellation reason's old item a response carries.

Why
    Stock moto serializes a response by walking botocore's output shape. For
    each of an ``AttributeValue``'s ten members (S, N, B, SS, NS, BS, M, L,
    NULL, BOOL) it builds a picker context and tries up to six aliases of the
    member name on the value, so one attribute costs some 60 lookups and a
    stream record with two images of 20 attributes thousands of function
    calls. Measured on a devstack replay: GetRecords answering ten such
    records took 20-30 ms, and 150-400 ms on a loaded machine; GetItem and
    TransactWriteItems (with old items) paid the same per attribute. The
    engine serves one request at a time, so every other client waited too,
    past a 300 ms store budget.

What it does instead
    A value already in DynamoDB's wire form (a dict whose keys are type codes
    and whose values have the plain Python types moto stores: ``str`` for S,
    N and B, lists of them for the sets, dicts for M, lists for L, ``bool``
    for NULL and BOOL) is serialized by one recursive function producing what
    stock produces: the members in the model's order, strings as they are,
    binaries and binary sets base64-encoded, maps and lists recursively. Any
    other value (a ``None`` member, another type, an unknown key) goes to
    stock moto's serializer unchanged, as does every other shape and service.

How it is proven
    ``test_fast_attribute_values.py`` serializes the same values (every type,
    nested, empty, and values stock must handle itself) with stock and with
    this function and requires equal output, and sends the same requests
    (PutItem, GetItem, Query, a cancelled TransactWriteItems with old items,
    GetRecords) to a stock and a patched engine and requires byte-equal
    answers; ``internal/enginecontract``'s differential test compares a
    stock and a patched engine's answers and stream records over seeded
    random sequences.

Install with ``install()``; ``moto_server.py --stock-serializer`` leaves
stock moto in place.
"""

import base64
from typing import Any

from moto.core.serialize import JSONSerializer

_SERVICES = frozenset({"dynamodb", "dynamodbstreams"})
# The AttributeValue members in the model's order (stock emits them so).
_TYPE_CODES = ("S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL")
_ORDER = {code: i for i, code in enumerate(_TYPE_CODES)}


class _NotPlain(Exception):
    """A value this module leaves to stock moto's serializer."""


def _b64(value: Any) -> str:
    if isinstance(value, str):
        value = value.encode("utf-8")
    elif not isinstance(value, bytes):
        raise _NotPlain
    return base64.b64encode(value).decode("utf-8")


def _strings(values: Any) -> list[str]:
    if type(values) is not list or any(type(v) is not str for v in values):
        raise _NotPlain
    return list(values)


def plain(value: Any) -> dict[str, Any]:
    """The wire form stock moto would produce for one AttributeValue.

    Raises _NotPlain for anything but a plain wire-form value.
    """
    if type(value) is not dict:
        raise _NotPlain
    codes = list(value)
    if len(codes) > 1:
        if any(code not in _ORDER for code in codes):
            raise _NotPlain
        codes.sort(key=_ORDER.__getitem__)
    out: dict[str, Any] = {}
    for code in codes:
        v = value[code]
        if code in ("S", "N"):
            if type(v) is not str:
                raise _NotPlain
            out[code] = v
        elif code == "M":
            if type(v) is not dict:
                raise _NotPlain
            out[code] = {name: plain(member) for name, member in v.items()}
        elif code == "L":
            if type(v) is not list:
                raise _NotPlain
            out[code] = [plain(member) for member in v]
        elif code in ("SS", "NS"):
            out[code] = _strings(v)
        elif code == "B":
            out[code] = _b64(v)
        elif code == "BS":
            if type(v) is not list:
                raise _NotPlain
            out[code] = [_b64(member) for member in v]
        elif code in ("NULL", "BOOL"):
            if type(v) is not bool:
                raise _NotPlain
            out[code] = v
        else:
            raise _NotPlain
    return out


_stock_serialize_type_structure = JSONSerializer._serialize_type_structure


def _serialize_type_structure(self: JSONSerializer, serialized: Any, value: Any, shape: Any, key: str) -> None:
    if (
        key
        and shape.name == "AttributeValue"
        and self.operation_model.service_model.service_name in _SERVICES
    ):
        try:
            out = plain(value)
        except _NotPlain:
            pass
        else:
            serialized[self.get_serialized_name(shape, key)] = out
            return
    _stock_serialize_type_structure(self, serialized, value, shape, key)


def install() -> None:
    """Serialize DynamoDB attribute values with this module's function."""
    JSONSerializer._serialize_type_structure = _serialize_type_structure  # type: ignore[method-assign]


def uninstall() -> None:
    """Put stock moto's serializer back (tests compare the two)."""
    JSONSerializer._serialize_type_structure = _stock_serialize_type_structure  # type: ignore[method-assign]
