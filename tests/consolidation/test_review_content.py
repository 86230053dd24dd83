"""The content guard's measure: code terms and cues count, one definition per operation and pass."""

from __future__ import annotations

import pytest

from consolidation import Policy
from consolidation.review import (
    LossTotals,
    OperationLoss,
    OperationText,
    SourceText,
    code_term,
    content_loss,
    content_verdict,
    operation_loss,
    pass_losses,
)


def merge(keep: str, drop: str, prefix: str = "m") -> OperationText:
    """A merge of two memories whose result keeps the first text (as the extractive merge
    does when the second adds no content token)."""
    return OperationText(
        "merge",
        (SourceText(f"{prefix}a", keep, True), SourceText(f"{prefix}b", drop, True)),
        keep,
        "near_duplicate",
    )


@pytest.mark.parametrize(
    ("keep", "drop", "lost"),
    [
        ("Clear the cache with rm -rf ~/cache.", "Clear the cache with rm -rf /cache.", ["/cache"]),
        ("The job retries if x >= 5.", "The job retries if x > 5.", ["x > 5"]),
        ("It reads config.yaml at start.", "It reads config.yml at start.", ["config.yml"]),
        ("Deploy with git push --force-with-lease.", "Deploy with git push --force.", ["--force"]),
        ("The build needs Python 3.11.", "The build needs Python 3.12.", ["3.12"]),
        (
            "Docs are at https://x.example/v2.",
            "Docs are at https://x.example/v1.",
            ["https://x.example/v1"],
        ),
        ("List with ls -la.", "List with ls -l.", ["-l"]),
        ("Set max_retries to 3.", "Set max_retry to 3.", ["max_retry"]),
        ("The user likes jazz.", "The user does not like jazz.", ["not"]),
        ("The user smokes.", "The user used to smoke.", ["used to"]),
        # the same in other languages
        ("Lösche den Cache mit rm -rf ~/cache.", "Lösche den Cache mit rm -rf /cache.", ["/cache"]),
        ("Wiederhole, wenn x >= 5 ist.", "Wiederhole, wenn x > 5 ist.", ["x > 5"]),
        ("用 rm -rf ~/cache 清理缓存", "用 rm -rf /cache 清理缓存", ["/cache"]),
        ("Anna raucht.", "Anna raucht nicht mehr.", None),  # the cue, however it is shown
        # nothing lost: the same command, a sentence end, an abbreviation
        ("Clear it with rm -rf ~/cache.", "Clear it with rm -rf ~/cache", []),
        (
            "Use it e.g. daily, as in the U.S. office.",
            "use it e.g. daily, as in the U.S. office",
            [],
        ),
    ],
)
def test_a_merge_that_drops_a_code_term_or_a_cue_loses_it(keep, drop, lost):
    result = content_loss([merge(keep, drop)], [("other", "Nothing to do with it.")])
    words = result.operations[0].content_words
    if lost is None:
        assert words and result.totals.content_words == len(words)
    else:
        assert words == lost
        assert result.totals.content_words == len(lost)
    assert result.totals.sentences == (0 if lost == [] else 1)


@pytest.mark.parametrize(
    ("word", "term"),
    [
        ("~/cache", "~/cache"),
        ("/cache.", "/cache"),
        ("x>=5", "x>=5"),
        ("-rf", "-rf"),
        ("--force,", "--force"),
        ("-5", None),
        ("config.yaml", "config.yaml"),
        (".env", ".env"),
        ("e.g.", None),
        ("U.S.", None),
        ("v2.0.1", "v2.0.1"),
        ("os.path.join()", "os.path.join()"),
        ("(foo())", "foo()"),
        ("$HOME", "$HOME"),
        ("hello", None),
        ("Straße", None),
    ],
)
def test_code_terms_are_kept_as_written(word, term):
    assert code_term(word) == term


