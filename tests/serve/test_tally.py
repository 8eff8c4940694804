"""tfviz.serve.tally: a class's guesses, anonymous, capped, shared by threads, reset by a
teacher."""

from __future__ import annotations

import threading

import pytest

from tfviz.serve import tally


def test_guesses_are_counted_per_question_and_reset():
    t = tally.Tally()
    for choice in ("yes", "yes", "no"):
        t.add("block-diagonal changes the answer?", choice)
    t.add("other", "maybe")
    assert t.counts("block-diagonal changes the answer?") == {"yes": 2, "no": 1}
    assert t.counts("unasked") == {}
    t.reset("other")
    assert t.counts("other") == {} and t.counts("block-diagonal changes the answer?")
    t.reset()
    assert t.counts("block-diagonal changes the answer?") == {}


def test_the_tally_is_capped(monkeypatch):
    monkeypatch.setattr(tally, "MAX_QUESTIONS", 3)
    monkeypatch.setattr(tally, "MAX_COUNT", 5)
    t = tally.Tally()
    for q in "abcd":
        t.add(q, "x")
    assert t.counts("a") == {} and t.counts("d") == {"x": 1}  # the oldest question went
    for _ in range(9):
        t.add("d", "x")
    assert t.counts("d") == {"x": 5}
    for i in range(tally.MAX_CHOICES - 1):
        t.add("d", f"c{i}")
    with pytest.raises(ValueError, match="at most 8 different answers") as full:
        t.add("d", "one too many")
    # worded in the page's language where the Predict view shows it
    assert full.value.text("zh") == "一个问题最多接受 8 种不同的答案"
    with pytest.raises(ValueError, match="a question and a choice"):
        t.add("", "x")


def test_threads_lose_no_guess():
    t = tally.Tally()

    def guess() -> None:
        for _ in range(500):
            t.add("q", "yes")

    threads = [threading.Thread(target=guess) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert t.counts("q") == {"yes": 4000}
