"""gc_pauses: full collections walk only what is new; dropped tables are reclaimed.

Run: .venv/bin/python -m unittest discover -s infra/engine -p 'test_*.py'
(internal/enginetest runs them in `make test`).
"""

import gc
import unittest
import weakref

import gc_pauses


class Node:
    """A stand-in for a table and its stream shard: two objects in a cycle."""

    def __init__(self):
        self.other = None


def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a


class CollectorTest(unittest.TestCase):
    def setUp(self):
        self.collector = gc_pauses.Collector()
        self.collector.install()

    def tearDown(self):
        self.collector.uninstall()
        gc.collect()

    def test_start_up_objects_are_frozen(self):
        self.assertGreater(gc.get_freeze_count(), 0)

    def test_survivors_of_a_full_collection_are_frozen_at_the_next_request(self):
        kept = [cycle() for _ in range(100)]
        frozen = gc.get_freeze_count()
        self.collector.between_requests()
        self.assertEqual(gc.get_freeze_count(), frozen, "no full collection ran: nothing to freeze")
        gc.collect()
        self.collector.between_requests()
        self.assertGreaterEqual(gc.get_freeze_count(), frozen + 200, "the survivors are frozen")
        self.assertNotIn(kept[0], gc.get_objects(), "a full collection no longer walks them")

    def test_garbage_of_the_previous_request_is_not_frozen(self):
        gc.collect()
        garbage = weakref.ref(cycle())  # unreachable already, only a collection frees it
        self.collector.between_requests()
        self.assertIsNone(garbage(), "collected before the freeze, not frozen for ever")

    def test_a_dropped_frozen_cycle_is_reclaimed_after_a_table_is_released(self):
        table = cycle()
        gc.collect()
        self.collector.between_requests()
        dropped = weakref.ref(table)
        del table
        gc.collect()
        self.assertIsNotNone(dropped(), "frozen: a full collection does not see it")
        self.collector.reclaim_all()
        self.assertIsNone(dropped(), "reclaimed once after the release")

    def test_releasing_requests_are_recognised(self):
        self.assertTrue(gc_pauses.releases_tables({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.DeleteTable"}))
        self.assertTrue(gc_pauses.releases_tables({"PATH_INFO": "/moto-api/reset"}))
        self.assertFalse(gc_pauses.releases_tables({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.PutItem",
                                                    "PATH_INFO": "/"}))


if __name__ == "__main__":
    unittest.main()
