def test_hard_wrapped_prose_is_rejoined_but_structure_is_not() -> None:
    from worker.chunking.semantic.units import join_soft_wraps
    from worker.chunking.text.segment import split_sentences

    text = (
        "Replaying a document overwrites rows instead of\n"
        "adding new ones. Next.\n\n"
        "after a blank line.\n"
        "- a list item\n"
        "Ends with a colon:\n"
        "continues below"
    )
    pieces = [text[s.start : s.end] for s in join_soft_wraps(text, split_sentences(text))]
    assert pieces == [
        "Replaying a document overwrites rows instead of\nadding new ones.",
        "Next.",
        "after a blank line.",
        "- a list item",
        "Ends with a colon:",
        "continues below",
    ]
