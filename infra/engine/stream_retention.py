"""Bounded stream memory for moto's DynamoDB Streams.

What it replaces
    ``moto.dynamodb.models.table.StreamShard.add`` / ``.get`` and
    ``moto.dynamodbstreams.models.DynamoDBStreamsBackend.get_shard_iterator``
    / ``.get_records`` (moto 5.2.5), wrapping each.

Why
    Stock moto keeps every stream record of a table for the life of the
    process, and every GetRecords call registers a new shard iterator that is
    never forgotten. A local stack left running with a poller grows without
    bound.

What it does instead
    - A shard keeps records for at most ``retention_seconds`` (DynamoDB's
      24 hours by default) and at most ``max_records`` (10,000 by default):
      older ones are dropped from the front when a record is added or read.
      Sequence numbers stay monotonic (the shard's starting sequence number
      advances by the number dropped), so iterators stay valid.
    - An iterator positioned before the oldest kept record reads from the
      oldest kept record (the dropped ones are gone, as after DynamoDB's
      trimming); stock moto would fail an assertion.
    - Shard iterators expire 15 minutes after they were handed out, as in
      DynamoDB, and at most ``max_iterators`` (1,000) are remembered; using
      an expired or forgotten one answers ExpiredIteratorException instead
      of an internal error.

``install(...)`` applies it; ``now`` is injectable for tests.
"""

import datetime
import time
from typing import Any, Callable

from moto.core.exceptions import JsonRESTError
from moto.dynamodb.models.table import StreamShard
from moto.dynamodbstreams.models import DynamoDBStreamsBackend, ShardIterator

DEFAULT_RETENTION_SECONDS = 24 * 3600
DEFAULT_MAX_RECORDS = 10_000
DEFAULT_MAX_ITERATORS = 1_000
ITERATOR_LIFETIME_SECONDS = 15 * 60


class ExpiredIteratorException(JsonRESTError):
    def __init__(self) -> None:
        super().__init__(
            "ExpiredIteratorException",
            "Iterator expired or unknown: get a new one with GetShardIterator",
        )


class Retention:
    """The limits, and the clock they are measured with."""

    def __init__(
        self,
        retention_seconds: float = DEFAULT_RETENTION_SECONDS,
        max_records: int = DEFAULT_MAX_RECORDS,
        max_iterators: int = DEFAULT_MAX_ITERATORS,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(
            datetime.timezone.utc
        ).replace(tzinfo=None),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if retention_seconds <= 0 or max_records < 1 or max_iterators < 1:
            raise ValueError("stream retention limits must be positive")
        self.retention = datetime.timedelta(seconds=retention_seconds)
        self.max_records = max_records
        self.max_iterators = max_iterators
        self.now = now
        self.monotonic = monotonic

    def trim(self, shard: StreamShard) -> None:
        """Drop records beyond the count, then those older than retention."""
        drop = max(0, len(shard.items) - self.max_records)
        oldest_kept = self.now() - self.retention
        while drop < len(shard.items) and _created(shard.items[drop]) < oldest_kept:
            drop += 1
        if drop:
            del shard.items[:drop]
            shard.starting_sequence_number += drop

    def forget_iterators(self, backend: DynamoDBStreamsBackend) -> None:
        iterators = backend.shard_iterators
        expired_before = self.monotonic() - ITERATOR_LIFETIME_SECONDS
        # dicts keep insertion order: the oldest come first
        for arn in list(iterators):
            if len(iterators) > self.max_iterators or _handed_out(iterators[arn]) < expired_before:
                del iterators[arn]
            else:
                break


def _created(record: Any) -> datetime.datetime:
    created = record.record["dynamodb"]["ApproximateCreationDateTime"]
    if created.tzinfo is not None:
        created = created.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return created


def _handed_out(iterator: ShardIterator) -> float:
    return getattr(iterator, "handed_out", 0.0)


def install(retention: Retention) -> None:
    """Wrap moto's stream shard and streams backend with the limits."""
    stock_add = StreamShard.add
    stock_get = StreamShard.get
    stock_iterator_init = ShardIterator.__init__
    stock_get_shard_iterator = DynamoDBStreamsBackend.get_shard_iterator
    stock_get_records = DynamoDBStreamsBackend.get_records

    def add(self: StreamShard, old: Any, new: Any) -> None:
        stock_add(self, old, new)
        retention.trim(self)

    def get(self: StreamShard, start: int, quantity: int) -> list[dict[str, Any]]:
        retention.trim(self)
        return stock_get(self, max(start, self.starting_sequence_number), quantity)

    def iterator_init(self: ShardIterator, *args: Any, **kwargs: Any) -> None:
        stock_iterator_init(self, *args, **kwargs)
        self.handed_out = retention.monotonic()

    def get_shard_iterator(self: DynamoDBStreamsBackend, *args: Any, **kwargs: Any) -> Any:
        retention.forget_iterators(self)
        return stock_get_shard_iterator(self, *args, **kwargs)

    def get_records(self: DynamoDBStreamsBackend, iterator_arn: str, limit: int) -> Any:
        retention.forget_iterators(self)
        if iterator_arn not in self.shard_iterators:
            raise ExpiredIteratorException()
        return stock_get_records(self, iterator_arn, limit)

    StreamShard.add = add  # type: ignore[method-assign]
    StreamShard.get = get  # type: ignore[method-assign]
    ShardIterator.__init__ = iterator_init  # type: ignore[method-assign]
    DynamoDBStreamsBackend.get_shard_iterator = get_shard_iterator  # type: ignore[method-assign]
    DynamoDBStreamsBackend.get_records = get_records  # type: ignore[method-assign]
