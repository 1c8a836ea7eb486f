"""fast_attribute_values answers exactly what stock moto's serializer answers.

Run: .venv/bin/python -m unittest discover -s infra/engine -p 'test_*.py'
(internal/enginetest runs them in `make test`).
"""

import json
import unittest

from moto.core.responses import ActionResult
from moto.core.serialize import JSONSerializer, XFormedAttributePicker
from moto.core.utils import get_service_model
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.test import Client

import fast_attribute_values

# Every attribute type, nested, empty, and binaries given as text and bytes.
WIRE_VALUES = {
    "s": {"S": "text"},
    "empty_s": {"S": ""},
    "unicode": {"S": "gr\u00fc\u00dfe \u2603"},
    "n": {"N": "-12.5e3"},
    "b_text": {"B": "YmluYXJ5"},
    "b_bytes": {"B": b"\x00\xffraw"},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": ["YQ==", b"\x01"]},
    "null": {"NULL": True},
    "bool_true": {"BOOL": True},
    "bool_false": {"BOOL": False},
    "empty_m": {"M": {}},
    "empty_l": {"L": []},
    "two_codes": {"BOOL": True, "S": "both"},  # not DynamoDB's, but stock serializes it
    "nested": {"M": {"l": {"L": [{"S": "x"}, {"M": {"n": {"N": "1"}, "t": {"BOOL": False}}}, {"NULL": True}]},
                      "ss": {"SS": ["z"]}}},
}

# What a request can carry (binaries arrive base64-encoded).
REQUEST_VALUES = {name: value for name, value in WIRE_VALUES.items() if name not in ("b_bytes", "bs", "two_codes")}

# Values that are not plain wire form: left to stock, which must still answer.
NOT_PLAIN_VALUES = {
    "none_member": {"S": None},
    "unknown_code": {"X": "y"},
    "number_as_int": {"N": 5},
    "bool_as_text": {"BOOL": "true"},
    "none_in_list": {"L": [None, {"S": "a"}]},
}


def serialize(operation: str, service: str, result: dict) -> dict:
    model = get_service_model(service).operation_model(operation)
    serializer = JSONSerializer(operation_model=model, pretty_print=False, value_picker=XFormedAttributePicker())
    return serializer.serialize(result)


class SerializerTest(unittest.TestCase):
    def tearDown(self):
        fast_attribute_values.uninstall()

    def both(self, operation, service, result):
        fast_attribute_values.uninstall()
        stock = serialize(operation, service, result)
        fast_attribute_values.install()
        fast = serialize(operation, service, result)
        return stock, fast

    def test_every_wire_form_value_serializes_exactly_as_stock(self):
        for name, value in WIRE_VALUES.items():
            with self.subTest(name):
                stock, fast = self.both("GetItem", "dynamodb", {"Item": {"pk": {"S": "k"}, "v": value}})
                self.assertEqual(stock, fast)
                self.assertEqual(fast_attribute_values.plain(value), json.loads(stock["body"])["Item"]["v"])

    def test_stream_records_serialize_exactly_as_stock(self):
        image = {name: value for name, value in WIRE_VALUES.items()}
        record = {
            "eventID": "e1", "eventName": "MODIFY", "eventSource": "aws:dynamodb", "eventVersion": "1.0",
            "awsRegion": "us-east-1",
            "dynamodb": {"StreamViewType": "NEW_AND_OLD_IMAGES", "SequenceNumber": "1", "SizeBytes": 10,
                         "Keys": {"pk": {"S": "k"}}, "NewImage": image, "OldImage": {"pk": {"S": "k"}}},
        }
        stock, fast = self.both("GetRecords", "dynamodbstreams", {"NextShardIterator": "it", "Records": [record]})
        self.assertEqual(stock, fast)

    def test_values_that_are_not_plain_wire_form_are_left_to_stock(self):
        for name, value in NOT_PLAIN_VALUES.items():
            with self.subTest(name):
                with self.assertRaises(fast_attribute_values._NotPlain):
                    fast_attribute_values.plain(value)
                stock, fast = self.both("GetItem", "dynamodb", {"Item": {"v": value}})
                self.assertEqual(stock, fast)

    def test_another_service_is_left_alone(self):
        fast_attribute_values.install()
        model = get_service_model("dynamodb").operation_model("GetItem")
        calls = []
        serializer = JSONSerializer(operation_model=model, pretty_print=False, value_picker=XFormedAttributePicker())
        stock = fast_attribute_values._stock_serialize_type_structure

        class OtherService:
            service_name = "not-dynamodb"

        class OtherModel:
            service_model = OtherService()

        serializer.operation_model = OtherModel()
        fast_attribute_values._stock_serialize_type_structure = lambda *a: calls.append(a)
        try:
            serializer._serialize_type_structure({}, {"S": "x"}, model.output_shape.members["Item"].value, "v")
        finally:
            fast_attribute_values._stock_serialize_type_structure = stock
        self.assertEqual(len(calls), 1, "the stock serializer served the other service")


