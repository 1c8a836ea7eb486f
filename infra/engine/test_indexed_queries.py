"""indexed_queries answers every Query exactly as stock moto, without walking the table.

Run: .venv/bin/python -m unittest discover -s infra/engine -p 'test_*.py'
(internal/enginetest runs them in `make test`).
"""

import json
import random
import unittest

from moto.dynamodb.models.table import Table
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.test import Client

import fast_transactions
import indexed_queries
from moto.dynamodb.models import DynamoDBBackend

STOCK_TRANSACTIONS = DynamoDBBackend.transact_write_items

AUTH = ("AWS4-HMAC-SHA256 Credential=000000000000/20260101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host, Signature=0")
DDB = "DynamoDB_20120810."


def call(client, target, body):
    resp = client.post("/", data=json.dumps(body), headers={
        "Content-Type": "application/x-amz-json-1.0", "Authorization": AUTH, "X-Amz-Target": DDB + target})
    return resp.status_code, json.loads(resp.get_data() or b"{}")


def create_table(client, table):
    return call(client, "CreateTable", {
        "TableName": table, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t} for n, t in
                                 (("pk", "S"), ("sk", "N"), ("g", "S"), ("gs", "N"), ("h", "S"))],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        "GlobalSecondaryIndexes": [
            {"IndexName": "by-g", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"},
                                                {"AttributeName": "gs", "KeyType": "RANGE"}],
             "Projection": {"ProjectionType": "ALL"}},
            {"IndexName": "by-h", "KeySchema": [{"AttributeName": "h", "KeyType": "HASH"}],
             "Projection": {"ProjectionType": "KEYS_ONLY"}},
        ],
    })


def requests(seed, table):
    """A seeded sequence of writes (index values set, changed, removed), transactions and Queries."""
    r = random.Random(seed)

    def key():
        return {"pk": {"S": f"p{r.randrange(3)}"}, "sk": {"N": str(r.randrange(4))}}

    out = []
    for _ in range(150):
        p = r.randrange(100)
        if p < 25:
            item = dict(key(), v={"N": str(r.randrange(5))})
            if r.random() < 0.7:
                item["g"] = {"S": f"g{r.randrange(2)}"}
                item["gs"] = {"N": str(r.randrange(6))}
            if r.random() < 0.4:
                item["h"] = {"S": f"h{r.randrange(2)}"}
            out.append(("PutItem", {"TableName": table, "Item": item}))
        elif p < 45:
            expr, values = r.choice([
                ("SET g = :g, gs = :n", {":g": {"S": f"g{r.randrange(2)}"}, ":n": {"N": str(r.randrange(6))}}),
                ("REMOVE g", None), ("REMOVE gs, h", None),
                ("SET h = :h", {":h": {"S": f"h{r.randrange(2)}"}}),
                ("SET v = :n", {":n": {"N": str(r.randrange(5))}}),
                ("SET g = nope", None),  # invalid: nothing changes
            ])
            body = {"TableName": table, "Key": key(), "UpdateExpression": expr}
            if values:
                body["ExpressionAttributeValues"] = values
            if r.random() < 0.3:
                body["ConditionExpression"] = "attribute_exists(pk)"
            out.append(("UpdateItem", body))
        elif p < 55:
            out.append(("DeleteItem", {"TableName": table, "Key": key()}))
        elif p < 65:
            actions = [{"Update": {"TableName": table, "Key": key(), "UpdateExpression": "SET g = :g, gs = :n",
                                   "ExpressionAttributeValues": {":g": {"S": f"g{r.randrange(2)}"},
                                                                 ":n": {"N": str(r.randrange(6))}}}},
                       {"Delete": {"TableName": table, "Key": key()}}]
            if r.random() < 0.5:  # cancelled: everything rolls back
                actions.append({"ConditionCheck": {"TableName": table, "Key": key(),
                                                   "ConditionExpression": "attribute_not_exists(pk)"}})
            out.append(("TransactWriteItems", {"TransactItems": actions}))
        else:
            out.append(("Query", query(r, table)))
    return out


