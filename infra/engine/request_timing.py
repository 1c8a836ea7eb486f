"""Per-request timing for the engine launcher, off unless asked for.

Why
    The engine serves one request at a time, so one slow request (or a pause
    of the Python process) delays every client behind it, and a client's
    300 ms store budget turns that delay into an error. To find which request
    or pause it was, this log records, for every request, when it arrived,
    how long it waited for the engine lock, how long it was served, its
    operation (``X-Amz-Target``) and status, and, separately, every garbage
    collection with its generation and duration.

Output
    One JSON object per line, appended to the file named by
    ``moto_server.py --timing-log PATH`` (or ``INTENTGATE_ENGINE_TIMING_LOG``):
    ``{"t": <unix s>, "op": ..., "status": ..., "wait_ms": ..., "serve_ms": ...,
    "cpu_ms": ..., "req_bytes": ..., "resp_bytes": ...}`` (cpu_ms: the serving
    thread's CPU time, which a loaded host inflates less than serve_ms) and ``{"t": ..., "gc": <generation>,
    "ms": ..., "collected": ...}``.
"""

import gc
import json
import threading
import time
from typing import Any, Callable, TextIO


class TimingLog:
    """A line-per-event JSON log, safe to write from any thread."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._gc_started = 0.0

    def write(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, separators=(",", ":"))
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()

    def watch_gc(self) -> None:
        """Log every collection (gc.callbacks run around each one)."""

        def on_gc(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                self._gc_started = time.perf_counter()
                return
            self.write({
                "t": round(time.time(), 6),
                "gc": info.get("generation"),
                "ms": round((time.perf_counter() - self._gc_started) * 1000, 3),
                "collected": info.get("collected"),
            })

        gc.callbacks.append(on_gc)

    def timed(self, lock: threading.Lock, serve: Callable[..., bytes], environ: dict[str, Any],
              start_response: Callable[..., Any]) -> bytes:
        """serve(environ, start_response) under lock, its wait and service time logged."""
        status: list[str] = []

        def record_status(s: str, headers: Any, exc_info: Any = None) -> Any:
            status.append(s.split(" ", 1)[0])
            return start_response(s, headers, exc_info) if exc_info else start_response(s, headers)

        arrived = time.perf_counter()
        with lock:
            locked = time.perf_counter()
            cpu = time.thread_time()
            body = serve(environ, record_status)
            cpu = time.thread_time() - cpu
            done = time.perf_counter()
        self.write({
            "t": round(time.time(), 6),
            "op": environ.get("HTTP_X_AMZ_TARGET") or environ.get("PATH_INFO"),
            "status": status[0] if status else None,
            "wait_ms": round((locked - arrived) * 1000, 3),
            "serve_ms": round((done - locked) * 1000, 3),
            "cpu_ms": round(cpu * 1000, 3),
            "req_bytes": int(environ.get("CONTENT_LENGTH") or 0),
            "resp_bytes": len(body),
        })
        return body
