"""The layout the embedding strategies cut by: atoms, the level of each gap, grains."""

from __future__ import annotations

import numpy as np

from worker.chunking.semantic.layout import (
    LEVEL_NAMES,
    LIST_ITEM,
    list_items,
    read_atoms,
    read_layout,
)
from worker.chunking.semantic.sizing import count_many
from worker.chunking.text.tokens import CharacterCounter

COUNTER = CharacterCounter()

DOCUMENT = """# Title

Intro sentence one here. Second sentence follows it.

- item one
  continues here
- item two:
  ```
  code in item
  ```
- item three

Usage:

```python
print(1)

print(2)
```

| a | b |
|---|---|
| 1 | 2 |

<details>
<summary>More</summary>

Hidden text.

</details>

---

## Next
Tail.
"""


def _atoms(text: str, min_characters: int = 0) -> list[tuple[str, str]]:
    atoms = read_atoms(text, min_characters)
    return [
        (LEVEL_NAMES[level], text[start:end])
        for start, end, level in zip(atoms.starts, atoms.ends, atoms.levels, strict=True)
    ]


def test_blocks_are_atoms_and_each_gap_has_a_level() -> None:
    assert _atoms(DOCUMENT)[1:] == [
        ("glue", "Intro sentence one here."),  # a heading opens what follows
        ("sentence", "Second sentence follows it."),
        ("block", "- item one\n  continues here"),  # an item with its continuation line
        ("item", "- item two:\n  ```\n  code in item\n  ```"),  # and with its nested fence
        ("item", "- item three"),
        ("block", "Usage:"),
        ("glue", "```python\nprint(1)\n\nprint(2)\n```"),  # introduced by a line ending in ':'
        ("block", "| a | b |\n|---|---|\n| 1 | 2 |"),
        ("block", "<details>\n<summary>More</summary>"),
        ("glue", "Hidden text."),  # inside the tag the block before opened
        ("glue", "</details>"),  # a closing tag stays with what it closes
        ("glue", "---"),  # a thematic break ends what comes before it
        ("section", "## Next"),
        ("glue", "Tail."),
    ]


def test_atoms_cover_the_document_and_keep_exact_offsets() -> None:
    atoms = read_atoms(DOCUMENT)
    position = 0
    for start, end in zip(atoms.starts, atoms.ends, strict=True):
        assert DOCUMENT[position:start].strip() == ""
        assert DOCUMENT[start:end] == DOCUMENT[start:end].strip()
        position = end
    assert DOCUMENT[position:].strip() == ""


def test_short_sentences_join_the_next_one_of_their_paragraph() -> None:
    text = "Hi. Ok. This sentence is long enough to stand alone. Yes.\n\nNo. Next paragraph here."
    assert [a for _, a in _atoms(text, min_characters=10)] == [
        "Hi. Ok. This sentence is long enough to stand alone. Yes.",
        "No. Next paragraph here.",  # never across a paragraph break
    ]


def test_hard_wrapped_prose_is_one_sentence() -> None:
    text = "Replaying a document overwrites rows instead of\nadding new ones. Next one here.\n"
    assert [a for _, a in _atoms(text)] == [
        "Replaying a document overwrites rows instead of\nadding new ones.",
        "Next one here.",
    ]


def test_list_items_keep_lazy_and_nested_lines() -> None:
    text = "1. first\nlazy line\n   - nested\n\n   more of first\n2. second"
    assert [text[a:b] for a, b in list_items(text, 0, len(text))] == [
        "1. first\nlazy line\n   - nested\n\n   more of first",
        "2. second",
    ]


def test_atoms_over_the_grain_limit_become_lines_then_words() -> None:
    code = "```\n" + "\n".join(f"line {n} of code" for n in range(8)) + "\n```"
    text = f"Before the block.\n\n{code}\n\n{'word ' * 30}end."
    layout = read_layout(text, COUNTER, lambda t: count_many(COUNTER, t), grain_limit=40)
    kinds = layout.kinds[layout.grain_atoms]
    assert int((layout.grain_atoms == 1).sum()) == 10  # the code block: one grain per line
    levels = [LEVEL_NAMES[x] for x in layout.grain_levels[layout.grain_atoms == 1]]
    assert levels == ["block"] + ["line"] * 9
    prose = [LEVEL_NAMES[x] for x in layout.grain_levels[layout.grain_atoms == 2]]
    assert prose[0] == "block"
    assert set(prose[1:]) == {"word"}
    assert int(layout.grain_sizes.max()) <= 40
    assert not (kinds == LIST_ITEM).any()
    # Grains tile each atom: the first starts it, the last ends it.
    for atom in range(layout.atom_count):
        mine = np.flatnonzero(layout.grain_atoms == atom)
        assert layout.grain_starts[mine[0]] == layout.starts[atom]
        assert layout.grain_ends[mine[-1]] == layout.ends[atom]
