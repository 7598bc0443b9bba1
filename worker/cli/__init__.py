"""`chunkstream`: run the worker, chunk files offline, produce and tail topics, build models,
emit schemas.

The commands live by job: :mod:`worker.cli.chunking` (``chunk``, ``settings``, ``schema``),
:mod:`worker.cli.kafka_tools` (``run``, ``produce``, ``tail``, ``lag``, ``topics``) and
:mod:`worker.cli.models` (``model build``, ``model distill``, ``embed``). Each registers its
parsers with ``add_commands``; this module builds the parser and turns every expected failure
into one ``chunkstream:`` line and the exit status of :mod:`worker.cli.status` (README,
"Exit status").

Closed stdout (``chunkstream chunk FILE | head -1``): the ``BrokenPipeError`` of a write to
stdout is caught here, stdout is pointed at /dev/null so the interpreter's last flush cannot
fail again, and the status is 141 (128 + SIGPIPE), with nothing on stderr. SIGPIPE is *not*
reset to its default action, which would end the process quietly too: the commands also hold
Kafka sockets, and a peer closing one of those must be an error the client handles, not a
silent death (Python's signal documentation gives the same advice).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, cast

from worker._version import __version__
from worker.chunking.contract import StrategyError
from worker.cli import chunking, kafka_tools, lifecycle_tools, models
from worker.cli.status import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PIPE_CLOSED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    KafkaUnreachable,
)
from worker.errors import CommandError, ConfigError

__all__ = ["build_parser", "main"]


class Parser(argparse.ArgumentParser):
    """argparse with its usage errors as one ``chunkstream:`` line (status 2, as argparse's
    own), pointing at ``--help`` instead of printing the usage block. Subcommand parsers are
    made of the same class (``add_subparsers`` uses the parent's type)."""

    def __init__(self, *args: Any, lazy_epilog: Callable[[], str] | None = None, **kw: Any):
        super().__init__(*args, **kw)
        # Computed when the help is shown, not when the parser is built: `chunk --help` lists
        # every strategy from the registry, which the other commands (`model build` in the
        # image's model stage, for one) should not have to import.
        self._lazy_epilog = lazy_epilog

    def format_help(self) -> str:
        if self._lazy_epilog is not None:
            self.epilog = self._lazy_epilog()
            self._lazy_epilog = None
        return super().format_help()

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("chunkstream").strip()
        where = f"{command}: " if command else ""
        self.exit(
            EXIT_USAGE,
            f"chunkstream: {where}{message} (see `{self.prog} --help`)\n",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="chunkstream", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"chunkstream {__version__}")
    # Typed as plain ArgumentParser subparsers for the command modules (they are Parsers).
    sub = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", required=True),
    )
    kafka_tools.add_commands(sub)
    lifecycle_tools.add_commands(sub)
    chunking.add_commands(sub)
    models.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command != "run":  # `run` logs them as JSON lines (kafka_tools.run_worker)
        warn_unknown_variables()
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # inside the try: a closed pipe is reported here, not at exit
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE_CLOSED
    except (ConfigError, StrategyError) as exc:
        return _fail(exc, EXIT_USAGE)
    except KafkaUnreachable as exc:
        return _fail(exc, EXIT_UNAVAILABLE)
    except CommandError as exc:
        return _fail(exc, EXIT_FAILED)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return code


def warn_unknown_variables() -> None:
    """One ``chunkstream: warning:`` line per ``CHUNKSTREAM_*`` variable that is no setting of
    ours: a misspelt setting would otherwise be ignored without a word."""
    from worker.config import unknown_variables

    for warning in unknown_variables(os.environ):
        print(f"chunkstream: warning: {warning}", file=sys.stderr)


def _fail(exc: Exception, status: int) -> int:
    print(f"chunkstream: {exc}", file=sys.stderr)
    return status


def _silence_stdout() -> None:
    """Whatever is still buffered for stdout goes nowhere (the reader has gone)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
