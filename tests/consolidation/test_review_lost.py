"""Lost content: what no longer exists verbatim anywhere in the store after a pass."""

from __future__ import annotations

import pytest

from consolidation.review import (
    OperationLoss,
    OperationText,
    SentenceIndex,
    SourceText,
    loss_totals,
    lost_segments,
    operation_loss,
    pass_losses,
    source_segments,
)
from consolidation.review.lost import sentences
from consolidation.text import split_sentences


def op(
    kind: str,
    sources: list[tuple[str, bool]],
    result: str | None = None,
    rule: str = "",
    prefix: str = "m",
) -> OperationText:
    return OperationText(
        kind,
        tuple(SourceText(f"{prefix}{i}", d, r) for i, (d, r) in enumerate(sources)),
        result,
        rule,
    )


@pytest.mark.parametrize(
    ("operation", "lost_texts", "lost_words"),
    [
        # exact duplicate: the merged text is one of the sources -> nothing lost
        (
            op(
                "merge",
                [("Alice likes jazz.", True), ("alice likes JAZZ", True)],
                "Alice likes jazz.",
                "exact_duplicate",
            ),
            [],
            [],
        ),
        # a window keeps a repeated sentence once: the dropped copy is not lost
        (
            op(
                "merge",
                [
                    ("Jon: I lost my job. It hurts.", True),
                    ("Gina: Oh no!", True),
                    ("Jon: I lost my job.", True),
                ],
                "Jon: I lost my job. It hurts.\nGina: Oh no!",
                "session_window",
            ),
            [],
            [],
        ),
        # a merge that drops a differing number: the number is lost
        (
            op(
                "merge",
                [("The deadline is June 3.", True), ("The deadline is June 5.", True)],
                "The deadline is June 3.",
                "near_duplicate",
            ),
            ["The deadline is June 5."],
            ["5"],
        ),
        # reconcile: the superseded words are lost, the winner's are not
        (
            op(
                "reconcile",
                [("Jon lives in Paris now.", False), ("Jon lives in Rome.", True)],
                None,
                "changed_value",
            ),
            ["Jon lives in Rome."],
            ["Rome"],
        ),
        # prune: the whole text
        (
            op("prune", [("Going to the gym at 5. Bring water.", True)], None, "decay"),
            ["Going to the gym at 5.", "Bring water."],
            ["Going", "gym", "5", "Bring", "water"],
        ),
        # promote removes nothing
        (
            op(
                "promote",
                [("Alice is allergic to peanuts.", False)],
                "Alice is allergic to peanuts.",
            ),
            [],
            [],
        ),
        # the same words said by another speaker are not the same content
        (
            op(
                "merge",
                [("Jon: I lost my job.", True), ("Gina: I lost my job.", True)],
                "Jon: I lost my job.",
                "session_window",
            ),
            ["I lost my job."],
            [],
        ),
    ],
)
def test_it_finds_what_an_operation_loses(operation, lost_texts, lost_words):
    loss = operation_loss(operation)
    assert [s.text for s in loss.sentences] == lost_texts
    assert loss.content_words == lost_words
    assert loss.nothing_lost is (not lost_texts)


def test_a_sentence_whose_copy_stays_elsewhere_in_the_store_is_not_lost():
    window = op(
        "merge",
        [("Jon: See you at 5. Bye!", True), ("Gina: Bye!", True)],
        "Jon: See you at 5.\nGina: Bye!",
        "session_window",
    )
    prune = op("prune", [("See you at 5.", True)], None, "decay", prefix="p")
    store = [
        ("m0", "Jon: See you at 5. Bye!"),
        ("m1", "Gina: Bye!"),
        ("p0", "See you at 5."),
        ("k", "Meeting notes: see you at 5."),
    ]
    # "Jon: ... Bye!" is dropped from the window (Gina's "Bye!" stays, but she said it):
    merged_loss, prune_loss = pass_losses([window, prune], store)
    assert [s.text for s in merged_loss.sentences] == ["Bye!"]
    # the pruned sentence survives inside the window's merged text
    assert prune_loss.nothing_lost and prune_loss.elsewhere

    # without the window in the pass, the pruned sentence is lost
    [alone] = pass_losses([prune], [("p0", "See you at 5."), ("k", "Notes about the gym.")])
    assert [s.text for s in alone.sentences] == ["See you at 5."] and alone.numbers == ["5"]


