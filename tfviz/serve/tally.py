"""Predict, then reveal: an anonymous, in-process tally of a class's guesses.

Before a result is shown, each student commits a guess ("will the answer change with W_o
block-diagonal?"); afterwards the view shows how the class guessed. The tally lives in this server
process only (one per replica), counts choices per question and nothing else (no names, no
sessions, no times), is capped so a script cannot grow it without bound, and a teacher can reset
it. Thread-safe: every browser session of a server shares it.
"""

from __future__ import annotations

import threading
from collections import Counter

from tfviz.refusal import Refusal

MAX_QUESTIONS = 64  # distinct questions kept; the oldest is dropped beyond this
MAX_CHOICES = 8  # distinct answers per question (they come from the app's fixed options)
MAX_COUNT = 10_000  # guesses counted per answer; more only say "a lot"


class TallyRefusal(Refusal, ValueError):
    """A guess the tally does not count: a code and values, worded by the catalogue (keys
    "refusal.tally.<code>") in each session's language; str() is the English."""

    PREFIX = "refusal.tally."


class Tally:
    """Counts of guesses per question and choice."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, Counter] = {}

    def add(self, question: str, choice: str) -> None:
        """Count one guess. TallyRefusal (a ValueError) for an empty question or choice, or one
        choice too many."""
        if not (isinstance(question, str) and question and isinstance(choice, str) and choice):
            raise TallyRefusal("empty")
        with self._lock:
            counts = self._counts.get(question)
            if counts is None:
                if len(self._counts) >= MAX_QUESTIONS:
                    self._counts.pop(next(iter(self._counts)))  # dicts keep insertion order
                counts = self._counts[question] = Counter()
            if choice not in counts and len(counts) >= MAX_CHOICES:
                raise TallyRefusal("too_many_choices", most=MAX_CHOICES)
            counts[choice] = min(counts[choice] + 1, MAX_COUNT)

    def counts(self, question: str) -> dict[str, int]:
        """{choice: guesses} for a question (empty if nobody guessed yet)."""
        with self._lock:
            return dict(self._counts.get(question, {}))

    def reset(self, question: str | None = None) -> None:
        """Forget one question's guesses, or every question's (a teacher's button)."""
        with self._lock:
            if question is None:
                self._counts.clear()
            else:
                self._counts.pop(question, None)
