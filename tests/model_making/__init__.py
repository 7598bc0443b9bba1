"""Tests of worker.model_making: building, distilling and identifying models offline."""
