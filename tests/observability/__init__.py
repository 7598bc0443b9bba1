"""Tests of worker.observability: metrics, health, logs and the backlog estimate."""
