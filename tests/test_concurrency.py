"""One shared model serves many sessions at once: no cross-talk, no change to a single bit."""

from __future__ import annotations

import random
import threading

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

    threads = [threading.Thread(target=session, args=(s,)) for s in range(8)]
    threads.append(threading.Thread(target=train, args=("reverse",), kwargs={"steps": 20}))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not model.training and not any(p.requires_grad for p in model.parameters())
