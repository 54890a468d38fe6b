"""The store is the source of truth for what must run; the reconciler makes the broker agree with it.

A queued job waits in its team's FIFO of a queue (farm/store: fair share); a broker message is only a token, "run
the next job of this queue". Tokens can be lost where jobs cannot: acknowledged by a task that never took a job
(killed at its hard limit first), deleted with a dead worker's unacknowledged messages, held by a stopped worker,
never sent (the API died between storing a job and publishing). Each round (every `heartbeat_s`, in every worker's
main process):

- running jobs whose worker is lost are queued again, or failed (workers/leases.py: sweep, LeaseWatch);
- each queue gets a token for every job waiting in it beyond the tokens waiting in the broker, when it was short
  on two rounds in a row (the fewer of the two shortfalls): a token a worker has just been handed has left the
  broker while its job is still in the FIFO until the task takes it, so one round alone would count it as lost
  and send a spare (a token that finds its queue empty does nothing, but it is not a repair);
- a queued job in no FIFO on two rounds in a row (a token's worker took it out and never claimed it) is put back
  in its team's FIFO, with a token.

The one recovery path (README.md, "Who owns queueing"): the embedded service, starting after a run that died, only
hands the dead worker's unacknowledged tokens back (service/embedded.py recover) and leaves its jobs to these rounds.

Idempotent: which attempt runs a job is decided by the store's claim and lease (runner._claim), never by how many
tokens there are. A round that cannot read the store or the broker changes nothing and forgets what it saw (a lease
watched through an outage starts afresh).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from farm.queue import TaskQueue, queue_of
from schemas.jobs import JobRecord
from schemas.logs import log_lines
from workers import leases


@dataclass
class Round:
    """What one round did."""
    lost: list[str] = field(default_factory=list)        # running jobs whose worker was lost: queued again or failed
    tokens: dict[str, int] = field(default_factory=dict)  # queue -> tokens sent for jobs that had none
    requeued: list[str] = field(default_factory=list)    # queued jobs found in no FIFO, put back


class Reconciler:
    """`queue`: farm.queue.TaskQueue (tokens_waiting, send_token, enqueue)."""

    def __init__(self, store, queue: TaskQueue, watch: leases.LeaseWatch):
        self.store, self.queue, self.watch = store, queue, watch
        self._unlisted: set[str] = set()  # queued jobs in no FIFO at the last round
        self._short: dict[str, int] = {}  # queue -> waiting jobs beyond its tokens at the last round

    def run_once(self) -> Round:
        """One round; what it repaired is counted in the store (/metrics: tilefarm_reconcile_*)."""
        try:
            done = self._round()
            for name, amount in (("reconcile_lost_workers", len(done.lost)), ("reconcile_relisted", len(done.requeued)),
                                 ("reconcile_tokens", sum(done.tokens.values())), ("reconcile_rounds", 1)):
                if amount:
                    self.store.incr(name, amount)
            return done
        except Exception:
            self.watch.forget()
            self._unlisted, self._short = set(), {}
            raise

    def requeue(self, job: JobRecord) -> None:
        self.queue.enqueue(self.store, job, queue_of(job))

    def _round(self) -> Round:
        done = Round(lost=leases.sweep(self.store, self.watch, requeue=self.requeue))
        waiting = {job.id: job for job in self.store.active_jobs()
                   if job.status == "queued" and not job.cancel_requested}
        listed: set[str] = set()
        short: dict[str, int] = {}
        for queue in sorted({queue_of(job) for job in waiting.values()}):
            _, fifos = self.store.fair_waiting(queue)
            in_queue = {job_id for ids in fifos.values() for job_id in ids} & waiting.keys()
            listed |= in_queue
            if not in_queue:  # nothing waits here: no need to ask the broker
                continue
            short[queue] = len(in_queue) - self.queue.tokens_waiting(queue)
            missing = min(short[queue], self._short.get(queue, 0))
            for _ in range(missing):
                self.queue.send_token(queue)
            if missing > 0:
                done.tokens[queue] = missing
                short[queue] -= missing
        unlisted = waiting.keys() - listed
        for job_id in sorted(unlisted & self._unlisted):
            job = waiting[job_id]
            self.store.append_log(job_id, log_lines(f"waiting, but listed in no queue (taken by a worker that never "
                                                    f"started it, or never listed): listed again in {queue_of(job)}",
                                                    level="WARN"))
            self.requeue(job)
            done.requeued.append(job_id)
        self._unlisted = unlisted - set(done.requeued)
        self._short = {queue: n for queue, n in short.items() if n > 0}
        return done
