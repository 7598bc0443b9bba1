"""Generated markdown for the structure properties, and an oracle for what a chunking can keep.

The documents mix what the structure rules are about: headings, paragraphs (some hard-wrapped,
some introducing what follows with a ``:``), fenced code blocks, lists whose items have
continuation lines and nested items, and tables, at sizes on both sides of a small cap.

:func:`keepable` decides, by exhaustive search over the gaps between atoms, whether *some*
chunking keeps every rule: every chunk within ``[minimum, cap]``, no atom cut, no chunk made
of headings alone, none ending with a heading before the document ends. It knows nothing of
how the strategies choose; when it says yes, a strategy must find such a chunking.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from worker.chunking.semantic.layout import HEADING, read_atoms

WORDS = [
    "chef",
    "simmers",
    "onions",
    "garlic",
    "butter",
    "sauce",
    "telescope",
    "observes",
    "galaxies",
    "stars",
    "planets",
    "orbit",
    "bank",
    "lends",
    "money",
    "interest",
    "loans",
    "credit",
    "sailor",
    "trims",
    "sails",
    "wind",
    "boat",
    "harbour",
]

words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=10)
sentence = st.builds(
    lambda w, end: " ".join(w).capitalize() + end, words, st.sampled_from([".", "!", "?"])
)


def _wrap(text: str, width: int) -> str:
    """Hard-wrapped at ``width`` columns (at spaces)."""
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])


paragraph = st.builds(
    lambda parts, width: _wrap(" ".join(parts), width) if width else " ".join(parts),
    st.lists(sentence, min_size=1, max_size=5),
    st.sampled_from([0, 0, 30, 50]),
)
heading = st.builds(
    lambda level, w: "#" * level + " " + " ".join(w).title(), st.integers(1, 3), words
)
code_line = st.builds(
    lambda indent, w: "    " * indent + "_".join(w) + "()", st.integers(0, 2), words
)
code = st.builds(
    lambda lang, lines: f"```{lang}\n" + "\n".join(lines) + "\n```",
    st.sampled_from(["", "python"]),
    st.lists(code_line, min_size=1, max_size=14),
)
item = st.builds(
    lambda first, more, nested: (
        "- " + first + "".join(f"\n  {m}" for m in more) + "".join(f"\n  - {n}" for n in nested)
    ),
    sentence,
    st.lists(sentence, max_size=2),
    st.lists(sentence, max_size=2),
)
bullets = st.lists(item, min_size=1, max_size=5).map("\n".join)
table = st.builds(
    lambda rows: "| a | b |\n|---|---|\n" + "\n".join(f"| {x} | {y} |" for x, y in rows),
    st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS)), min_size=1, max_size=8),
)
introduced = st.builds(
    lambda s, block: s[:-1] + ":\n\n" + block, sentence, st.one_of(code, bullets)
)
block = st.one_of(heading, paragraph, paragraph, code, bullets, table, introduced)
documents = st.lists(block, min_size=1, max_size=14).map("\n\n".join)

Sizes = Callable[[str], int]


def keepable(
    text: str, sizes: Sizes, cap: int, minimum: int, characters: bool, min_characters: int = 24
) -> bool:
    """Whether a chunking of ``text`` at gaps between atoms keeps every rule (module
    docstring). ``sizes`` measures a text; with ``characters`` a chunk's size is its length
    (whitespace between atoms included), else the sum of its atoms' sizes. Atoms are the
    strategies' own (sentences shorter than ``min_characters`` joined to the next, their
    default)."""
    atoms = read_atoms(text, min_characters)
    starts, ends, kinds = atoms.starts, atoms.ends, atoms.kinds
    count = len(starts)
    if not count:
        return True
    own = [sizes(text[a:b]) for a, b in zip(starts, ends, strict=True)]

    def size(first: int, stop: int) -> int:
        if characters:
            return ends[stop - 1] - starts[first]
        return sum(own[first:stop])

    if size(0, count) <= cap:
        return True  # one chunk, the whole document
    reachable = [False] * (count + 1)
    reachable[0] = True
    for stop in range(1, count + 1):
        if stop < count and kinds[stop - 1] == HEADING:
            continue  # a chunk never ends with a heading
        for first in range(stop - 1, -1, -1):
            piece = size(first, stop)
            if piece > cap:
                break
            if (
                reachable[first]
                and piece >= minimum
                and not all(k == HEADING for k in kinds[first:stop])
            ):
                reachable[stop] = True
                break
    return reachable[count]