def test_the_stored_elsewhere_keys_give_the_same_loss_without_the_store():
    prune = op("prune", [("Bring water. The gym opens at 6.", True)], None, "decay")
    [loss] = pass_losses(
        [prune], [("m0", "Bring water. The gym opens at 6."), ("k", "Bring water!")]
    )
    assert [s.text for s in loss.sentences] == ["The gym opens at 6."]
    again = operation_loss(prune, elsewhere=set(OperationLoss.from_dict(loss.to_dict()).elsewhere))
    assert (again.sentences, again.elsewhere) == (loss.sentences, loss.elsewhere)


def test_an_edit_that_drops_a_number_loses_it():
    merge = op(
        "merge",
        [("Tim pays 40 dollars a month.", True), ("Tim pays 40 dollars monthly.", True)],
        "Tim pays 40 dollars a month.",
        "near_duplicate",
    )
    assert operation_loss(merge).content_words == ["monthly"]
    edited = OperationText("merge", merge.sources, "Tim pays dollars a month.", "near_duplicate")
    assert "40" in operation_loss(edited).numbers


@pytest.mark.parametrize(
    "text",
    [
        "Jon: Hey! Going to the gym at 5.\nGina: ok; sure",
        "One. Two!  Three?",
        "no punctuation",
        "Caroline: Thanks, Mel! I'll be there at 10:30.",
    ],
)
def test_sentences_split_like_the_merge_does(text):
    spans = [text[s.start : s.end] for s in sentences(text)]
    assert len(spans) == len(split_sentences(text))
    for span, engine in zip(spans, split_sentences(text), strict=True):
        assert engine.endswith(span)


def test_segments_rebuild_the_source_and_mark_only_missing_words():
    merge = op(
        "merge",
        [("The deadline is June 3.", True), ("Sure. The deadline is June 5.", True)],
        "The deadline is June 3. Sure.",
        "near_duplicate",
    )
    segs = source_segments(merge, merge.sources[1])
    assert "".join(s.text for s in segs) == merge.sources[1].document
    assert [s.text for s in segs if s.tag == "lost"] == ["5."]
    assert [s.text for s in segs if s.tag == "kept"] == ["Sure."]


def test_totals_count_sentences_and_memories_and_skip_copies_kept_by_exclusions():
    prune_a = op("prune", [("Bring water.", True)], None, "decay", prefix="a")
    prune_b = op("prune", [("Bring water. Gym at 6.", True)], None, "decay", prefix="b")
    losses = pass_losses(
        [prune_a, prune_b], [("a0", "Bring water."), ("b0", "Bring water. Gym at 6.")]
    )
    totals = loss_totals(losses)
    assert (totals.sentences, totals.memories, totals.numbers) == (3, 2, 1)
    # excluding prune_b keeps its text in the store, so prune_a's sentence survives too
    kept = loss_totals(losses[:1], kept=SentenceIndex(["Bring water. Gym at 6."]))
    assert (kept.sentences, kept.memories) == (0, 0)


def test_lost_segments_mark_the_missing_words_in_place():
    merge = op(
        "merge",
        [("The deadline is June 3.", True), ("The deadline is June 5.", True)],
        "The deadline is June 3.",
        "near_duplicate",
    )
    [lost] = operation_loss(merge).sentences
    segs = lost_segments(lost)
    assert "".join(s.text for s in segs) == lost.text
    assert [s.text for s in segs if s.tag == "lost"] == ["5."]
