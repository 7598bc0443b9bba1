"""What the worker shows of itself: every Prometheus family, ``/metrics`` ``/healthz``
``/readyz``, JSON logs, levels sampled once a second, and the backlog estimate KEDA scales on.
"""
