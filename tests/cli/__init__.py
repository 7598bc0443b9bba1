"""Tests of worker.cli: the commands as a user runs them."""
