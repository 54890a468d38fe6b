"""Wake-ups for the API's waiters (long polls, log streams): a Doorbell between the processes of one host that
share a SQLite file (embedded mode), and one Redis pattern subscription per event loop (RedisEvents). A waiter
holds an asyncio event, never a thread: hundreds can wait while the event loop serves everything else.

SQLite has no notifications, so a reader either polls or is told. A `Doorbell` is a directory next to the
database: each process that waits binds one Unix datagram socket in it, and a writer, after its COMMIT, sends a
short datagram (a job id, a queue name) to every socket there. A wake-up is only a hint to read the database
again, so nothing depends on its content or on its arriving: waiters still re-read at a slow interval.

Datagrams on a Unix socket are not dropped; when a receiver's buffer is full the send fails with EAGAIN, which is
fine (that receiver has wake-ups pending). A socket whose owner died answers ECONNREFUSED and is removed.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import os
import select
import socket
import threading
import uuid
from pathlib import Path

log = logging.getLogger("tilefarm.wakeup")

# Where wake-ups cannot be used (no AF_UNIX), waiters fall back to polling this often.
FALLBACK_POLL_S = 0.005
_ABSTRACT_PREFIX = "@"          # a registration file for a socket in the abstract namespace (long directory paths)
_MAX_SOCKET_PATH = 100          # sun_path holds 108 bytes on Linux


class Doorbell:
    def __init__(self, directory: str | Path):
        self.directory = str(directory)
        self._sender: socket.socket | None = None
        self._sender_pid = 0

    @classmethod
    def beside(cls, database: str | Path) -> "Doorbell":
        """The doorbell of a SQLite file: `<file>-wakeup/`, next to its -wal and -shm."""
        return cls(f"{database}-wakeup")

    def _send_socket(self) -> socket.socket | None:
        if self._sender is None or self._sender_pid != os.getpid():
            try:
                self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._sender.setblocking(False)
            except (OSError, AttributeError):
                self._sender = None
            self._sender_pid = os.getpid()
        return self._sender

    def ring(self, message: bytes = b"") -> None:
        """Wake every process listening here (call after the COMMIT that made the change visible)."""
        try:
            names = os.listdir(self.directory)
        except OSError:  # nobody ever listened
            return
        sender = self._send_socket()
        if sender is None:
            return
        for name in names:
            address = ("\0tilefarm-" + name[1:]) if name.startswith(_ABSTRACT_PREFIX) else os.path.join(self.directory, name)
            try:
                sender.sendto(message, address)
            except BlockingIOError:      # its buffer is full: it has wake-ups pending already
                pass
            except OSError as error:
                if error.errno in (errno.ECONNREFUSED, errno.ENOTSOCK):  # its process is gone
                    try:
                        os.unlink(os.path.join(self.directory, name))
                    except OSError:
                        pass

    def listen(self) -> "Listener | None":
        """A bound, registered socket: every ring() from now on reaches it. None where that is not possible."""
        try:
            return Listener(self.directory)
        except OSError as error:
            log.warning("no wake-ups in %s (%s); polling every %g s instead", self.directory, error, FALLBACK_POLL_S)
            return None


class Listener:
    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        self.pid = os.getpid()
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        path = os.path.join(directory, name)
        try:
            if len(os.fsencode(path)) <= _MAX_SOCKET_PATH:
                self.sock.bind(path)                        # the socket file is its own registration
                self.registration = path
            else:
                self.sock.bind("\0tilefarm-" + name)       # bound first, registered second: no ring is lost
                self.registration = os.path.join(directory, _ABSTRACT_PREFIX + name)
                Path(self.registration).touch()
        except OSError:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        self.address = self.sock.getsockname()
        self._poll = select.poll()
        self._poll.register(self.sock, select.POLLIN)
        self._poker: socket.socket | None = None

    def fileno(self) -> int:
        return self.sock.fileno()

    def drain(self) -> list[bytes]:
        """The wake-ups pending now (without waiting)."""
        messages = []
        while True:
            try:
                messages.append(self.sock.recv(512))
            except (BlockingIOError, InterruptedError):
                return messages

    def wait(self, timeout: float) -> list[bytes]:
        """Wait up to `timeout` s for wake-ups; returns them (empty: none came)."""
        messages = self.drain()
        if messages or timeout <= 0:
            return messages
        self._poll.poll(timeout * 1000)  # poll(), not select(): a busy server's descriptors may exceed FD_SETSIZE
        return self.drain()

    def poke(self) -> None:
        """Wake this listener from its own process (another thread of it)."""
        try:
            if self._poker is None:
                self._poker = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._poker.setblocking(False)
            self._poker.sendto(b"", self.address)
        except OSError:  # a full buffer: it is awake already
            pass

    def close(self) -> None:
        if self.pid == os.getpid():  # a forked child must not unregister its parent's socket
            try:
                os.unlink(self.registration)
            except OSError:
                pass
        self.sock.close()


class LoopEvent:
    """An asyncio.Event of the running loop that any thread may set (the dispatcher's thread does)."""

    def __init__(self):
        self.loop = asyncio.get_running_loop()
        self.event = asyncio.Event()

    def set(self) -> None:
        self.loop.call_soon_threadsafe(self.event.set)

    async def wait(self, timeout: float) -> bool:
        """True when set within `timeout` s (and cleared again for the next wait)."""
        try:
            await asyncio.wait_for(self.event.wait(), timeout)
        except TimeoutError:
            return False
        self.event.clear()
        return True


class Dispatcher:
    """One listener per process, its wake-ups handed to whoever waits for that key (a job id): for servers where
    many waits are open at once (the API's long polls and log streams, each a LoopEvent: no thread held)."""

    def __init__(self, doorbell: Doorbell):
        self.doorbell = doorbell
        self._lock = threading.Lock()
        self._waiters: dict[bytes, set[LoopEvent]] = {}
        self._listener: Listener | None = None
        self._pid = 0
        self._failed = False

    def _ensure_listening(self) -> bool:
        if self._pid == os.getpid() and (self._listener is not None or self._failed):
            return self._listener is not None
        with self._lock:
            if self._pid != os.getpid():
                self._listener, self._failed, self._waiters = None, False, {}
                self._pid = os.getpid()
                self._listener = self.doorbell.listen()
                self._failed = self._listener is None
                if self._listener is not None:
                    threading.Thread(target=self._run, args=(self._listener,), name="wakeup-dispatch",
                                     daemon=True).start()
        return self._listener is not None

    def _run(self, listener: Listener) -> None:
        while True:
            for message in listener.wait(3600.0):
                with self._lock:
                    for event in self._waiters.get(message, ()):
                        event.set()

    def register(self, key: str) -> LoopEvent | None:
        """An event set by every wake-up for `key` from now on (call it in the event loop that will wait on it);
        None when wake-ups are unavailable (poll)."""
        if not self._ensure_listening():
            return None
        event = LoopEvent()
        with self._lock:
            self._waiters.setdefault(key.encode(), set()).add(event)
        return event

    def unregister(self, key: str, event: LoopEvent) -> None:
        with self._lock:
            waiting = self._waiters.get(key.encode())
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._waiters[key.encode()]


class RedisEvents:
    """One pattern subscription (`<prefix>events:*`) per event loop, its messages handed to the waiters of each job.

    Registering a waiter is local once the subscription is confirmed, so nothing published after register() is
    missed. While the connection is down, waiters are told to re-read the state every second (wake-ups may be lost
    then); it reconnects with back-off and wakes every waiter when it is back."""

    def __init__(self, url: str, prefix: str):
        self.url, self.pattern, self.strip = url, f"{prefix}events:*", len(f"{prefix}events:")
        self.live = asyncio.Event()
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._task = asyncio.get_running_loop().create_task(self._run(), name="redis-events")

    def register(self, key: str) -> asyncio.Event:
        event = asyncio.Event()
        self._waiters.setdefault(key, set()).add(event)
        return event

    def unregister(self, key: str, event: asyncio.Event) -> None:
        waiting = self._waiters.get(key)
        if waiting is not None:
            waiting.discard(event)
            if not waiting:
                del self._waiters[key]

    def _wake_all(self) -> None:
        for waiting in self._waiters.values():
            for event in waiting:
                event.set()

    async def _run(self) -> None:
        import redis.asyncio as aioredis
        from redis.exceptions import RedisError

        backoff = 0.1
        while True:
            client = aioredis.Redis.from_url(self.url, socket_connect_timeout=2, health_check_interval=30)
            pubsub = client.pubsub()
            try:
                await pubsub.psubscribe(self.pattern)
                while (message := await pubsub.get_message(timeout=5.0)) is None or message["type"] != "psubscribe":
                    pass
                self.live.set()
                self._wake_all()  # whatever happened while we were not listening
                backoff = 0.1
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=30.0)
                    if message is not None and message["type"] == "pmessage":
                        for event in self._waiters.get(message["channel"].decode()[self.strip:], ()):
                            event.set()
            except (RedisError, OSError) as error:
                log.warning("job events from %s lost (%s); reconnecting in %.1f s", self.pattern, error, backoff)
            finally:
                self.live.clear()
                self._wake_all()
                try:
                    await pubsub.aclose()
                    await client.aclose()
                except (RedisError, OSError):
                    pass
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
