"""How a running stage is told to stop, without raising anything into the code it runs.

A `Stop` is set once, from any thread, with the reason: the stage's time limit, a cancel request, its lease lost.
The stage's work waits on it where it waits anyway: the sandbox client polls its file descriptor beside the
sandbox's reply (and kills the job's child when it becomes readable), the fault hold waits on it. Whoever ran the
stage reads `reason` afterwards and records the outcome that reason gives.

`StageWatch` sets it: a timer for the time limit, and the job's change notifications from the store
(`store.subscribe`, the same ones the API's long polls wait on) for a cancel request: no polling per job. Both run
in one event loop thread per worker process (`events_loop`).
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future

log = logging.getLogger("tilefarm.worker")

TIME_LIMIT, CANCELLED, LEASE_LOST = "time limit", "cancelled", "lease lost"
RECHECK_S = 30.0  # a cancel request is re-read this often even if no notification came (one was lost)


class Stop:
    """Set once with a reason; readable as a file descriptor from then on (for poll/select beside other waits)."""

    def __init__(self):
        self.reason: str | None = None
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._read, self._write = os.pipe()

    def set(self, reason: str) -> None:
        with self._lock:
            if self.reason is not None or self._write < 0:
                return
            self.reason = reason
            self._event.set()
            os.write(self._write, b"!")

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def fileno(self) -> int:
        return self._read

    def close(self) -> None:
        with self._lock:
            for fd in (self._read, self._write):
                if fd >= 0:
                    os.close(fd)
            self._read = self._write = -1


_loops: dict[int, asyncio.AbstractEventLoop] = {}
_loops_lock = threading.Lock()


def events_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop for the store's notifications (a daemon thread; a forked child starts its own)."""
    with _loops_lock:
        loop = _loops.get(os.getpid())
        if loop is None:
            _loops.clear()
            loop = _loops[os.getpid()] = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="store-events", daemon=True).start()
        return loop


class StageWatch:
    """Sets `stop` when the stage's time limit passes or its job is asked to cancel (told by the store)."""

    def __init__(self, store, job_id: str, stop: Stop, limit_s: float, cancelled: Callable[[], bool]):
        self.store, self.job_id, self.stop, self.limit_s, self.cancelled = store, job_id, stop, limit_s, cancelled
        self._future: Future | None = None

    def __enter__(self) -> "StageWatch":
        self._future = asyncio.run_coroutine_threadsafe(self._watch(), events_loop())
        return self

    def __exit__(self, *exc) -> None:
        self._future.cancel()

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.limit_s, self.stop.set, TIME_LIMIT)
        try:
            async with self.store.subscribe(self.job_id) as changes:  # subscribed before the first read
                while not self.stop.is_set():
                    try:
                        if await asyncio.to_thread(self.cancelled):
                            self.stop.set(CANCELLED)
                            return
                    except Exception as error:  # the store is unreachable a moment: the stage goes on, ask again
                        log.debug("job %s: cancel check failed: %s", self.job_id, error)
                    await changes.wait(RECHECK_S)
        finally:
            timer.cancel()
