"""A generated long markdown document: paragraphs on changing topics, headings between them.

Deterministic for a seed. Topics change every few paragraphs so embedding strategies find real
boundaries; sentence lengths vary (4 to 40 words) so batches of different token lengths form.
"""

from __future__ import annotations

import random

TOPICS = {
    "kafka": "broker partition offset consumer producer replica leader commit log segment "
    "retention rebalance heartbeat group topic record batch acknowledgement",
    "cooking": "onion garlic butter simmer sauce pepper oven roast flour dough bake knead "
    "salt lemon herb basil tomato broth skillet",
    "astronomy": "galaxy nebula telescope orbit planet comet asteroid redshift supernova "
    "quasar spectrum parallax eclipse moon crater gravity",
    "gardening": "soil compost seedling prune mulch root leaf blossom harvest trellis "
    "watering shade perennial bulb weed fertiliser",
    "finance": "interest bond equity dividend ledger invoice budget audit liquidity "
    "portfolio hedge yield inflation credit balance",
}
GLUE = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "with",
    "for",
    "on",
    "as",
    "by",
    "it",
    "this",
    "from",
    "at",
    "which",
]


def long_markdown(size: int, seed: int = 13) -> str:
    """About ``size`` characters of markdown (never less)."""
    rng = random.Random(seed)
    names = sorted(TOPICS)
    parts: list[str] = []
    length = 0
    while length < size:
        topic = rng.choice(names)
        words = TOPICS[topic].split()
        heading = f"## {topic.title()} notes {len(parts)}\n\n"
        parts.append(heading)
        length += len(heading)
        for _ in range(rng.randint(2, 5)):
            sentences = []
            for _ in range(rng.randint(2, 7)):
                count = rng.choice((4, 9, 14, 20, 28, 40))
                pool = [words if rng.random() < 0.6 else GLUE for _ in range(count)]
                body = " ".join(rng.choice(choices) for choices in pool)
                sentences.append(body[0].upper() + body[1:] + rng.choice((".", ".", "!", "?")))
            paragraph = " ".join(sentences) + "\n\n"
            parts.append(paragraph)
            length += len(paragraph)
    return "".join(parts)
