"""tfviz.core.metrics: one vocabulary for every number a task is judged by."""

from __future__ import annotations

import pytest

from tests.conftest import make_model
from tfviz import get_task, list_tasks
from tfviz.core.metrics import METRICS, metric
from tfviz.training.evaluate import evaluate


@pytest.mark.parametrize("name", list_tasks())
def test_every_task_metric_and_every_evaluated_number_has_a_label(name):
    task = get_task(name)
    assert task.metric in METRICS
    cfg = task.model_config(d_model=8, n_heads=2, d_ff=8, n_layers=1)
    model = make_model(**cfg.to_dict())
    numbers = evaluate(model, task, n=4, seed=0)
    # evaluate()'s documented keys: the bookkeeping three, plus the kind's metrics.
    by_kind = {
        "classify": {"accuracy"},
        "token": {"token_accuracy", "sequence_accuracy"},
        "regress": {"mae"},
    }
    assert task.kind in by_kind
    assert set(numbers) == {"n", "min_len", "max_len"} | by_kind[task.kind]
    assert task.metric in by_kind[task.kind]
    for key in by_kind[task.kind]:  # every evaluated number has a label a person reads
        m = metric(key)
        assert isinstance(m.label, str) and m.label.strip()
        if m.percent:
            assert 0 <= numbers[key] <= 1


def test_formats():
    assert metric("token_accuracy").format(0.98765) == "98.8%"
    assert metric("accuracy").format_change(-0.05) == "-5.0 points"
    assert metric("mae").format(0.09812) == "0.098"
    assert metric("mae").format_change(0.25) == "+0.250"
    assert not metric("mae").higher_is_better and metric("accuracy").higher_is_better


def test_an_unknown_metric_is_named_in_the_error():
    with pytest.raises(ValueError, match="unknown metric 'f1'; known: token_accuracy"):
        metric("f1")
