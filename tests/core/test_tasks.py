"""Tasks: right answers worked by hand, generators that cover every length, and clear refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tfviz import get_task, list_tasks, train
from tfviz.core.tasks import InputError
from tfviz.training.evaluate import evaluate

HAND_WORKED = [
    ("sum", "31415926", "31"),
    ("sum", "9", "9"),
    ("sum", "99999999", "72"),
    ("reverse", "abcde", "edcba"),
    ("reverse", "j", "j"),
    ("reverse", "aabj", "jbaa"),
    ("sort", "31415926", "11234569"),
    ("sort", "90", "09"),
    ("sort", "5555", "5555"),
    ("max_position", "31415926", "6"),
    ("max_position", "9009", "1"),
    ("max_position", "0", "1"),
    ("histogram", "abca", "2 1 1 2"),
    ("histogram", "hhhh", "4 4 4 4"),
    ("balanced", "(())()", "balanced"),
    ("balanced", "())(", "unbalanced"),
    ("balanced", "(", "unbalanced"),
    ("balanced", ")(", "unbalanced"),
    ("balanced", "()", "balanced"),
]


SIX = ("sum", "reverse", "sort", "max_position", "histogram", "balanced")


def test_the_six_tasks_exist():
    # Exactly the app's six, in its order: a task more (the atlas's "difference") or fewer shows.
    assert tuple(list_tasks()) == SIX
    tasks = [get_task(name) for name in SIX]
    assert [t.name for t in tasks] == list(SIX) and len({id(t) for t in tasks}) == 6
    # Each one works: draws a batch its model can read and answers by its own rule (the
    # hand-worked answers above cover every one of them).
    assert {name for name, _, _ in HAND_WORKED} == set(SIX)
    for task in tasks:
        config = task.model_config()
        batch = task.sample(16, np.random.default_rng(0))
        assert int(batch.ids.max()) < config.vocab_size and batch.ids.shape[1] <= config.max_len
        text = task.random_example(np.random.default_rng(1))
        assert task.solve(text) == expected_answer(task.name, text)
    with pytest.raises(ValueError, match="unknown task"):
        get_task("difference")


@pytest.mark.parametrize("name, text, answer", HAND_WORKED)
def test_solve_matches_hand_worked_answers(name, text, answer):
    assert get_task(name).solve(text) == answer


def expected_answer(name: str, text: str) -> str:
    """Plain-Python answers, written independently of the vectorised targets."""
    if name == "sum":
        return str(sum(int(c) for c in text))
    if name == "reverse":
        return text[::-1]
    if name == "sort":
        return "".join(sorted(text))
    if name == "max_position":
        return str(text.index(max(text)) + 1)
    if name == "histogram":
        return " ".join(str(text.count(c)) for c in text)
    depth = 0
    for c in text:
        depth += 1 if c == "(" else -1
        if depth < 0:
            return "unbalanced"
    return "balanced" if depth == 0 else "unbalanced"


@pytest.mark.parametrize("name", list_tasks())
def test_generated_targets_agree_with_reference(name):
    task = get_task(name)
    batch = task.sample(300, np.random.default_rng(7))
    lengths = batch.lengths.tolist()
    assert min(lengths) == task.min_len and max(lengths) == task.max_len  # every length drawn
    for i in range(len(lengths)):
        row = batch.ids[i][~batch.pad_mask[i]].tolist()
        text = task.decode(row)
        assert len(text) == lengths[i]
        assert task.solve(text) == expected_answer(name, text)
        want = task.answer_from_target(batch.target[i], lengths[i])
        assert task.sep.join(want) == expected_answer(name, text)


def test_balanced_generator_has_both_labels_and_hard_negatives():
    task = get_task("balanced")
    batch = task.sample(2000, np.random.default_rng(0))
    share = batch.target.float().mean().item()
    assert 0.15 < share < 0.5
    # near misses: equal numbers of ( and ) that are still unbalanced
    near = 0
    for i in range(2000):
        text = task.decode(batch.ids[i].tolist())
        near += text.count("(") == text.count(")") and batch.target[i].item() == 0
    assert near > 200


def test_generator_is_seeded():
    task = get_task("sort")
    a = task.sample(50, np.random.default_rng(3))
    b = task.sample(50, np.random.default_rng(3))
    assert torch.equal(a.ids, b.ids) and torch.equal(a.target, b.target)


@pytest.mark.parametrize("name", list_tasks())
def test_encode_decode_roundtrip_and_bos(name):
    task = get_task(name)
    text = task.alphabet[::-1][:5]
    ids = task.encode(text)
    assert task.decode(ids) == text
    assert (ids[0] == task.bos_id) == task.bos
    labels = task.labels(text)
    assert len(labels) == len(ids) and len(set(labels)) == len(labels)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "input is empty"),
        ("abz", r"character 'z' \(U\+007A LATIN SMALL LETTER Z\) at position 3 .* abcdefghij"),
        ("a" * 17, "17 characters long; reverse takes 1 to 16 characters from: abcdefghij"),
        ("ab c", "U\\+0020 SPACE at position 3"),
        ("a\x00", "U\\+0000 at position 2"),
        ("<b>", "'<' .* at position 1"),
    ],
)
def test_encode_refuses_bad_input_clearly(text, message):
    with pytest.raises(ValueError, match=message):
        get_task("reverse").encode(text)


def test_encode_refuses_non_text():
    with pytest.raises(ValueError, match="must be text"):
        get_task("sum").encode(123)


def test_unknown_task_lists_known_ones():
    with pytest.raises(ValueError, match="known tasks: sum, reverse"):
        get_task("addition")


def test_sample_refuses_lengths_out_of_range():
    with pytest.raises(ValueError, match="min_len"):
        get_task("sum").sample(4, np.random.default_rng(0), min_len=0)


def test_training_is_deterministic_on_cpu_and_reports_progress():
    seen = []
    a, hist_a = train(
        "reverse",
        steps=6,
        batch_size=8,
        seed=5,
        device="cpu",
        on_step=lambda info: seen.append(info.step),
    )
    b, hist_b = train("reverse", steps=6, batch_size=8, seed=5, device="cpu")
    assert seen == [1, 2, 3, 4, 5, 6]
    assert hist_a["loss"] == hist_b["loss"]
    pairs = zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    assert all(torch.equal(x, y) for x, y in pairs)


def test_on_step_returning_false_cancels():
    _, hist = train("sort", steps=50, batch_size=8, on_step=lambda info: info.step < 3)
    assert hist["steps_done"] == 3 and hist["cancelled"]


def test_training_without_w_o_keeps_identity_as_its_w_o():
    model, hist = train("sort", steps=5, batch_size=8, w_o="identity")
    assert hist["w_o"] == "identity"
    for layer in model.layers:
        assert torch.equal(layer.attn.W_o.weight, torch.eye(layer.attn.W_o.weight.shape[0]))
        assert (layer.attn.W_o.bias == 0).all()
    ids, pad = get_task("sort").encode_batch(["3141", "27"])
    torch.testing.assert_close(model(ids, pad).logits, model(ids, pad, w_o="identity").logits)


def test_training_learns_a_short_task():
    # Few steps, but enough to beat chance by far: the loop really optimises.
    # Always predicting the mean of four digits would give a mean absolute error near 4.6.
    model, hist = train("sum", steps=150, batch_size=64, lr=3e-3, seed=0, min_len=4, max_len=4)
    assert sum(hist["loss"][-10:]) < sum(hist["loss"][:10]) * 0.05
    assert evaluate(model, "sum", n=500, min_len=4, max_len=4)["mae"] < 1.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(steps=0), "steps must be a positive integer"),
        (dict(lr=float("nan")), "lr must be"),
        (dict(batch_size=-1), "batch_size"),
        (dict(w_o="off"), "w_o must be"),
    ],
)
def test_train_refuses_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        train("sum", **kwargs)


@pytest.mark.parametrize("name", list_tasks())
def test_predict_returns_answer_in_solve_form(name):
    task = get_task(name)
    model, _ = train(task, steps=1, batch_size=4)
    text = task.examples[0]
    pred = task.predict_tokens(model, text)
    assert len(pred) == len(task.solve_tokens(text))
    assert task.predict(model, text) == task.sep.join(pred)
    assert task.predict(model, text, w_o="identity", ablate_heads=[(0, 0)]) is not None


def test_retraining_w_o_alone_changes_only_w_o_of_a_copy_and_recovers():
    from tests.conftest import MODELS
    from tfviz import load_checkpoint
    from tfviz.training.train import retrain_w_o

    model, meta = load_checkpoint(MODELS / "sort.safetensors")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    copy, history = retrain_w_o(model, meta.task, start="identity", steps=60, lr=3e-3)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # shared: intact
    for key, value in copy.state_dict().items():
        if ".attn.W_o." in key:
            assert not torch.equal(value, before[key])
        else:
            assert torch.equal(value, before[key]), key  # frozen
    losses = history["loss"]
    assert len(losses) == 60 and history["trained"] == "W_o only"
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:5])  # the model learns to use W_o again
    assert not copy.training and not any(p.requires_grad for p in copy.parameters())
    with pytest.raises(ValueError, match="W_o starts from one of"):
        retrain_w_o(model, meta.task, start="ones")


@pytest.mark.parametrize(
    ("text", "code", "values"),
    [
        ("", "empty", {}),
        ("a" * 17, "too_long", {"length": 17}),
        ("abz", "bad_char", {"char": "'z' (U+007A LATIN SMALL LETTER Z)", "position": 3}),
        (5, "not_text", {"type": "int"}),
    ],
)
def test_a_refusal_carries_its_code_and_values_for_other_languages(text, code, values):
    task = get_task("reverse")
    with pytest.raises(InputError) as caught:
        task.validate(text)
    error = caught.value
    assert isinstance(error, ValueError) and error.code == code
    assert values.items() <= error.values.items()
    if code != "not_text":  # every other refusal names what is allowed
        assert error.values["alphabet"] == task.alphabet and error.values["max_len"] == 16
    # Each code has a catalogue text whose placeholders the values fill, in every language.
    from tfviz.ui.i18n import LANGUAGES, translate

    for lang in LANGUAGES:
        shown = translate(lang, f"input.{code}", **error.values)
        for value in values.values():
            assert str(value) in shown


def test_an_accepted_text_is_taken_again_by_its_task_only():
    """validate returns the task's Accepted text; the same task takes it back as it is, another
    task checks it by its own rules; pickled or copied it is a plain text again (its task
    does not travel with it)."""
    import copy
    import pickle

    from tfviz.core.tasks import Accepted

    reverse, digits = get_task("reverse"), get_task("sum")
    accepted = reverse.validate("abcab")
    assert isinstance(accepted, Accepted) and accepted == "abcab"
    assert reverse.validate(accepted) is accepted
    with pytest.raises(ValueError):
        digits.validate(accepted)  # letters: not a digit task's
    for again in (pickle.loads(pickle.dumps(accepted)), copy.deepcopy(accepted)):
        assert again == "abcab" and type(again) is str
    assert reverse.encode(accepted) == reverse.encode("abcab")
