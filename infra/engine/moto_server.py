"""Local DynamoDB-compatible engine: moto's WSGI app, one request at a time.

The stock ``moto_server`` is threaded and moto's backends hold no lock, so two
concurrent conditional writes could both pass their condition. Here every
connection has its own thread (reading a request, writing a response), but
moto itself runs under one lock: each request applies atomically, the way
DynamoDB applies a conditional write, and a client connection that is open
but sends nothing (an HTTP client dials one for a request it then cancels,
and keeps it idle for 90 s) never blocks anybody else, as it would block a
single-threaded server.

Patches, each in its own module, are installed unless switched off:
``fast_transactions`` (TransactWriteItems without whole-table copies),
``fast_attribute_values`` (response attribute values serialized in one pass),
``fast_update_expressions`` (each UpdateExpression parsed once),
``indexed_queries`` (a Query reads only the items its hash key can match),
``stream_retention`` (stream records and shard iterators bounded) and
``gc_pauses`` (full garbage collections walk only what is new).
``request_timing`` logs each request's timing when asked to.
``request_validation`` refuses, as DynamoDB does, requests moto would have
served (unused or undefined expression placeholders, index key attributes of
the wrong type); it stays on under ``--stock``.

Usage: moto_server.py [--host 127.0.0.1] [--port 0] [--stock] [--stock-transactions]
                      [--stock-serializer] [--stock-update-expressions] [--stock-queries]
                      [--stock-gc] [--no-request-validation]
                      [--stream-retention-seconds 86400] [--stream-max-records 10000]
                      [--timing-log PATH]
After binding it prints exactly one line ``LISTENING <port>`` to stdout, then
serves until killed (SIGTERM/SIGINT exit 0).
"""

import argparse
import io
import json
import os
import signal
import sys
import threading

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server
from werkzeug.wsgi import get_input_stream

import fast_attribute_values
import fast_transactions
import fast_update_expressions
import gc_pauses
import indexed_queries
import request_timing
import request_validation
import stream_retention


class QuietRequestHandler(MotoRequestHandler):
    """Drops the per-request access log line; errors are still logged."""

    def log_request(self, code="-", size="-"):
        pass


def read_body(environ):
    """Read the whole request body from the client now, outside the lock.

    moto reads it from the socket lazily, while it serves the request: a
    client that sent the headers and part of the body, then stalled (stopped,
    paused in a debugger, descheduled between two segments of a large body),
    held the lock, and every other client waited until it went on or hung up.
    """
    stream = get_input_stream(environ)  # empty when there is no Content-Length, as moto reads it
    body = stream.read()
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    environ.pop("wsgi.input_terminated", None)
    environ.pop("HTTP_TRANSFER_ENCODING", None)


def serialized(app, timing=None, collector=None):
    """The WSGI app with every request handled under one lock, response body included.

    The request body is read before the lock is taken (read_body).

    With a gc_pauses.Collector, full collections' survivors are frozen
    between requests; with a request_timing.TimingLog, each request's lock
    wait and service time are logged.
    """
    lock = threading.Lock()

    def serve(environ, start_response):
        if collector is not None:
            collector.between_requests()
        result = app(environ, start_response)
        try:
            body = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        if collector is not None and gc_pauses.releases_tables(environ):
            collector.reclaim_all()
        return body

    def handle(environ, start_response):
        read_body(environ)
        if timing is not None:
            return [timing.timed(lock, serve, environ, start_response)]
        with lock:
            return [serve(environ, start_response)]

    return handle


def warm_up(app):
    """Serve each write path, and the stream poller's reads, once before listening.

    moto imports and builds its request parsers and expression machinery on
    first use: a fresh engine's first TransactWriteItems took 432 ms (the
    next ones 21-27 ms), more than a client's store budget. The scratch table
    lives in an account nobody else uses and is deleted again.
    """
    from werkzeug.test import Client

    client = Client(app)
    auth = (
        "AWS4-HMAC-SHA256 Credential=000000000000/20260101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host, Signature=0"
    )

    def call(target, body):
        resp = client.post(
            "/",
            data=json.dumps(body),
            headers={
                "Content-Type": "application/x-amz-json-1.0",
                "Authorization": auth,
                "X-Amz-Target": target,
            },
        )
        return json.loads(resp.get_data() or b"{}")

    table = "intentgate-engine-warm-up"
    key = {"pk": {"S": "warm"}}
    put = {"TableName": table, "Item": key, "ConditionExpression": "attribute_not_exists(pk)"}
    ddb = "DynamoDB_20120810."
    streams = "DynamoDBStreams_20120810."
    created = call(ddb + "CreateTable", {
        "TableName": table,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    })
    call(ddb + "TransactWriteItems", {"TransactItems": [{"Put": put}]})
    call(ddb + "TransactWriteItems", {"TransactItems": [{"Put": put}]})  # cancelled
    call(ddb + "UpdateItem", {
        "TableName": table,
        "Key": key,
        "UpdateExpression": "SET v = if_not_exists(v, :z) + :o REMOVE w",
        "ConditionExpression": "attribute_exists(pk)",
        "ExpressionAttributeValues": {":z": {"N": "0"}, ":o": {"N": "1"}},
    })
    call(ddb + "GetItem", {"TableName": table, "Key": key, "ConsistentRead": True})
    call(ddb + "Query", {"TableName": table, "KeyConditionExpression": "pk = :k",
                         "ExpressionAttributeValues": {":k": {"S": "warm"}}})
    # The stream poller's requests: the first DescribeStream of a fresh
    # engine took 68 ms of CPU (220 ms on a loaded host) while a write waited.
    stream_arn = created.get("TableDescription", {}).get("LatestStreamArn")
    if stream_arn:
        shards = call(streams + "DescribeStream", {"StreamArn": stream_arn})
        for shard in shards.get("StreamDescription", {}).get("Shards", []):
            iterator = call(streams + "GetShardIterator", {
                "StreamArn": stream_arn, "ShardId": shard["ShardId"], "ShardIteratorType": "TRIM_HORIZON"})
            call(streams + "GetRecords", {"ShardIterator": iterator.get("ShardIterator"), "Limit": 10})
    call(ddb + "DeleteTable", {"TableName": table})


