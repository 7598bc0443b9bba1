"""Tests of worker.runtime: budgets, memory, GC and loop lag."""
