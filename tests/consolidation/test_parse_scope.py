"""A planning pass keeps every text it parsed until it ends (:func:`parse_scope`), beyond the
16,384 texts :func:`parse` remembers on its own, and holds none of them after."""

from __future__ import annotations

import threading

from consolidation import text
from consolidation.text import parse, parse_scope


def test_a_scope_keeps_each_parse_beyond_the_memo_and_drops_the_texts_when_it_closes():
    first = "Gina keeps her passport in the blue drawer."
    with parse_scope():
        kept = parse(first)
        with parse_scope():  # a nested scope (another pass in another thread) shares it
            for i in range(17_000):  # more texts than parse's own memo holds
                parse(f"note {i}")
        assert parse(first) is kept  # not parsed again
    assert text._held is None  # the scope's texts are gone
    assert parse(first) is not kept and parse(first) == kept  # parsed again, the same


def test_scopes_in_two_threads_end_when_the_last_one_closes():
    opened, release = threading.Event(), threading.Event()

    def other_pass() -> None:
        with parse_scope():
            parse("Bob's manager is Carol.")
            opened.set()
            release.wait(10)

    t = threading.Thread(target=other_pass)
    t.start()
    opened.wait(10)
    with parse_scope():
        parse("Bob's manager is now Dave.")
    assert text._held is not None and "Bob's manager is Carol." in text._held
    release.set()
    t.join(10)
    assert text._held is None
