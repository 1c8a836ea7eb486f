"""Garbage-collection pauses of the engine kept short and independent of history.

Why
    CPython's full (generation 2) collection walks every container object the
    process holds. Right after start-up that is moto's and botocore's ~100,000
    objects (service models, shapes, parsers): one full collection costs about
    90 ms of CPU, and several hundred milliseconds of wall time on a loaded
    host. Later it is also every item of every table (moto keeps each attribute
    as an object: about 30 per item of the operations table), so the pause
    grows with the table's history. The engine serves one request at a time:
    every client waits through the pause, past a 300 ms store budget.

What it does
    - ``gc.freeze()`` once after start-up (and warm-up): the import-time
      objects move to the permanent generation and are never walked again.
    - After each full collection the objects that survived it are frozen too,
      at the next request boundary (a young-generation collection first, so
      the previous request's cyclic garbage is not frozen). A full collection
      then walks only what was created since the previous one, not the whole
      history; objects that become garbage without a reference cycle (items
      overwritten or deleted, stream records trimmed) are still freed at once
      by reference counting.
    - Frozen cyclic garbage is never collected, and a deleted table is a cycle
      (table and stream shard refer to each other). So after a DeleteTable or
      a reset, everything is unfrozen, collected once and frozen again: that
      one request pays a full collection, no writer's request does.

Measured on a replay of a devstack's 4,132 requests (1,000 acceptance writes,
CPU time, the host loaded by others): full collections 67 ms median, 113 ms
max without this module (after the start-up freeze alone); see
docs/local-engine.md for the figures with it.
"""

import gc
from typing import Any


class Collector:
    """Freezes survivors of full collections between requests."""

    def __init__(self) -> None:
        self._full_collection_since_freeze = False
        self.freezes = 0  # for tests and the timing log

    def install(self) -> None:
        """Freeze what start-up created and watch for full collections."""
        gc.collect()
        gc.freeze()
        gc.callbacks.append(self._on_gc)

    def uninstall(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        gc.unfreeze()

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info.get("generation") == 2:
            self._full_collection_since_freeze = True

    def between_requests(self) -> None:
        """Freeze the survivors of a full collection that ran since the last call."""
        if not self._full_collection_since_freeze:
            return
        self._full_collection_since_freeze = False
        gc.collect(1)
        gc.freeze()
        self.freezes += 1

    def reclaim_all(self) -> None:
        """Collect everything once, frozen objects included (after a table was dropped)."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self._full_collection_since_freeze = False
        self.freezes += 1


def releases_tables(environ: dict[str, Any]) -> bool:
    """Whether a request may drop a whole table: DeleteTable or a reset."""
    target = environ.get("HTTP_X_AMZ_TARGET") or ""
    return target.endswith(".DeleteTable") or environ.get("PATH_INFO", "").startswith("/moto-api/reset")
