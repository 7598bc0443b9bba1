"""The cluster rules (worker/chunking/text/graphemes.py) against an oracle nobody here wrote:
the ``regex`` package's ``\\X`` (UAX #29 extended grapheme clusters, on its own Unicode data).

Two promises: every place ``is_boundary`` calls a boundary is one (never a cut inside a
cluster, on any text), and on text made of ordinary clusters it finds them all (it is
conservative only where Python's Unicode database cannot tell: after a virama, beside an
unassigned code point)."""

from __future__ import annotations

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.clusters import CLUSTERS, INGREDIENTS
from worker.chunking.text.graphemes import ceil_boundary, floor_boundary, is_boundary


def oracle(text: str) -> set[int]:
    """The cluster boundaries of ``text`` by ``\\X``: 0, then the end of each cluster."""
    return {0} | {m.end() for m in regex.finditer(r"\X", text)}


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(st.sampled_from(INGREDIENTS) | st.characters(exclude_categories=["Cs"]), max_size=14)
)
def test_a_boundary_it_names_is_one(parts: list[str]) -> None:
    text = "".join(parts)
    truth = oracle(text)
    named = {at for at in range(len(text) + 1) if is_boundary(text, at)}
    assert named <= truth, [(at, [hex(ord(c)) for c in text]) for at in sorted(named - truth)]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(CLUSTERS), min_size=1, max_size=12))
def test_between_ordinary_clusters_it_finds_every_boundary(clusters: list[str]) -> None:
    text = "".join(clusters)
    named = {at for at in range(len(text) + 1) if is_boundary(text, at)}
    assert named == oracle(text)


def test_the_clusters_the_issue_names_stay_whole() -> None:
    cases = {
        "e\u0301": "a letter and its combining mark",
        "\U0001f468\u200d\U0001f469\u200d\U0001f467": "an emoji ZWJ sequence",
        "\U0001f44d\U0001f3fd": "an emoji and its skin-tone modifier",
        "\U0001f1e9\U0001f1ea": "a flag",
        "\u1112\u1161\u11ab": "a Hangul syllable in jamo",
        "\r\n": "CR LF",
        "\u0915\u094d\u0937": "an Indic conjunct",
    }
    for cluster, what in cases.items():
        assert len(oracle(cluster)) == 2, what  # one cluster by the oracle
        assert not any(is_boundary(cluster, at) for at in range(1, len(cluster))), what


def test_flags_pair_from_the_start_of_their_run() -> None:
    flags = "\U0001f1e9\U0001f1ea\U0001f1eb\U0001f1f7\U0001f1ee"  # DE, FR, then a lone one
    assert [at for at in range(1, len(flags)) if is_boundary(flags, at)] == [2, 4]


def test_floor_and_ceil_move_to_the_nearest_boundary() -> None:
    text = "ab" + "e\u0301\u0302" + "cd"
    assert floor_boundary(text, 4, 0) == 2
    assert floor_boundary(text, 4, 2) is None  # the cluster starts at the lower bound
    assert ceil_boundary(text, 3, len(text)) == 5
    assert ceil_boundary(text, 3, 4) == 4  # no boundary before the upper bound
