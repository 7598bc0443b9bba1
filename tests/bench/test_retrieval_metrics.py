"""The retrieval benchmark's metrics and its dataset loader, on cases worked out by hand.

Nothing here downloads anything: the loader is fed records written below in the format of the
pinned file (one JSON object per line: ``passage``, ``question``, ``answer``), with text made up
for the test.
"""

from __future__ import annotations

import json

import pytest

from bench.support import qa_dataset
from bench.support.retrieval_metrics import Located, budget_recall, merge, score, within_budget


def chunk(doc: str, *ranges: tuple[int, int]) -> Located:
    return Located(doc, tuple(ranges))


# --- metrics ---------------------------------------------------------------------------------


def test_answer_inside_one_retrieved_chunk_has_full_recall() -> None:
    s = score([chunk("d", (0, 100))], "d", (10, 30))
    assert s.recall == 1.0
    assert s.precision == pytest.approx(20 / 100)
    assert s.iou == pytest.approx(20 / 100)


def test_disjoint_chunk_scores_zero() -> None:
    s = score([chunk("d", (0, 10))], "d", (10, 20))  # half-open: touching is not overlapping
    assert (s.recall, s.precision, s.iou) == (0.0, 0.0, 0.0)


def test_chunk_of_another_document_is_noise_even_at_the_same_offsets() -> None:
    s = score([chunk("other", (0, 100))], "d", (10, 30))
    assert (s.recall, s.precision, s.iou) == (0.0, 0.0, 0.0)
    mixed = score([chunk("d", (10, 30)), chunk("other", (10, 30))], "d", (10, 30))
    assert mixed.recall == 1.0
    assert mixed.precision == pytest.approx(0.5)  # 20 of 40 retrieved characters
    assert mixed.iou == pytest.approx(0.5)  # 20 / (40 + 20 - 20)


def test_partial_overlap_known_values() -> None:
    # reference 40..60 (20 chars); chunk 50..80 (30 chars); overlap 50..60 (10 chars)
    s = score([chunk("d", (50, 80))], "d", (40, 60))
    assert s.recall == pytest.approx(10 / 20)
    assert s.precision == pytest.approx(10 / 30)
    assert s.iou == pytest.approx(10 / 40)  # union 40..80


def test_overlapping_chunks_count_each_character_once() -> None:
    # two retrieved chunks 0..60 and 40..100 cover 0..100: 100 characters, not 120
    s = score([chunk("d", (0, 60)), chunk("d", (40, 100))], "d", (50, 70))
    assert s.recall == 1.0
    assert s.precision == pytest.approx(20 / 100)


def test_non_contiguous_chunk_counts_only_its_pieces() -> None:
    # pieces 0..10 and 50..60; the reference 5..55 meets 5 + 5 of them
    s = score([chunk("d", (0, 10), (50, 60))], "d", (5, 55))
    assert s.recall == pytest.approx(10 / 50)
    assert s.precision == pytest.approx(10 / 20)
    assert s.iou == pytest.approx(10 / 60)  # union 0..60


def test_merge_joins_overlapping_and_touching_ranges() -> None:
    assert merge([(5, 8), (0, 3), (3, 4), (7, 12), (20, 20)]) == [(0, 4), (5, 12)]


def test_budget_keeps_whole_chunks_then_cuts_the_last() -> None:
    ranked = [chunk("d", (0, 1500)), chunk("d", (3000, 4000)), chunk("d", (5000, 5100))]
    kept = within_budget(ranked, 2000)
    assert kept == [chunk("d", (0, 1500)), chunk("d", (3000, 3500))]


def test_budget_recall_counts_only_what_fits() -> None:
    ranked = [chunk("d", (0, 1500)), chunk("d", (3000, 4000))]
    # the answer 3400..3600: the second chunk is cut at 3500, so half of the answer is read
    assert budget_recall(ranked, "d", (3400, 3600), 2000) == pytest.approx(0.5)
    assert budget_recall(ranked, "d", (3400, 3600), 2600) == 1.0
    assert budget_recall(ranked, "d", (3400, 3600), 1500) == 0.0


def test_budget_counts_overlapping_chunks_again() -> None:
    # a reader is handed both copies of 500..1000: they use up 1,000 of the budget
    ranked = [chunk("d", (0, 1000)), chunk("d", (500, 1500)), chunk("d", (2000, 2100))]
    assert within_budget(ranked, 2000) == ranked[:2]


# --- dataset loader --------------------------------------------------------------------------

SECTION_A = (
    "Marla Quint built her first loom in 1931. She sold blankets at the river market. "
    "In 1936 she opened a workshop with eight weavers."
)
SECTION_B = "The ferry crossed twice a day. Its captain kept a log of every storm."


def record(passage: str, questions: list[str], answers: list[str]) -> str:
    asked = "\n".join(f"question{n}: {q}" for n, q in enumerate(questions, 1))
    answered = "\n".join(
        f"possible answers for question{n}:\n{a}" for n, a in enumerate(answers, 1)
    )
    return json.dumps({"passage": passage, "question": asked, "answer": answered})


