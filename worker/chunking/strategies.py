"""Imports every built-in strategy module so that each registers itself with the registry."""
