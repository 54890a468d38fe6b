"""The embedded broker (farm/sqlite_broker.py) and the wake-ups (farm/wakeup.py), through kombu's public API
on real SQLite files; publishers and writers in other processes, as in `tilefarm serve`."""
from __future__ import annotations

import asyncio

import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from kombu import Connection, Queue
from kombu.transport import TRANSPORT_ALIASES

from farm.wakeup import Doorbell, Listener
from tests.service.conftest import REPO
from farm import sqlite_broker

TRANSPORT_ALIASES.setdefault(sqlite_broker.ALIAS, "farm.sqlite_broker:Transport")
NEVER_S = 3600.0  # the re-read interval in the tests of wake-ups: far beyond every wait, only a wake-up delivers
HANG_S = 60.0     # how long a test waits for an event before it calls it a hang


def _url(path: Path) -> str:
    return f"{sqlite_broker.URL_PREFIX}{path}"


def _rows(path: Path) -> list[tuple[int, int]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT id, visible FROM kombu_message ORDER BY id").fetchall()


def _publish_from_another_process(path: Path, body: str) -> None:
    code = (f"from kombu import Connection; from kombu.transport import TRANSPORT_ALIASES; "
            f"TRANSPORT_ALIASES['{sqlite_broker.ALIAS}'] = 'farm.sqlite_broker:Transport'; "
            f"c = Connection({_url(path)!r}); c.SimpleQueue('compile').put({body!r}); c.release()")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


def test_ack_deletes_reject_requeues_in_place_close_restores(tmp_path):
    path = tmp_path / "broker.sqlite"
    with Connection(_url(path), transport_options={"polling_interval": NEVER_S}) as conn:
        queue = conn.SimpleQueue("compile")
        for body in ("first", "second"):
            queue.put(body)
        message = queue.get(timeout=30)
        assert message.payload == "first" and [v for _, v in _rows(path)] == [0, 1]
        message.reject(requeue=True)                           # e.g. task_reject_on_worker_lost
        assert [v for _, v in _rows(path)] == [1, 1]
        again = queue.get(timeout=30)
        assert again.payload == "first"                        # redelivered in its place, ahead of "second"
        again.ack()
        assert [v for _, v in _rows(path)] == [1]              # acknowledged = gone, the table does not grow
        unacked = queue.get(timeout=30)
        assert unacked.payload == "second" and [v for _, v in _rows(path)] == [0]
        queue.close()
    assert [v for _, v in _rows(path)] == [1]                  # the consumer went away: the message waits again
    with Connection(_url(path)) as conn:
        queue = conn.SimpleQueue("compile")
        message = queue.get(timeout=30)
        assert message.payload == "second"
        message.reject(requeue=False)
        assert _rows(path) == [] and queue.qsize() == 0


def _waiting_for_a_wakeup(thread: threading.Thread) -> bool:
    """Whether `thread` is blocked in Listener.wait (it has looked, found nothing and waits to be told)."""
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code is Listener.wait.__code__:
            return True
        frame = frame.f_back
    return False


def _until(predicate, what: str) -> None:
    deadline = time.monotonic() + HANG_S
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_waiting_consumer_is_woken_by_a_publish_from_another_process(tmp_path):
    path = tmp_path / "broker.sqlite"
    with Connection(_url(path), transport_options={"polling_interval": NEVER_S}) as conn:
        queue = conn.SimpleQueue("compile")
        got: list[str] = []

        def consume() -> None:
            message = queue.get(timeout=NEVER_S)
            got.append(message.payload)
            message.ack()

        consumer = threading.Thread(target=consume, daemon=True)
        consumer.start()
        _until(lambda: _waiting_for_a_wakeup(consumer), "the consumer never waited")
        _publish_from_another_process(path, "hello")
        consumer.join(HANG_S)  # without the wake-up it would wait for its next re-read, an hour away
        assert got == ["hello"], "not delivered: the publish did not wake the waiting consumer"
        queue.close()


def test_an_ack_from_another_thread_frees_the_prefetch_slot_at_once(tmp_path):
    """acks_late with prefetch 1, as a Celery worker runs: the consumer loop waits for the slot the pool's result
    thread frees with its ack, and must take the next message then, not at its next re-read."""
    path = tmp_path / "broker.sqlite"
    stop = threading.Event()

    def busy() -> None:  # a busy worker process: its other threads compete for the GIL
        while not stop.is_set():
            pass

    spinner = threading.Thread(target=busy)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    spinner.start()
    try:
        _consume_with_acks_from_a_thread(path, count=40)
    finally:
        stop.set()
        spinner.join()
        sys.setswitchinterval(switch)


def _consume_with_acks_from_a_thread(path: Path, count: int) -> None:
    with Connection(_url(path), transport_options={"polling_interval": NEVER_S}) as conn:
        producer = conn.SimpleQueue("compile")
        for i in range(count):
            producer.put(i)
        acks: list[threading.Thread] = []

        def run_then_ack(message) -> None:  # the pool's result thread acknowledging a finished task
            time.sleep(0.01)
            message.ack()

        def on_message(body, message) -> None:
            acks.append(threading.Thread(target=run_then_ack, args=(message,)))
            acks[-1].start()

        channel = conn.channel()
        channel.basic_qos(0, 1, False)

        def drain() -> None:
            with conn.Consumer(Queue("compile"), channel=channel, accept=["json"], callbacks=[on_message]):
                while len(acks) < count:  # each delivery waits for the previous message's ack
                    conn.drain_events(timeout=NEVER_S)

        consumer = threading.Thread(target=drain, daemon=True)
        consumer.start()
        consumer.join(HANG_S)  # without the ack's wake-up a delivery would wait for the re-read, an hour away
        assert not consumer.is_alive(), f"{len(acks)} of {count} delivered: the consumer waits for a re-read after an ack"
        for thread in acks:
            thread.join(HANG_S)
        producer.close()
    assert _rows(path) == []


def test_reads_a_broker_file_written_by_kombus_sqlalchemy_transport(tmp_path):
    path = tmp_path / "broker.sqlite"
    with Connection(f"sqla+sqlite:///{path}") as conn:
        conn.SimpleQueue("compile").put({"job": "from-before-the-upgrade"})
    with Connection(_url(path)) as conn:
        message = conn.SimpleQueue("compile").get(timeout=30)
        assert message.payload == {"job": "from-before-the-upgrade"}
        message.ack()
    assert _rows(path) == []


def test_two_consumers_never_take_the_same_message(tmp_path):
    path = tmp_path / "broker.sqlite"
    with Connection(_url(path)) as conn:
        queue = conn.SimpleQueue("compile")
        for i in range(40):
            queue.put(i)
    taken: list[int] = []
    all_taken = threading.Event()    # the consumers stop on the event, not on a quiet spell of the queue

    def consume() -> None:
        with Connection(_url(path)) as conn:
            queue = conn.SimpleQueue("compile")
            while not all_taken.is_set():
                try:
                    message = queue.get(timeout=0.5)
                except queue.Empty:
                    continue
                taken.append(message.payload)
                message.ack()
                if len(taken) >= 40:
                    all_taken.set()

    threads = [threading.Thread(target=consume, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    all_taken.wait(120)
    for thread in threads:
        thread.join(60)
    assert sorted(taken) == list(range(40)) and _rows(path) == [], sorted(taken)


def test_job_store_wait_is_woken_by_a_write_from_another_process(tmp_path):
    from farm.store import SqliteJobStore

    path = tmp_path / "jobs.sqlite"
    store = SqliteJobStore(path, poll_interval=NEVER_S)
    job_id = uuid.uuid4().hex
    store.append_log(job_id, "created\n")
    code = f"from farm.store import SqliteJobStore; SqliteJobStore({str(path)!r}).append_log({job_id!r}, 'more\\n')"

    async def wait_for_the_writer() -> bool:
        async with store.subscribe(job_id) as subscription:  # subscribed before the writer starts: nothing missed
            writer = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
            try:  # without the wake-up the version would be re-read in an hour
                return await asyncio.wait_for(subscription.wait(NEVER_S), HANG_S)
            finally:
                writer.wait(HANG_S)

    assert asyncio.run(wait_for_the_writer()) is True
    assert store.read_log(job_id) == "created\nmore\n"


def test_doorbell_forgets_dead_listeners_and_handles_long_paths(tmp_path):
    short = Doorbell(tmp_path / "bell")
    gone = short.listen()
    gone.sock.close()                                          # its process died without unregistering
    alive = short.listen()
    short.ring(b"job-1")
    assert alive.wait(30.0) == [b"job-1"]
    assert [p.name for p in (tmp_path / "bell").iterdir()] == [Path(alive.registration).name]
    alive.close()
    assert list((tmp_path / "bell").iterdir()) == []

    deep = tmp_path.joinpath(*["d" * 40] * 4, "bell")          # beyond sun_path: an abstract socket + a marker
    bell = Doorbell(deep)
    listener = bell.listen()
    assert Path(listener.registration).name.startswith("@")
    bell.ring(b"x")
    assert listener.wait(30.0) == [b"x"]
    listener.close()


def test_messages_of_a_worker_killed_before_its_acks_are_released(tmp_path):
    """A consumer process SIGKILLed with messages taken: they stay invisible until release_unacknowledged makes
    them visible again, in their place (the supervisor before the next worker, and the service's start-up)."""
    path = tmp_path / "broker.sqlite"
    for body in ("first", "second"):
        _publish_from_another_process(path, body)
    code = (f"import os; from kombu import Connection; from kombu.transport import TRANSPORT_ALIASES; "
            f"TRANSPORT_ALIASES['{sqlite_broker.ALIAS}'] = 'farm.sqlite_broker:Transport'; "
            f"q = Connection({_url(path)!r}).SimpleQueue('compile'); m = q.get(timeout=30); "
            f"print(m.payload, flush=True); os.kill(os.getpid(), 9)")
    taken = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert taken.returncode == -9 and taken.stdout.strip() == "first"
    assert [v for _, v in _rows(path)] == [0, 1]
    assert sqlite_broker.release_unacknowledged(str(path)) == 1
    assert [v for _, v in _rows(path)] == [1, 1]
    with Connection(_url(path)) as conn:
        assert conn.SimpleQueue("compile").get(timeout=30).payload == "first"  # its place kept
