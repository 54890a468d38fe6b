"""/metrics: a Prometheus collector that reads the job store, so API and worker processes on any host agree."""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from farm.queue import queue_names
from farm.store import STAGE_BUCKETS, JobStore


class StoreCollector(Collector):
    def __init__(self, store: JobStore):
        self.store = store

    def collect(self):
        snapshot = self.store.metrics()
        jobs = GaugeMetricFamily("tilefarm_jobs", "Jobs by state", labels=["state"])
        for state, count in sorted(snapshot["status"].items()):
            jobs.add_metric([state], count)
        yield jobs

        depth = GaugeMetricFamily("tilefarm_queue_depth", "Jobs waiting in a queue (the job store's per-team FIFOs)",
                                  labels=["queue"])
        for name in queue_names():
            depth.add_metric([name], self.store.fair_depth(name))
        yield depth

        counters = snapshot["counters"]
        hits = CounterMetricFamily("tilefarm_cache_hits", "Jobs served from the artifact cache")
        hits.add_metric([], counters.get("cache_hits", 0))
        yield hits
        misses = CounterMetricFamily("tilefarm_cache_misses", "Jobs that had to compile")
        misses.add_metric([], counters.get("cache_misses", 0))
        yield misses

        rounds = CounterMetricFamily("tilefarm_reconcile_rounds", "Rounds of the workers' reconcilers (every "
                                     "heartbeat, in each worker): the broker made to agree with the job store")
        rounds.add_metric([], counters.get("reconcile_rounds", 0))
        yield rounds
        repairs = CounterMetricFamily("tilefarm_reconcile_repairs", "What the reconcilers repaired: a token sent for a "
                                      "waiting job that had none, a job listed again in its queue, a running job "
                                      "whose worker was lost", labels=["kind"])
        for kind, name in (("token", "reconcile_tokens"), ("relisted", "reconcile_relisted"),
                           ("lost_worker", "reconcile_lost_workers")):
            repairs.add_metric([kind], counters.get(name, 0))
        yield repairs

        durations = HistogramMetricFamily("tilefarm_stage_duration_seconds", "Stage wall time", labels=["stage"])
        for stage, data in sorted(snapshot["stages"].items()):
            cumulative, buckets = 0, []
            for bound in [repr(float(b)) for b in STAGE_BUCKETS] + ["+Inf"]:
                cumulative += data["buckets"].get(bound, 0)
                buckets.append((bound, cumulative))
            durations.add_metric([stage], buckets, data["sum"])
        yield durations
