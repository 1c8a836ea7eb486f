"""Unit tests of stream_retention's limits, with a clock the test moves.

Run: .venv/bin/python -m unittest discover -s infra/engine -p 'test_*.py'
(internal/localengine runs them in `make test`).
"""

import datetime
import types
import unittest

import stream_retention

START = datetime.datetime(2026, 12, 1, 0, 0, 0)


def record(created):
    return types.SimpleNamespace(record={"dynamodb": {"ApproximateCreationDateTime": created}})


def shard(*created):
    return types.SimpleNamespace(items=[record(c) for c in created], starting_sequence_number=1000)


class Clock:
    def __init__(self):
        self.now = START
        self.mono = 0.0


def retention(clock, **limits):
    return stream_retention.Retention(now=lambda: clock.now, monotonic=lambda: clock.mono, **limits)


class TrimTest(unittest.TestCase):
    def test_records_older_than_the_retention_are_dropped_and_sequence_numbers_go_on(self):
        clock = Clock()
        hour = datetime.timedelta(hours=1)
        s = shard(START, START + hour, START + 2 * hour)
        clock.now = START + 25 * hour  # the first is 25 h old, the second 24 h, the third 23 h
        retention(clock).trim(s)
        self.assertEqual([r.record["dynamodb"]["ApproximateCreationDateTime"] for r in s.items],
                         [START + hour, START + 2 * hour])
        self.assertEqual(s.starting_sequence_number, 1001)

    def test_nothing_is_dropped_within_the_retention_and_the_count(self):
        clock = Clock()
        s = shard(START, START)
        retention(clock, max_records=2).trim(s)
        self.assertEqual(len(s.items), 2)
        self.assertEqual(s.starting_sequence_number, 1000)

    def test_records_beyond_the_count_are_dropped_oldest_first(self):
        clock = Clock()
        s = shard(*(START + datetime.timedelta(seconds=i) for i in range(7)))
        retention(clock, max_records=3).trim(s)
        self.assertEqual([r.record["dynamodb"]["ApproximateCreationDateTime"].second for r in s.items], [4, 5, 6])
        self.assertEqual(s.starting_sequence_number, 1004)

    def test_timezone_aware_creation_times_compare_in_utc(self):
        clock = Clock()
        aware = (START - datetime.timedelta(hours=30)).replace(tzinfo=datetime.timezone.utc)
        s = shard(aware)
        retention(clock).trim(s)
        self.assertEqual(s.items, [])

    def test_limits_must_be_positive(self):
        for limits in ({"retention_seconds": 0}, {"max_records": 0}, {"max_iterators": 0}):
            with self.assertRaises(ValueError):
                stream_retention.Retention(**limits)


class IteratorTest(unittest.TestCase):
    def backend(self, clock, *handed_out):
        its = {}
        for i, t in enumerate(handed_out):
            its[f"it{i}"] = types.SimpleNamespace(handed_out=t)
        return types.SimpleNamespace(shard_iterators=its)

    def test_iterators_expire_after_fifteen_minutes(self):
        clock = Clock()
        b = self.backend(clock, 0.0, 100.0, 899.0)
        clock.mono = 901.0
        retention(clock).forget_iterators(b)
        self.assertEqual(list(b.shard_iterators), ["it1", "it2"])

    def test_at_most_max_iterators_are_remembered(self):
        clock = Clock()
        b = self.backend(clock, 1.0, 2.0, 3.0, 4.0)
        retention(clock, max_iterators=2).forget_iterators(b)
        self.assertEqual(list(b.shard_iterators), ["it2", "it3"])


if __name__ == "__main__":
    unittest.main()
