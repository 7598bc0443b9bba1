"""The exit statuses of ``chunkstream`` (README, "Exit status") and the failures that map to
the ones that are not 1 or 2.

An expected failure prints one ``chunkstream:`` line on stderr, never a traceback:

- 1: the command could not do its job with what it was given (an unreadable input, no model
  built, a missing extra, a topic not found (:class:`TopicNotFound`), lag left, stale schemas);
- 2: a setting, flag, ``--param`` or strategy name is wrong (the message names it);
- 69: Kafka could not be reached or refused the connection (``sysexits.h``'s EX_UNAVAILABLE,
  so a script can tell "the broker is down" from "lag is left", which is 1);
- 130: interrupted (128 + SIGINT);
- 141: stdout was closed early (``… | head``): 128 + SIGPIPE, what a shell reports for any
  other filter stopped that way; nothing is printed.
"""

from __future__ import annotations

import os
import signal

from worker.errors import CommandError

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = getattr(os, "EX_UNAVAILABLE", 69)
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_PIPE_CLOSED = 128 + signal.SIGPIPE


class KafkaUnreachable(CommandError):
    """The brokers could not be reached, or refused the client (TLS, SASL): the message is
    :func:`worker.kafka.clients.diagnose_connection`'s sentence naming the settings to check."""


class TopicNotFound(CommandError):
    """A Kafka command was given a topic the cluster does not have (or does not show this
    client). The commands never create one implicitly, even where the brokers would
    auto-create it: a mistyped name is an error, and ``chunkstream topics`` makes topics as the
    worker needs them."""
