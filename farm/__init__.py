"""What the API (service/) and the workers (workers/) share: settings, the job and artifact stores, the broker
(Celery app, the embedded SQLite transport), publishing jobs, wake-ups and worker readiness. Neither package
imports the other; both import this one."""
