"""The Celery app: Redis broker in distributed mode, a SQLite file (farm/sqlite_broker.py) in embedded mode.

Importing this module is cheap (no compiler, no tvm): the API imports it to send tasks by name.
"""
from __future__ import annotations

from celery import Celery
from kombu import Queue

from farm.queue import COMPILE_QUEUE, RUN_NEXT, queue_names
from farm.settings import get_settings

settings = get_settings()
if settings.embedded:
    from kombu.transport import TRANSPORT_ALIASES

    from farm import sqlite_broker

    # embedded broker: our SQLite transport (plain sqlite3, consumers woken by publishes instead of polling)
    TRANSPORT_ALIASES[sqlite_broker.ALIAS] = "farm.sqlite_broker:Transport"
    settings.data_dir.mkdir(parents=True, exist_ok=True)

app = Celery("tilefarm", broker=settings.effective_broker_url, backend=settings.effective_result_backend,
             include=["workers.tasks"])
app.conf.update(
    task_queues=[Queue(name) for name in queue_names()],
    task_default_queue=COMPILE_QUEUE,
    task_routes={RUN_NEXT: {"queue": COMPILE_QUEUE}},
    # tokens name their queue when sent (farm/queue.py: hardware tokens go to their arch's queue)
    task_serializer="json", accept_content=["json"], result_serializer="json",
    task_ignore_result=True,                 # job state lives in the job store, not in Celery results
    task_acks_late=True,                     # ack after the job ran: a worker lost mid-job leaves it in the queue
    task_reject_on_worker_lost=True,         # ... and a killed pool process requeues it at once:
    # the pool waits worker_lost_wait for a result a dying process may have sent before it raises WorkerLostError;
    # results are ignored and a redelivered token finds its job ended (runner._claim), so 1 s, not Celery's 10 s
    worker_lost_wait=1.0,
    worker_prefetch_multiplier=1,            # jobs are long; don't hoard them on one worker
    # the hard limit kills a pool process stuck past every stage's own limit (JobRequest.on_timeout records it); no
    # soft limit: it is an exception raised from a signal handler into whatever runs (the stages stop themselves,
    # workers/stopping.py)
    task_time_limit=settings.task_hard_limit_s,
    # a broker restart is survived: reconnect for ever, with Celery's back-off (2, 4, 6... up to 32 s apart); tasks
    # running meanwhile go on (they are idempotent: a message redelivered later finds its job ended); a job whose
    # task died with the connection is run again when its lease runs out (workers/leases.py)
    broker_connection_retry_on_startup=True,
    broker_connection_retry=True,
    broker_connection_max_retries=None,
    worker_cancel_long_running_tasks_on_connection_loss=False,
    # ... and a broker that answers "not now" (Redis out of memory or read-only: kombu's channel errors) too: the
    # consumer reconnects instead of the worker dying ('Unrecoverable error: OutOfMemoryError' when it took a token
    # it could not note as unacknowledged); a token lost so is sent again by the reconciler (workers/reconcile.py)
    broker_channel_error_retry=True,
    # a pool process warms up (imports, sandbox zygote, emulator runtime) before it says it is up and takes a task,
    # so no task's time limit runs during a warm-up; the pool must not kill it meanwhile (its default is 4 s)
    worker_proc_alive_timeout=settings.warm_up_limit_s + 60,
    worker_hijack_root_logger=False,
    worker_send_task_events=False,
    broker_transport_options={"polling_interval": settings.embedded_poll_s} if settings.embedded
    else {"visibility_timeout": settings.visibility_timeout_s, "socket_connect_timeout": 5, "socket_timeout": 30,
          "socket_keepalive": True, "health_check_interval": 10},
    result_backend_transport_options={"visibility_timeout": settings.visibility_timeout_s},
)
# ... and the worker takes no token before its pool is warm (workers/tasks.py: WarmPoolFirst)
app.steps["worker"].add("workers.tasks:WarmPoolFirst")
