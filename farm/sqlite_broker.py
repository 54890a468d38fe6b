"""The embedded broker: a kombu transport over one SQLite file, with plain sqlite3 and wake-ups instead of polling.

It keeps the table layout of kombu's SQLAlchemy transport (`kombu_queue`, `kombu_message`), so a broker file
written by it is read as it is (waiting messages included), but:

- a consumer does not poll: it waits on the file's doorbell (farm/wakeup.py), which every publish rings after
  its COMMIT, and re-reads only every `polling_interval` (TILEFARM_EMBEDDED_POLL_S) in case a wake-up was missed;
- looking for a message is a read (an index lookup); only taking one writes (one UPDATE that marks it delivered,
  which only succeeds for one consumer);
- an acknowledged message is deleted (kombu's transport kept every delivered message forever, and its lookup
  scanned them all: each poll got slower with every job the service had ever run);
- a rejected or unacknowledged message (reject with requeue, a pool process lost, worker shutdown) is made
  visible again in place, so acks_late/redelivery behave as before.

Publishing stays durable: each message is its own transaction with SQLite's default synchronous=FULL.
"""
from __future__ import annotations

import datetime
import os
import socket
import sqlite3
import threading
import weakref
from contextlib import closing
from json import dumps, loads
from queue import Empty
from time import monotonic, sleep

from kombu.transport import virtual

from farm.wakeup import FALLBACK_POLL_S, Doorbell, Listener

ALIAS = "tilefarm-sqlite"
URL_PREFIX = f"{ALIAS}+sqlite:///"

# The DDL SQLAlchemy emits for kombu's models: a file created by either transport is the same.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS kombu_queue (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    name VARCHAR(200),
    UNIQUE (name)
);
CREATE TABLE IF NOT EXISTS kombu_message (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    visible BOOLEAN,
    timestamp DATETIME,
    payload TEXT NOT NULL,
    version SMALLINT NOT NULL,
    queue_id INTEGER,
    CONSTRAINT "FK_kombu_message_queue" FOREIGN KEY(queue_id) REFERENCES kombu_queue (id)
);
CREATE INDEX IF NOT EXISTS ix_kombu_message_visible ON kombu_message (visible);
CREATE INDEX IF NOT EXISTS ix_kombu_message_timestamp_id ON kombu_message (timestamp, id);
CREATE INDEX IF NOT EXISTS ix_kombu_message_timestamp ON kombu_message (timestamp);
"""


_consumers: "weakref.WeakSet[Transport]" = weakref.WeakSet()


def interrupt_consumers() -> None:
    """The worker is shutting down: its consumer loops stop waiting for messages and take no more (Celery's synloop
    sees a shutdown request only between drain_events calls, up to 2 s apart). Safe in a signal handler."""
    for transport in list(_consumers):
        transport._interrupted = True
        transport.wake_consumer()


def database_path(url: str) -> str:
    """The file of a broker URL (`tilefarm-sqlite+sqlite:////abs/broker.sqlite`, or its `sqlite:///...` part)."""
    return url.split("+", 1)[1].removeprefix("sqlite:///") if url.startswith(ALIAS + "+") else url.removeprefix("sqlite:///")


def _now() -> str:
    return datetime.datetime.now().isoformat(sep=" ")


def release_unacknowledged(path: str) -> int:
    """Messages delivered to a worker that is gone (killed before it acknowledged them): visible again, in their
    place in the queue, for the next worker (as a Redis visibility timeout would). Only for when no consumer is
    alive: the supervisor before it starts the next worker, the service's start-up (service/embedded.py)."""
    if not os.path.exists(path):
        return 0
    with closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as db:
        db.executescript(_SCHEMA)
        count = db.execute("UPDATE kombu_message SET visible = 1 WHERE visible = 0").rowcount
    if count:
        Doorbell.beside(path).ring(b"")
    return count