def query(r, table):
    kind = r.randrange(4)
    if kind == 0:
        body = {"TableName": table, "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": f"p{r.randrange(4)}"}}}
    elif kind == 3:
        body = {"TableName": table, "IndexName": "by-h", "KeyConditionExpression": "h = :h",
                "ExpressionAttributeValues": {":h": {"S": f"h{r.randrange(3)}"}}}
    else:
        body = {"TableName": table, "IndexName": "by-g", "KeyConditionExpression": "g = :g",
                "ExpressionAttributeValues": {":g": {"S": f"g{r.randrange(3)}"}}}
        if kind == 2:
            body["KeyConditionExpression"] += " AND gs BETWEEN :lo AND :hi"
            body["ExpressionAttributeValues"].update({":lo": {"N": "1"}, ":hi": {"N": "4"}})
    if r.random() < 0.4:
        body["Limit"] = r.randrange(1, 4)
    if r.random() < 0.4:
        body["ScanIndexForward"] = False
    if r.random() < 0.3:
        body["FilterExpression"] = "v > :v"
        body["ExpressionAttributeValues"][":v"] = {"N": "1"}
    if r.random() < 0.2:
        body["Select"] = "COUNT"
    return body


_CLIENT = []


def engine():
    """One in-process moto for the module (building the app costs seconds)."""
    if not _CLIENT:
        _CLIENT.append(Client(DomainDispatcherApplication(create_backend_app)))
    return _CLIENT[0]


def answers(seed, table, pages=True):
    """Every answer of the sequence; a paginated Query is followed to its end."""
    client = engine()
    create_table(client, table)
    out = []
    for target, body in requests(seed, table):
        status, answer = call(client, target, body)
        out.append((target, status, answer))
        while pages and target == "Query" and status == 200 and "LastEvaluatedKey" in answer:
            body = dict(body, ExclusiveStartKey=answer["LastEvaluatedKey"])
            status, answer = call(client, target, body)
            out.append((target, status, answer))
    call(client, "DeleteTable", {"TableName": table})
    return out