def _exit(signum, frame):
    sys.exit(0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one")
    parser.add_argument(
        "--stock-transactions",
        action="store_true",
        help="serve stock moto's TransactWriteItems (whole-table copies); the differential test's reference",
    )
    parser.add_argument(
        "--stock-serializer",
        action="store_true",
        help="serialize attribute values in responses with stock moto's shape walker; the differential test's reference",
    )
    parser.add_argument(
        "--stock-update-expressions",
        action="store_true",
        help="parse every UpdateExpression afresh, twice per request, as stock moto does",
    )
    parser.add_argument(
        "--stock-queries",
        action="store_true",
        help="answer every Query by walking the whole table, as stock moto does",
    )
    parser.add_argument(
        "--stock",
        action="store_true",
        help="all of the --stock-* switches that change how answers are computed: stock moto, the differential test's reference",
    )
    parser.add_argument(
        "--stock-gc",
        action="store_true",
        help="leave CPython's garbage collector as it is (full collections walk all of moto and every item)",
    )
    parser.add_argument(
        "--no-request-validation",
        action="store_true",
        help="accept what moto accepts: unused expression attribute values, undefined placeholders "
        "(answered 500), index key attributes of the wrong type (DynamoDB refuses all of them)",
    )
    parser.add_argument(
        "--stream-retention-seconds",
        type=float,
        default=stream_retention.DEFAULT_RETENTION_SECONDS,
        help="drop stream records older than this (DynamoDB keeps 24 h)",
    )
    parser.add_argument(
        "--stream-max-records",
        type=int,
        default=stream_retention.DEFAULT_MAX_RECORDS,
        help="keep at most this many stream records per table",
    )
    parser.add_argument(
        "--timing-log",
        default=os.environ.get("INTENTGATE_ENGINE_TIMING_LOG", ""),
        help="append each request's lock wait and service time, and each garbage collection, "
        "to this file as JSON lines (default: $INTENTGATE_ENGINE_TIMING_LOG; empty: off)",
    )
    args = parser.parse_args(argv)
    if args.stream_retention_seconds <= 0 or args.stream_max_records < 1:
        parser.error("--stream-retention-seconds and --stream-max-records must be positive")

    if args.stock:
        args.stock_transactions = args.stock_serializer = args.stock_update_expressions = True
        args.stock_queries = True
    if not args.no_request_validation:
        request_validation.install()
    if not args.stock_transactions:
        fast_transactions.install()
    if not args.stock_serializer:
        fast_attribute_values.install()
    if not args.stock_update_expressions:
        fast_update_expressions.install()
    if not args.stock_queries:
        indexed_queries.install()
    stream_retention.install(
        stream_retention.Retention(
            retention_seconds=args.stream_retention_seconds,
            max_records=args.stream_max_records,
        )
    )

    timing = None
    if args.timing_log:
        timing = request_timing.TimingLog(open(args.timing_log, "a", encoding="utf-8"))
        timing.watch_gc()
    collector = None if args.stock_gc else gc_pauses.Collector()
    app = serialized(DomainDispatcherApplication(create_backend_app), timing, collector)
    warm_up(app)
    if collector is not None:
        collector.install()
    server = make_server(
        args.host,
        args.port,
        app,
        threaded=True,
        processes=1,
        request_handler=QuietRequestHandler,
    )
    port = server.server_address[1]
    # Some moto responses embed the server's own URL.
    os.environ["MOTO_PORT"] = str(port)

    signal.signal(signal.SIGTERM, _exit)
    signal.signal(signal.SIGINT, _exit)

    sys.stdout.write(f"LISTENING {port}\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