def test_split_answers_separates_the_joined_annotator_spans() -> None:
    joined = "built her first loom in 1931. her first loom She sold blankets"
    assert qa_dataset.split_answers(joined, SECTION_A) == [
        "built her first loom in 1931.",
        "her first loom",
        "She sold blankets",
    ]
    assert qa_dataset.split_answers("CANNOTANSWER CANNOTANSWER", SECTION_A) == [
        "CANNOTANSWER",
        "CANNOTANSWER",
    ]


def test_split_answers_refuses_text_that_is_not_in_the_section() -> None:
    with pytest.raises(qa_dataset.DatasetError):
        qa_dataset.split_answers("a bicycle", SECTION_A)


def test_record_references_point_at_their_text() -> None:
    line = record(
        SECTION_A,
        ["When was the loom built?", "Was she married?", "What did she open?"],
        [
            "in 1931. in 1931.",
            "CANNOTANSWER CANNOTANSWER",
            "In 1936 she opened a workshop a workshop with eight weavers.",
        ],
    )
    section = qa_dataset.parse_record(line, 7)
    assert [q.qid for q in section.questions] == ["r0007q1", "r0007q3"]  # q2 has no answer
    first, third = section.questions
    assert [r.text for r in first.references] == ["in 1931."]  # duplicates kept once
    assert first.references[0].start == SECTION_A.index("in 1931.")
    assert [r.text for r in third.references] == [
        "In 1936 she opened a workshop",
        "a workshop with eight weavers.",
    ]
    for ref in first.references + third.references:
        assert SECTION_A[ref.start : ref.end] == ref.text


def test_packed_documents_shift_references_into_the_document() -> None:
    lines = [
        record(SECTION_A, ["What did she sell?"], ["blankets"]),
        record(SECTION_B, ["Who kept a log?"], ["Its captain"]),
    ]
    sections = [qa_dataset.parse_record(line, n) for n, line in enumerate(lines)]
    # a target larger than both sections: one document holds both, in sha256 order
    (doc,) = qa_dataset.pack(sections, "tune", target_chars=10_000)
    ordered = sorted([SECTION_A, SECTION_B], key=qa_dataset.section_hash)
    assert doc.text == ordered[0] + "\n\n" + ordered[1]
    assert len(doc.questions) == 2
    for question in doc.questions:
        (ref,) = question.references
        assert doc.text[ref.start : ref.end] == ref.text
    qa_dataset.check([doc])
    # a target smaller than a section: one document per section
    assert len(qa_dataset.pack(sections, "tune", target_chars=10)) == 2


def test_check_catches_a_reference_off_its_text() -> None:
    bad = qa_dataset.QADocument(
        "x",
        "abcdef",
        (qa_dataset.Question("q", "?", (qa_dataset.Reference(1, 3, "cd"),)),),
    )
    with pytest.raises(qa_dataset.DatasetError):
        qa_dataset.check([bad])


def test_split_rule_is_the_parity_of_the_section_hash() -> None:
    for text in (SECTION_A, SECTION_B, "x", "y", "z"):
        even = int(qa_dataset.section_hash(text)[:8], 16) % 2 == 0
        assert qa_dataset.split_of(text) == ("tune" if even else "report")
    lines = [record(t, ["?"], [t.split(".")[0]]) for t in (SECTION_A, SECTION_B)]
    tune = qa_dataset.documents_from_lines(lines, "tune")
    report = qa_dataset.documents_from_lines(lines, "report")
    tune_text = "".join(d.text for d in tune)
    report_text = "".join(d.text for d in report)
    for text in (SECTION_A, SECTION_B):
        assert (text in tune_text) != (text in report_text)  # each section in exactly one


# --- ranking and chunker plumbing ------------------------------------------------------------


def test_top_k_orders_by_cosine_best_first() -> None:
    import numpy as np

    from bench.support.retrieval_metrics import top_k

    chunks = np.array([[1, 0], [0, 1], [0.6, 0.8], [0.8, 0.6]], dtype=np.float32)
    questions = np.array([[1, 0], [0, 1]], dtype=np.float32)
    assert top_k(questions, chunks, 3).tolist() == [[0, 3, 2], [1, 2, 3]]
    assert top_k(questions, chunks, 10).shape == (2, 4)  # never more than there are


def test_locate_finds_repeated_chunk_texts_in_order() -> None:
    from bench.support.retrieval_chunkers import locate

    pieces = locate(["ab", "ab", "c"], "ab ab c")
    assert [p.ranges for p in pieces] == [((0, 2),), ((3, 5),), ((6, 7),)]


def test_param_overrides_change_the_named_default_row_only() -> None:
    from bench.support.retrieval_chunkers import chunker_specs

    specs = chunker_specs(["sentence", "langchain:chunk_size=400"], ["sentence:chunk_size=500"])
    assert specs == ["sentence:chunk_size=500", "langchain:chunk_size=400"]
    with pytest.raises(SystemExit):
        chunker_specs(["sentence"], ["sdpm:skip_window=1"])


def test_turn_of_reads_the_question_number() -> None:
    line = record(SECTION_A, ["What did she sell?", "When?"], ["blankets", "in 1931."])
    questions = qa_dataset.parse_record(line, 12).questions
    assert [qa_dataset.turn_of(q) for q in questions] == [1, 2]