class IndexedQueriesAnswerLikeStock(unittest.TestCase):
    def tearDown(self):
        indexed_queries.uninstall()

    def test_every_answer_of_seeded_sequences_equals_stock_moto(self):
        self.same_answers_as_stock(range(6))

    def test_every_answer_equals_stock_moto_under_stock_transactions_too(self):
        # Stock transactions put a deep copy of the table back on rollback:
        # the copy carries the index map of the state it was taken from.
        self.same_answers_as_stock(range(6, 10), transactions=STOCK_TRANSACTIONS)

    def same_answers_as_stock(self, seeds, transactions=fast_transactions.transact_write_items):
        DynamoDBBackend.transact_write_items = transactions
        try:
            for seed in seeds:
                indexed_queries.uninstall()
                want = answers(seed, f"seq-{seed}")
                indexed_queries.install()
                got = answers(seed, f"seq-{seed}")  # deleted again by answers()
                self.assertEqual(len(want), len(got))
                for i, (w, g) in enumerate(zip(want, got)):
                    self.assertEqual(w, g, f"seed {seed} answer {i}")
                queries = [a for a in want if a[0] == "Query" and a[1] == 200]
                self.assertGreater(sum(1 for a in queries if a[2].get("Count", 0) > 0), 5, "queries that find items")
                self.assertTrue(any(a[0] == "TransactWriteItems" and a[1] == 400 for a in want), "cancelled transactions")
                self.assertTrue(any("LastEvaluatedKey" in a[2] for a in queries), "paginated queries")
        finally:
            DynamoDBBackend.transact_write_items = STOCK_TRANSACTIONS

    def test_a_cancelled_transaction_that_moved_an_item_leaves_it_under_its_old_value(self):
        indexed_queries.install()
        DynamoDBBackend.transact_write_items = fast_transactions.transact_write_items
        try:
            client = engine()
            create_table(client, "moved")
            key = {"pk": {"S": "p"}, "sk": {"N": "0"}}
            call(client, "PutItem", {"TableName": "moved", "Item": dict(key, g={"S": "old"}, gs={"N": "1"})})

            def count(value):
                return call(client, "Query", {"TableName": "moved", "IndexName": "by-g", "KeyConditionExpression": "g = :g",
                                              "ExpressionAttributeValues": {":g": {"S": value}}})[1]["Count"]

            self.assertEqual(count("old"), 1)  # the map exists from here on
            status, _ = call(client, "TransactWriteItems", {"TransactItems": [
                {"Update": {"TableName": "moved", "Key": key, "UpdateExpression": "SET g = :new",
                            "ExpressionAttributeValues": {":new": {"S": "new"}}}},
                {"ConditionCheck": {"TableName": "moved", "Key": {"pk": {"S": "q"}, "sk": {"N": "0"}},
                                    "ConditionExpression": "attribute_exists(pk)"}}]})
            self.assertEqual(status, 400)
            self.assertEqual((count("old"), count("new")), (1, 0))
            call(client, "UpdateItem", {"TableName": "moved", "Key": key, "UpdateExpression": "SET g = :new",
                                        "ExpressionAttributeValues": {":new": {"S": "new"}}})
            self.assertEqual((count("old"), count("new")), (0, 1))
            call(client, "DeleteItem", {"TableName": "moved", "Key": key})
            self.assertEqual((count("old"), count("new")), (0, 0))
            call(client, "DeleteTable", {"TableName": "moved"})
        finally:
            DynamoDBBackend.transact_write_items = STOCK_TRANSACTIONS

    def test_an_index_recreated_on_another_attribute_answers_like_stock(self):
        def flow(table):
            client = engine()
            create_table(client, table)
            out = []
            for i in range(8):
                call(client, "PutItem", {"TableName": table, "Item": {
                    "pk": {"S": f"p{i}"}, "sk": {"N": "0"}, "g": {"S": f"g{i % 2}"}, "gs": {"N": str(i)},
                    "h": {"S": f"g{i % 3}"}}})
            by_g = {"TableName": table, "IndexName": "by-g", "KeyConditionExpression": "#k = :v",
                    "ExpressionAttributeNames": {"#k": "g"}, "ExpressionAttributeValues": {":v": {"S": "g1"}}}
            out.append(call(client, "Query", by_g))  # the map of by-g is built on g
            out.append(call(client, "UpdateTable", {"TableName": table, "GlobalSecondaryIndexUpdates": [
                {"Delete": {"IndexName": "by-g"}}]})[0])
            out.append(call(client, "UpdateTable", {
                "TableName": table,
                "AttributeDefinitions": [{"AttributeName": "h", "AttributeType": "S"}],
                "GlobalSecondaryIndexUpdates": [{"Create": {
                    "IndexName": "by-g", "KeySchema": [{"AttributeName": "h", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": "ALL"}}}]})[0])
            out.append(call(client, "Query", dict(by_g, ExpressionAttributeNames={"#k": "h"})))
            call(client, "DeleteTable", {"TableName": table})
            return out

        want = flow("recreated")
        indexed_queries.install()
        got = flow("recreated")
        self.assertEqual(want, got)
        self.assertEqual(got[3][1]["Count"], 3)

    def test_a_query_on_an_index_reads_no_other_item_once_its_map_is_built(self):
        indexed_queries.install()
        client = engine()
        create_table(client, "walks")
        for i in range(50):
            call(client, "PutItem", {"TableName": "walks", "Item": {
                "pk": {"S": f"p{i}"}, "sk": {"N": "0"}, "g": {"S": f"g{i % 10}"}, "gs": {"N": str(i)}}})
        q = {"TableName": "walks", "IndexName": "by-g", "KeyConditionExpression": "g = :g",
             "ExpressionAttributeValues": {":g": {"S": "g3"}}}
        self.assertEqual(call(client, "Query", q)[1]["Count"], 5)  # builds the map
        call(client, "UpdateItem", {"TableName": "walks", "Key": {"pk": {"S": "p0"}, "sk": {"N": "0"}},
                                    "UpdateExpression": "SET g = :g", "ExpressionAttributeValues": {":g": {"S": "g3"}}})
        read = []
        stock_all_items = Table.all_items
        Table.all_items = lambda self: read.append(self.name) or stock_all_items(self)
        try:
            status, answer = call(client, "Query", q)
        finally:
            Table.all_items = stock_all_items
        self.assertEqual((status, answer["Count"], answer["ScannedCount"]), (200, 6, 6))
        self.assertEqual(read, [], "the whole table was read")
        call(client, "DeleteTable", {"TableName": "walks"})

if __name__ == "__main__":
    unittest.main()
