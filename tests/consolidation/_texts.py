"""Memory texts for the planning cache tests: marked ones (an update marker, a change event, a
negation or past-state cue) beside unmarked ones of the same topics, so new rows have update
partners, marked and not."""

from __future__ import annotations

UPDATE_TEXTS = [
    "User lives in Paris with the cat.",
    "User no longer lives in Paris with the cat.",
    "User moved from Lyon to Paris with the cat.",
    "The team uses Slack for chat every day.",
    "The team switched to Teams for chat every day.",
    "The team used to use Slack for chat every day.",
    "Bob's manager is Carol at the office.",
    "Bob's manager is now Dave at the office.",
    "User prefers React for the frontend work.",
    "User does not prefer React for the frontend work.",
    "apple river stone cloud garden violin",
]
