"""Tests of worker.handling: one record through the document handler."""
