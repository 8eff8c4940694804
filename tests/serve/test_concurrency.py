"""One shared model serves many sessions at once: no cross-talk, no change to a single bit.

An exception in a worker thread does not fail a test by itself (pytest only warns about it), so
every thread here runs through `checked`, which records what it raised, and the test asserts
that nothing was.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import torch

from tests.conftest import MODELS
from tfviz import get_task, load_checkpoint, train

SWITCHES = [
    {},
    {"w_o": "identity"},
    {"w_o": "zero"},
    {"w_o": {1: "identity"}},
    {"ablate_heads": [(0, 1), (1, 3)]},
    {"ablate_after_w_o": [(0, 2)]},
]


def checked(errors: list[str], target: Callable, *args, **kwargs) -> threading.Thread:
    """A thread running target(*args, **kwargs) that appends whatever it raises to errors."""

    def run() -> None:
        try:
            target(*args, **kwargs)
        except BaseException as e:  # anything, even SystemExit: the test reports it
            errors.append(f"{threading.current_thread().name}: {type(e).__name__}: {e}")

    return threading.Thread(target=run)


def test_a_failing_thread_is_reported():
    errors: list[str] = []
    t = checked(errors, int, "not a number")
    t.start()
    t.join()
    assert len(errors) == 1 and "ValueError" in errors[0]


def test_shared_model_stays_bit_identical_under_concurrent_switches_and_training():
    model, meta = load_checkpoint(MODELS / "reverse.safetensors")
    task = get_task(meta.task)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    texts = ["abcdefghij", "jihg", "aabbccddeeffgghh", "c"]
    batches = [task.encode_batch([t]) for t in texts]
    # What each (text, switch) gives when nobody else is running.
    expected = {
        (i, j, trace): model(*batches[i], trace=trace, **s).logits
        for i in range(len(texts))
        for j, s in enumerate(SWITCHES)
        for trace in (False, True)
    }
    failures: list[str] = []

    def session(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(40):
            i, j = rng.randrange(len(texts)), rng.randrange(len(SWITCHES))
            trace = rng.random() < 0.5
            out = model(*batches[i], trace=trace, **SWITCHES[j])
            if not torch.equal(out.logits, expected[(i, j, trace)]):
                failures.append(f"text {i} switch {j} differed under load")

    errors: list[str] = []
    threads = [checked(errors, session, s) for s in range(8)]
    threads.append(checked(errors, train, "reverse", steps=20))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert not failures, failures[:3]
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not model.training and not any(p.requires_grad for p in model.parameters())
