"""Tests of the repository's shape: import rules, the architecture page, the public API, the
repository's files, and how tests import each other."""