class QoS(virtual.QoS):
    # acks come from the pool's result thread while the consumer loop may be waiting for a free prefetch slot:
    # free the slot first (super), then wake the loop (Channel._settle), or it can wake, find no slot and sleep on

    def ack(self, delivery_tag):
        super().ack(delivery_tag)
        self.channel._settle(delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        super().reject(delivery_tag, requeue=requeue)  # requeue: Channel._restore_at_beginning, visible again
        if requeue:
            self.channel._wake_consumer()
        else:
            self.channel._settle(delivery_tag)


class Channel(virtual.Channel):
    QoS = QoS

    def __init__(self, connection, **kwargs):
        super().__init__(connection, **kwargs)
        self.path = database_path(connection.client.hostname)
        self.doorbell = Doorbell.beside(self.path)
        self._lock = threading.RLock()       # acks come from the pool's result thread, gets from the consumer's
        self._db: sqlite3.Connection | None = None
        self._db_pid = 0
        self._queue_ids: dict[str, int] = {}
        self._rows: dict[str, int] = {}       # delivery tag -> message row, for the messages delivered here

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None or self._db_pid != os.getpid():
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            self._db, self._db_pid, self._queue_ids = db, os.getpid(), {}
        return self._db

    def _queue_id(self, queue: str) -> int:
        queue_id = self._queue_ids.get(queue)
        if queue_id is None:
            with self._lock:
                db = self.db
                db.execute("INSERT OR IGNORE INTO kombu_queue (name) VALUES (?)", (queue,))
                queue_id = db.execute("SELECT id FROM kombu_queue WHERE name = ?", (queue,)).fetchone()[0]
            self._queue_ids[queue] = queue_id
        return queue_id

    def _new_queue(self, queue, **kwargs):
        self._queue_id(queue)

    def _has_queue(self, queue, **kwargs):
        with self._lock:
            return self.db.execute("SELECT 1 FROM kombu_queue WHERE name = ?", (queue,)).fetchone() is not None

    def _put(self, queue, message, **kwargs):
        queue_id = self._queue_id(queue)
        with self._lock:
            self.db.execute("INSERT INTO kombu_message (visible, timestamp, payload, version, queue_id) "
                            "VALUES (1, NULL, ?, 1, ?)", (dumps(message), queue_id))
        self.doorbell.ring(queue.encode())

    def _get(self, queue, timeout=None):
        queue_id = self._queue_id(queue)
        with self._lock:
            db = self.db
            while True:
                row = db.execute("SELECT id, payload FROM kombu_message WHERE queue_id = ? AND visible = 1 "
                                 "ORDER BY id LIMIT 1", (queue_id,)).fetchone()
                if row is None:
                    raise Empty()
                # delivered = invisible; the timestamp says when (kombu's transport does the same)
                taken = db.execute("UPDATE kombu_message SET visible = 0, timestamp = ? WHERE id = ? AND visible = 1",
                                   (_now(), row[0])).rowcount
                if taken:  # else another consumer took it between the two statements: look again
                    break
        payload = loads(row[1])
        self._rows[payload["properties"]["delivery_tag"]] = row[0]
        return payload

    def _settle(self, delivery_tag) -> None:
        """Acknowledged (or rejected for good): the message is done, remove it."""
        row = self._rows.pop(delivery_tag, None)
        if row is not None:
            with self._lock:
                self.db.execute("DELETE FROM kombu_message WHERE id = ?", (row,))
        self._wake_consumer()

    def _wake_consumer(self) -> None:
        """A prefetch slot is free: this process's consumer loop may take the next message."""
        if self.connection is not None:
            self.connection.wake_consumer()

    def _restore(self, message):
        """Redeliver: the message this channel took becomes visible again, in its place in the queue."""
        row = self._rows.pop(message.delivery_tag, None)
        if row is None:
            return super()._restore(message)  # not taken here: publish it again
        with self._lock:
            self.db.execute("UPDATE kombu_message SET visible = 1 WHERE id = ?", (row,))
        self.doorbell.ring(((message.delivery_info or {}).get("routing_key") or "").encode())

    def _size(self, queue):
        queue_id = self._queue_id(queue)
        with self._lock:
            return self.db.execute("SELECT COUNT(*) FROM kombu_message WHERE queue_id = ? AND visible = 1",
                                   (queue_id,)).fetchone()[0]

    def _purge(self, queue):
        """Remove the waiting messages (delivered, unacknowledged ones stay theirs to settle)."""
        queue_id = self._queue_id(queue)
        with self._lock:
            return self.db.execute("DELETE FROM kombu_message WHERE queue_id = ? AND visible = 1",
                                   (queue_id,)).rowcount

    def close(self):
        super().close()  # restores unacknowledged messages
        if self._db is not None and self._db_pid == os.getpid():
            self._db.close()
        self._db = None


class Transport(virtual.Transport):
    Channel = Channel

    can_parse_url = True
    default_port = 0
    driver_type = "sql"
    driver_name = "sqlite3"
    connection_errors = (sqlite3.OperationalError,)
    channel_errors = virtual.Transport.channel_errors + (sqlite3.OperationalError,)

    def __init__(self, client, **kwargs):
        super().__init__(client, **kwargs)
        self._listener: Listener | None = None
        self._listener_pid = 0
        self._listen_failed = False
        self._interrupted = False

    def driver_version(self):
        return sqlite3.sqlite_version

    def _consumer_listener(self) -> Listener | None:
        if self._listener_pid != os.getpid():
            self._listener, self._listen_failed = None, False
            self._listener_pid = os.getpid()
        if self._listener is None and not self._listen_failed:
            self._listener = Doorbell.beside(database_path(self.client.hostname)).listen()
            self._listen_failed = self._listener is None
            _consumers.add(self)
        return self._listener

    def close_connection(self, connection):
        super().close_connection(connection)
        if self._listener is not None and self._listener_pid == os.getpid():
            self._listener.close()  # unregistered: publishers stop ringing it
        self._listener = None

    def wake_consumer(self) -> None:
        """Wake this process's own consumer loop (an ack freed a prefetch slot)."""
        listener = self._listener
        if listener is not None and self._listener_pid == os.getpid():
            listener.poke()

    def drain_events(self, connection, timeout=None):
        """Deliver one message; between looks, wait for a wake-up (a publish, an ack) instead of sleeping."""
        if self._interrupted:  # shutting down (Celery's synloop drains once more after it saw the request)
            raise socket.timeout()
        started = monotonic()
        listener = self._consumer_listener()  # registered before the first look: no later publish is missed
        interval = self.polling_interval if listener is not None else min(self.polling_interval, FALLBACK_POLL_S)
        while True:
            if listener is not None:
                listener.drain()  # what those announced, the look below sees
            try:
                self.cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                pass
            wait = interval
            if timeout is not None:
                left = timeout - (monotonic() - started)
                if left <= 0:
                    raise socket.timeout()
                wait = min(wait, left)
            if listener is not None:
                listener.wait(wait)
            else:
                sleep(wait)
            if self._interrupted:
                raise socket.timeout()
