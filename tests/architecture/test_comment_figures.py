"""No measured figure in a comment or docstring under worker/: comments say why, the figures
live in the benchmarks' output and on one docs page (docs/benchmarks.md), where they are made
again when the code changes.

The rule, on every ``#`` comment (tokenize) and every module, class and function docstring (ast) of
worker/, and on every comment of its C sources (the compiled cores' ``/* */`` and ``//``): a
number directly followed by a unit of measurement fails, naming file:line. The units are sizes
(B, KB, MB, GB, KiB, MiB, GiB, bytes), times (ns, µs, us, ms, s, seconds, minutes), rates
(``per second``, ``a second``, ``/s`` as in ``MB/s`` or ``docs/s``), percentages (%) and ratios (a
number with ``×``, or with ``x`` before faster / slower / more / less / the / its). A unit without a
number ("in ms", "bytes per event") is a unit, not a figure, and passes; a value the code holds
belongs in the code (a constant or a setting), and a comment names it instead of repeating it.
Nothing is allowed by a list: a comment that needs a number with a unit says it some other way.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

WORKER = Path(__file__).resolve().parents[2] / "worker"

_NUMBER = r"(?<![\w.])(?<![A-Za-z]-)~?\d[\d,]*(?:\.\d+)?"  # not the 8 of UTF-8
_UNIT = (
    r"(?:[KMGT]i?B|B|bytes?|ns|µs|us|ms|s|secs?|seconds?|minutes?|mins?)(?![\w/])"
    r"|%"
    r"|(?:[KMG]i?B|docs?|documents?|events?|records?|chunks?|texts?|tokens?)/s\b"
    r"|(?:\w+\s+)?(?:per|a)\s+second\b"
    r"|×"
    r"|x\s+(?:faster|slower|more|less|the|its)\b"
)
FIGURE = re.compile(rf"{_NUMBER}\s*(?:{_UNIT})")


def comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every line of every docstring of ``source``."""
    found = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    documented = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, documented) or not node.body:
            continue
        first = node.body[0]
        value = first.value if isinstance(first, ast.Expr) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            lines = value.value.splitlines()
            found += [(first.lineno + i, line) for i, line in enumerate(lines)]
    return found


def figures(source: str) -> list[tuple[int, str]]:
    """(line, the figure) of each number with a unit in ``source``'s comments and docstrings."""
    found = [
        (line, match.group(0))
        for line, text in comments_and_docstrings(source)
        for match in FIGURE.finditer(text)
    ]
    return sorted(found, key=lambda figure: figure[0])


_C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_C_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')


def c_comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of every line of every comment of the C ``source`` (string literals,
    which may hold ``//``, left out)."""
    blanked = _C_STRING.sub(lambda m: '"' + " " * (len(m.group(0)) - 2) + '"', source)
    found = []
    for match in _C_COMMENT.finditer(blanked):
        first = blanked.count("\n", 0, match.start()) + 1
        found += [(first + i, line) for i, line in enumerate(match.group(0).splitlines())]
    return found


def c_figures(source: str) -> list[tuple[int, str]]:
    """(line, the figure) of each number with a unit in the C ``source``'s comments."""
    return [
        (line, match.group(0))
        for line, text in c_comments(source)
        for match in FIGURE.finditer(text)
    ]


def test_no_comment_or_docstring_under_worker_carries_a_figure() -> None:
    sources = sorted(WORKER.rglob("*.py"))
    c_sources = sorted([*WORKER.rglob("*.c"), *WORKER.rglob("*.h")])
    assert c_sources, "the compiled cores' sources are read too"
    found = [
        f"{path.relative_to(WORKER.parent)}:{line}: {figure!r}"
        for path in sources
        for line, figure in figures(path.read_text(encoding="utf-8"))
    ] + [
        f"{path.relative_to(WORKER.parent)}:{line}: {figure!r}"
        for path in c_sources
        for line, figure in c_figures(path.read_text(encoding="utf-8"))
    ]
    assert found == [], (
        "measured figures in comments or docstrings (say why, and point at the benchmark, "
        "e.g. bench/e2e_bench.py or docs/benchmarks.md):\n" + "\n".join(found)
    )


def test_the_rule_finds_figures_and_passes_units() -> None:
    source = '''
"""A module.

It read 281 MB for 40 MB of input, ~460 KB/s, in 250 ms.
"""
x = 1  # 7-9 % of the loop's CPU; 2.5-4x slower; 60–100× the speed
y = 2  # 1,200 docs/s, 30 docs per second, ~2,000 lines a second, 0.5 s, 16 KiB
z = 3  # a timeout in ms, bytes per event, int8, sha256, a UTF-8 byte, 96 tokens


def f() -> None:
    """Waits timeout_s seconds at most."""
'''
    assert figures(source) == [
        (4, "281 MB"),
        (4, "40 MB"),
        (4, "~460 KB/s"),
        (4, "250 ms"),
        (6, "9 %"),
        (6, "4x slower"),
        (6, "100×"),
        (7, "1,200 docs/s"),
        (7, "30 docs per second"),
        (7, "~2,000 lines a second"),
        (7, "0.5 s"),
        (7, "16 KiB"),
    ]


def test_the_rule_reads_c_comments_and_not_c_strings() -> None:
    source = """
/* A table grown at 70 %
 * load (8 µs a lookup). */
static const char *note = "one // 5 ms in a string is code, not a comment";
int x = 1; // 100 MB kept
"""
    assert c_figures(source) == [(2, "70 %"), (3, "8 µs"), (5, "100 MB")]