AUTH = ("AWS4-HMAC-SHA256 Credential=000000000000/20260101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host, Signature=0")


class EngineAnswersTest(unittest.TestCase):
    """Whole answers of a moto app: the same request answered under stock and
    under the patch (requests that change nothing, so both see one state)."""

    @classmethod
    def setUpClass(cls):
        cls.client = Client(DomainDispatcherApplication(create_backend_app))
        cls.table = "fast-attribute-values"
        cls.call("DynamoDB_20120810.CreateTable", {
            "TableName": cls.table, "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        })
        for i, (name, value) in enumerate(REQUEST_VALUES.items()):
            item = {"pk": {"S": f"k{i % 3}"}, name: value, "i": {"N": str(i)}}
            cls.call("DynamoDB_20120810.PutItem", {"TableName": cls.table, "Item": item})

    @classmethod
    def tearDownClass(cls):
        cls.call("DynamoDB_20120810.DeleteTable", {"TableName": cls.table})
        fast_attribute_values.uninstall()

    @classmethod
    def call(cls, target, body):
        resp = cls.client.post("/", data=json.dumps(body), headers={
            "Content-Type": "application/x-amz-json-1.0", "Authorization": AUTH, "X-Amz-Target": target})
        return resp.status_code, resp.get_data()

    def both(self, target, body):
        fast_attribute_values.uninstall()
        stock = self.call(target, body)
        fast_attribute_values.install()
        fast = self.call(target, body)
        return stock, fast

    def test_reads_and_cancellations_answer_byte_for_byte_as_stock(self):
        requests = {
            "get": ("DynamoDB_20120810.GetItem", {"TableName": self.table, "Key": {"pk": {"S": "k1"}}}),
            "scan": ("DynamoDB_20120810.Scan", {"TableName": self.table}),
            "query": ("DynamoDB_20120810.Query", {"TableName": self.table, "KeyConditionExpression": "pk = :k",
                                                  "ExpressionAttributeValues": {":k": {"S": "k2"}}}),
            "failed_put_all_old": ("DynamoDB_20120810.PutItem", {
                "TableName": self.table, "Item": {"pk": {"S": "k0"}}, "ConditionExpression": "attribute_not_exists(pk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}),
            "cancelled_transaction_all_old": ("DynamoDB_20120810.TransactWriteItems", {"TransactItems": [
                {"ConditionCheck": {"TableName": self.table, "Key": {"pk": {"S": "k1"}},
                                    "ConditionExpression": "attribute_not_exists(pk)",
                                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
                {"Put": {"TableName": self.table, "Item": {"pk": {"S": "new"}}}}]}),
        }
        for name, (target, body) in requests.items():
            with self.subTest(name):
                stock, fast = self.both(target, body)
                self.assertEqual(stock, fast)
                self.assertIn(b'"S"', fast[1], "the answer carries attribute values")

    def test_stream_records_answer_as_stock(self):
        _, raw = self.call("DynamoDB_20120810.DescribeTable", {"TableName": self.table})
        arn = json.loads(raw)["Table"]["LatestStreamArn"]
        _, raw = self.call("DynamoDBStreams_20120810.DescribeStream", {"StreamArn": arn})
        shard = json.loads(raw)["StreamDescription"]["Shards"][0]["ShardId"]
        _, raw = self.call("DynamoDBStreams_20120810.GetShardIterator", {
            "StreamArn": arn, "ShardId": shard, "ShardIteratorType": "TRIM_HORIZON"})
        iterator = json.loads(raw)["ShardIterator"]
        (stock_status, stock_raw), (fast_status, fast_raw) = self.both(
            "DynamoDBStreams_20120810.GetRecords", {"ShardIterator": iterator})
        self.assertEqual((stock_status, fast_status), (200, 200))
        stock, fast = json.loads(stock_raw), json.loads(fast_raw)
        # Each GetRecords hands out a new random next iterator.
        del stock["NextShardIterator"], fast["NextShardIterator"]
        self.assertEqual(stock, fast)
        self.assertEqual(len(fast["Records"]), len(REQUEST_VALUES))


if __name__ == "__main__":
    unittest.main()
