"""fast_update_expressions answers exactly as stock moto and never changes a cached tree.

Run: .venv/bin/python -m unittest discover -s infra/engine -p 'test_*.py'
(internal/enginetest runs them in `make test`).
"""

import json
import unittest

from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.test import Client

import fast_update_expressions

AUTH = ("AWS4-HMAC-SHA256 Credential=000000000000/20260101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host, Signature=0")

SET_MANY = "SET " + ", ".join(f"#a{i} = :v{i}" for i in range(20)) + ", n = if_not_exists(n, :zero) + :one"
NAMES = {f"#a{i}": f"attr{i}" for i in range(20)}


def values(round_no):
    out = {f":v{i}": {"S": f"r{round_no}-{i}"} for i in range(20)}
    out.update({":zero": {"N": "0"}, ":one": {"N": "1"}})
    return out


def updates():
    """UpdateItem bodies (without TableName): repeats, removals, list appends, and invalid ones."""
    out = []
    for round_no in range(3):
        for key in ("k1", "k2"):
            out.append({"Key": {"pk": {"S": key}}, "UpdateExpression": SET_MANY,
                        "ExpressionAttributeNames": NAMES, "ExpressionAttributeValues": values(round_no),
                        "ReturnValues": "ALL_NEW"})
        out.append({"Key": {"pk": {"S": "k1"}}, "UpdateExpression": "SET l = list_append(if_not_exists(l, :e), :x) REMOVE attr3",
                    "ExpressionAttributeValues": {":e": {"L": []}, ":x": {"L": [{"N": str(round_no)}]}},
                    "ReturnValues": "UPDATED_OLD"})
        out.append({"Key": {"pk": {"S": "k2"}}, "UpdateExpression": "ADD s :s",
                    "ExpressionAttributeValues": {":s": {"SS": [f"m{round_no}"]}}})
        # Invalid: two clauses of one kind (each kind, and the first of two
        # reported), a syntax error, a missing placeholder, a path used twice.
        out.append({"Key": {"pk": {"S": "k1"}}, "UpdateExpression": "SET a = :x SET b = :x",
                    "ExpressionAttributeValues": {":x": {"S": "x"}}})
        out.append({"Key": {"pk": {"S": "k1"}}, "UpdateExpression": "REMOVE a ADD n :one REMOVE b ADD n2 :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}}})
        out.append({"Key": {"pk": {"S": "k1"}}, "UpdateExpression": "SET c = :x REMOVE a REMOVE b",
                    "ExpressionAttributeValues": {":x": {"S": "x"}}})
        # Two kinds repeated: stock reports the one repeated deepest (SET).
        out.append({"Key": {"pk": {"S": "k1"}}, "UpdateExpression": "REMOVE c SET a = :x REMOVE d SET b = :x",
                    "ExpressionAttributeValues": {":x": {"S": "x"}}})
        out.append({"Key": {"pk": {"S": "k1"}}, "UpdateExpression": "SET = :v"})
        out.append({"Key": {"pk": {"S": "k1"}}, "UpdateExpression": "SET a = :missing",
                    "ExpressionAttributeValues": {":other": {"S": "x"}}})
        out.append({"Key": {"pk": {"S": "k2"}}, "UpdateExpression": "SET a = :x, a = :x",
                    "ExpressionAttributeValues": {":x": {"S": "x"}}})
        # A conditional update whose condition fails, old item returned.
        out.append({"Key": {"pk": {"S": "k1"}}, "UpdateExpression": SET_MANY, "ConditionExpression": "attribute_not_exists(pk)",
                    "ExpressionAttributeNames": NAMES, "ExpressionAttributeValues": values(9),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD"})
    return out


def tree(node):
    """A comparable picture of a parse tree: node types, children and leaves."""
    children = getattr(node, "children", None)
    if children is None:
        return repr(node)
    return (type(node).__name__, tuple(tree(c) for c in children))


class CachedParseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = Client(DomainDispatcherApplication(create_backend_app))

    def tearDown(self):
        fast_update_expressions.uninstall()

    def call(self, target, body):
        resp = self.client.post("/", data=json.dumps(body), headers={
            "Content-Type": "application/x-amz-json-1.0", "Authorization": AUTH, "X-Amz-Target": target})
        return resp.status_code, json.loads(resp.get_data() or b"null")

    def run_sequence(self, table):
        self.call("DynamoDB_20120810.CreateTable", {
            "TableName": table, "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        })
        try:
            answers = []
            for body in updates():
                status, answer = self.call("DynamoDB_20120810.UpdateItem", dict(body, TableName=table))
                answers.append((status, json.loads(json.dumps(answer).replace(table, "TABLE"))))
            _, scan = self.call("DynamoDB_20120810.Scan", {"TableName": table, "ConsistentRead": True})
            return answers, sorted(scan["Items"], key=lambda item: item["pk"]["S"])
        finally:
            self.call("DynamoDB_20120810.DeleteTable", {"TableName": table})

    def test_update_sequences_answer_and_end_exactly_as_stock(self):
        fast_update_expressions.uninstall()
        stock_answers, stock_items = self.run_sequence("update-stock")
        fast_update_expressions.install()
        fast_answers, fast_items = self.run_sequence("update-fast")
        self.assertEqual(len(stock_answers), len(fast_answers))
        for i, (want, got) in enumerate(zip(stock_answers, fast_answers)):
            self.assertEqual(want, got, f"update {i}: {updates()[i]['UpdateExpression']}")
        self.assertEqual(stock_items, fast_items)
        statuses = {status for status, _ in fast_answers}
        self.assertEqual(statuses, {200, 400}, "the sequence has both applied and refused updates")
        self.assertGreater(fast_update_expressions._parse.cache_info().hits, 0, "the cache served repeats")

    def test_serving_requests_leaves_a_cached_tree_unchanged(self):
        fast_update_expressions.install()
        cached = UpdateExpressionParser.make(SET_MANY)
        before = tree(cached)
        self.run_sequence("update-unchanged")
        self.assertIs(UpdateExpressionParser.make(SET_MANY), cached, "the same tree is handed out")
        self.assertEqual(tree(cached), before)

    def test_an_expression_that_does_not_parse_raises_every_time(self):
        fast_update_expressions.install()
        for _ in range(2):
            with self.assertRaises(Exception):
                UpdateExpressionParser.make("SET = :v")


if __name__ == "__main__":
    unittest.main()
