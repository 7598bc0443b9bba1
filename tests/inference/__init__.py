"""Tests of worker.inference: the batch policy, the batcher and serving."""