def test_a_plain_word_another_memory_keeps_is_not_lost_but_a_number_is():
    prune = OperationText(
        "prune", (SourceText("p", "Jon: I met Gina in Rome on day 5.", True),), None, "decay"
    )
    store = [("p", prune.sources[0].document), ("k", "Gina moved to Rome; 5 cats live there.")]
    (loss,) = content_loss([prune], store).operations
    assert loss.content_words == ["met", "day", "5"]
    assert set(loss.elsewhere_words) == {"gina", "rome"}


def test_the_same_definition_per_operation_and_per_pass():
    a = merge("Alice plays chess on Mondays.", "Alice plays chess on Tuesdays.", "a")
    b = OperationText(
        "prune", (SourceText("k", "Tuesdays are for chess with Bob.", True),), None, "decay"
    )
    store = [
        ("aa", a.sources[0].document),
        ("ab", a.sources[1].document),
        ("k", b.sources[0].document),
    ]
    # alone, ``a`` loses nothing the store keeps: "tuesdays" survives in k
    alone = content_loss([a], store)
    assert alone.operations[0].content_words == []
    # with ``b`` pruning k in the same pass, "Tuesdays" is gone from the store
    both = content_loss([a, b], store)
    assert both.operations[0].content_words == ["Tuesdays"]
    per_op = {w.casefold() for lo in both.operations for w in lo.content_words}
    assert both.totals.content_words == len(per_op)
    assert both.totals.sentences == sum(len(lo.sentences) for lo in both.operations)
    assert pass_losses([a, b], store) == list(both.operations)
    assert both.store_sentences == 3


def test_a_word_kept_only_in_another_scope_is_lost():
    prune = OperationText("prune", (SourceText("p", "Gina likes Rome.", True),), None, "decay")
    store = [("p", "Gina likes Rome."), ("q", "Gina likes Rome too.")]
    assert content_loss([prune], store).operations[0].content_words == []
    scoped = content_loss([prune], store, scope_of={"p": ("user_id=u1",), "q": ("user_id=u2",)})
    assert scoped.operations[0].content_words == ["Gina", "likes", "Rome"]


def test_a_stored_loss_is_recomputed_after_an_edit_without_the_store():
    op = OperationText(
        "merge",
        (
            SourceText("a", "Jon: I opened a bakery.", True),
            SourceText("b", "Jon: My bakery is in Lyon.", True),
        ),
        "Jon: I opened a bakery. My bakery is in Lyon.",
        "session_window",
    )
    store = [("a", op.sources[0].document), ("b", op.sources[1].document), ("c", "Lyon is big.")]
    (stored,) = content_loss([op], store).operations
    assert stored.nothing_lost
    again = OperationLoss.from_dict(stored.to_dict())
    assert again == stored
    edited = OperationText(op.kind, op.sources, "Jon: I opened a bakery in 2021.", op.rule)
    loss = operation_loss(edited, elsewhere=again)
    assert [s.text for s in loss.sentences] == ["I opened a bakery.", "My bakery is in Lyon."]
    assert loss.content_words == ["Lyon"]  # stored: no word was found elsewhere then


@pytest.mark.parametrize(
    ("totals", "store_sentences", "policy", "passed", "says"),
    [
        (LossTotals(0, 0, 0, 0), 100, Policy(), True, "content guard passed"),
        (LossTotals(1, 1, 1, 0), 100, Policy(), False, "loses 1 content word"),
        (LossTotals(1, 1, 1, 0), 100, Policy(max_lost_content_words=1), True, "passed"),
        (LossTotals(1, 1, 9, 0), 100, Policy(max_lost_content_words=None), True, "passed"),
        (LossTotals(6, 6, 0, 0), 100, Policy(), False, "6 of 100 sentences"),
        (LossTotals(5, 5, 0, 0), 100, Policy(), True, "5.0%"),
        (LossTotals(1, 1, 0, 0), 0, Policy(), True, "passed"),
    ],
)
def test_the_content_guard_verdict(totals, store_sentences, policy, passed, says):
    ok, why = content_verdict(totals, store_sentences, policy)
    assert ok is passed
    assert says in why
