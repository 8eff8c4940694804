"""Hostile input (issue 4): every odd string gets a clear ValueError or a valid result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfviz import get_task, list_tasks

CORPUS = json.loads((Path(__file__).parents[1] / "hostile_inputs.json").read_text())["inputs"]


def test_corpus_is_large_and_covers_every_category():
    assert len(CORPUS) >= 200
    categories = {item["category"] for item in CORPUS}
    assert {
        "empty",
        "whitespace",
        "long",
        "punctuation",
        "emoji",
        "combining",
        "rtl",
        "control",
        "markup",
        "numbers_as_text",
    } <= categories
    assert any(len(item["text"]) == 10000 for item in CORPUS)
    assert any("\x00" in item["text"] for item in CORPUS)


@pytest.mark.parametrize("name", list_tasks())
def test_every_task_refuses_clearly_or_accepts(name):
    task = get_task(name)
    accepted = 0
    for item in CORPUS:
        text = item["text"]
        try:
            ids = task.encode(text)
        except ValueError as e:
            message = str(e)
            assert message and "Traceback" not in message
            # The message names the problem in words a student can act on.
            assert any(w in message for w in ("empty", "characters long", "not allowed"))
            assert "\x00" not in message and len(message) < 300  # never echoes a 10k paste
            continue
        accepted += 1
        assert task.decode(ids) == text and 1 <= len(text) <= task.max_len
    assert accepted >= 1
