"""What jobs and form checks say reaches the page through the catalogue, in the page's language.

Jobs report tfviz.messages.Message values (a key and numbers or names); the app words them
with the catalogue keys jobs.message.<key> (tfviz.ui.jobs.job_text). Checked here: every message a
job or a check can say has a key in both languages with the same placeholders; every say(...) in
the library names a known message; each message worded in Chinese carries no English; and a
running, finished and cancelled training, W_o retraining and experiment rerun show Chinese built
from those keys on the page (stand-in jobs, so nothing trains).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import start_app
from tfviz import words
from tfviz.experiments import experiment
from tfviz.messages import CHOICES, MESSAGES, PREFIX, Message, Refused, placeholders, say
from tfviz.serve import jobs, work
from tfviz.ui.i18n import translate
from tfviz.ui.jobs import job_text

ROOT = Path(__file__).resolve().parents[2]
HAN = re.compile(r"[\u4e00-\u9fff]")
# Names written the same in every language (i18n's rule), and so allowed in Chinese text.
TECHNICAL = {"W_o", "d_model", "d_ff"}


def said_keys() -> dict[str, str]:
    """key -> where, for every say("key", ...) in the library (read from its syntax tree)."""
    found = {}
    for path in sorted((ROOT / "tfviz").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "say"
                and node.args
            ):
                first = node.args[0]
                assert isinstance(first, ast.Constant), f"{path.name}:{node.lineno}: say(a name)"
                found[first.value] = f"{path.name}:{node.lineno}"
    return found


def sample(key: str) -> Message:
    """key's message with made-up values of the right kinds: a choice from its set, a nested
    message for how far a job got, numbers and names."""
    values = {}
    for name in sorted(placeholders(MESSAGES[key])):
        if name in CHOICES:
            values[name] = CHOICES[name][1][-1]
        elif name == "how_far":
            values[name] = say("after_steps", steps=1234)
        elif name in ("file", "name", "recipe", "why", "error", "got", "options", "low", "high"):
            values[name] = f"x_{name}"
        else:
            values[name] = 4321
    return Message(key, values)


def template_english_words(key: str) -> set[str]:
    """The English words of key's template (placeholders left out), technical names aside."""
    text = re.sub(r"\{[^}]*\}", " ", MESSAGES[key])
    return {w for w in re.findall(r"[A-Za-z_']{3,}", text) if w not in TECHNICAL}


# ---- the vocabulary and the catalogue ----------------------------------------------------------


def test_every_message_has_one_wording_per_language_with_the_same_placeholders():
    english = {k: v for k, v in words.catalogue("en").items() if k.startswith(PREFIX)}
    assert len(english) == len(MESSAGES) >= 30
    for lang in words.LANGUAGES:
        theirs = {k: v for k, v in words.catalogue(lang).items() if k.startswith(PREFIX)}
        assert set(theirs) == set(english), (lang, set(theirs) ^ set(english))
        for key, text in theirs.items():
            assert placeholders(text) == placeholders(english[key]), (lang, key)
        for name, (prefix, options) in CHOICES.items():
            for value in options:
                assert f"{prefix}{value}" in words.catalogue(lang), (lang, name, value)
    # The sentences are written once: no module of the library spells a message's English.
    for path in sorted((ROOT / "tfviz").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for key, text in MESSAGES.items():
            fixed = max(re.split(r"\{[^}]*\}", text), key=len)
            if len(fixed) >= 32:  # a sentence of its own, not a common phrase
                assert fixed not in source, f"{path.name} spells jobs.message.{key}"


def test_every_message_the_library_says_is_known_and_every_known_one_is_said():
    said = said_keys()
    assert set(said) - set(MESSAGES) == set(), "say() of a key MESSAGES lacks"
    assert set(MESSAGES) - set(said) == set(), "a message nothing says"


def test_a_message_refuses_an_unknown_key_or_wrong_values():
    with pytest.raises(KeyError):
        say("trainnig")
    with pytest.raises(ValueError, match="takes"):
        say("saved")  # {file} missing
    with pytest.raises(ValueError, match="one of"):
        say("retraining", start="ones")


@pytest.mark.parametrize("key", sorted(MESSAGES))
def test_every_message_worded_in_chinese_is_chinese(key):
    message = sample(key)
    text = job_text(message, lang="zh")
    assert HAN.search(text), text
    left = {w for w in template_english_words(key) if re.search(rf"\b{re.escape(w)}\b", text)}
    assert not left, f"English left in {text!r}: {left}"
    for name, value in message.values.items():
        if isinstance(value, int):
            assert f"{value:,}" in text
        elif name in CHOICES:  # a choice is worded by its label, not its value
            assert translate("zh", f"{CHOICES[name][0]}{value}") in text
    assert message.english() != text


def test_the_english_of_a_message_is_its_template_filled():
    message = say("cancelled", how_far=say("no_run_finished", done=40, total=8000))
    assert str(message) == words.english(
        "jobs.message.cancelled",
        how_far=words.english("jobs.message.no_run_finished", done="40", total="8,000"),
    )
    assert "40" in str(message) and "8,000" in str(message) and "{" not in str(message)
    curve = say("run_curve_together", run=1, runs=4, seed=0, condition="identity")
    assert "random seed 0, without W_o" in curve.english()


def test_a_refused_form_value_is_worded_in_chinese():
    from tfviz.ui.i18n import why

    with pytest.raises(Refused) as refused:
        work.RetrainSpec(task="sort", steps=0).check()
    text = job_text(refused.value.message, lang="zh")
    assert text.startswith(translate("zh", "jobs.field.steps")) and "5,000" in text
    assert "whole number" not in text
    # The app's refusal words it the same way (outside a page run: the default language).
    assert why(refused.value) == job_text(refused.value.message, lang="en")


# ---- on the page, in Chinese --------------------------------------------------------------------


class StandIn:
    """A job that says what it is told: its state() is a real JobState with that status
    and message, so the page draws it as it draws a real job's."""

    def __init__(self, kind, spec, status: str, message: Message, result=None):
        self.id = 20_001
        self.kind, self.spec, self.status, self.message, self.result = (
            kind,
            spec,
            status,
            message,
            result,
        )

    def state(self) -> jobs.JobState:
        return jobs.JobState(
            id=self.id,
            kind=self.kind,
            spec=self.spec,
            status=self.status,
            message=self.message,
            done=5,
            total=10,
            step=5,
            losses=[1.0, 0.5],
            loss=0.5,
            result=self.result,
            seconds=3.0,
        )

    def cancel(self) -> None:
        pass


def shown(at) -> str:
    """Every text of the page a student reads: markdown, captions, notices, progress bars."""
    parts = [
        e.value
        for kind in ("markdown", "caption", "info", "warning", "error", "success")
        for e in getattr(at, kind)
    ]
    parts += [p.proto.text for p in at.get("progress")]
    return " ".join(parts).replace("\\", "")


def zh(key: str, **values) -> str:
    return translate("zh", f"jobs.message.{key}", **values)


# Where each kind of job shows on the page: (view, its session_state key, part of the view, spec).
PAGES = {
    "train": ("Train", "train_job", None, work.JobSpec(task="reverse", name="mine", steps=10)),
    "retrain_w_o": (
        "Train",
        "retrain_job",
        "retrain",
        work.RetrainSpec(task="reverse", start="zero", steps=10),
    ),
    "experiment": (
        "Does W_o matter?",
        "experiment_job",
        None,
        work.ExperimentSpec(task="reverse", seeds=2, steps=10),
    ),
}


@pytest.mark.parametrize(
    "kind, status, message, expected",
    [
        ("train", jobs.RUNNING, say("evaluating", n=1000), zh("evaluating", n="1,000")),
        (
            "train",
            jobs.CANCELLED,
            say("cancelled", how_far=say("after_steps_not_saved", steps=40)),
            zh("cancelled", how_far=zh("after_steps_not_saved", steps="40")),
        ),
        (
            "train",
            jobs.FAILED,
            say("save_failed", file="mine.safetensors", why="disk full"),
            zh("save_failed", file="mine.safetensors", why="disk full"),
        ),
        (
            "retrain_w_o",
            jobs.RUNNING,
            say("retraining", start="zero"),
            zh("retraining", start=translate("zh", "train.retrain.start.zero")),
        ),
        (
            "retrain_w_o",
            jobs.CANCELLED,
            say("abandoned", how_far=say("after_steps", steps=7)),
            zh("abandoned", how_far=zh("after_steps", steps="7")),
        ),
        (
            "experiment",
            jobs.RUNNING,
            say("run_curve_together", run=1, runs=4, seed=0, condition="identity"),
            zh(
                "run_curve_together",
                run="1",
                runs="4",
                seed="0",
                condition=translate("zh", "experiment.condition.identity"),
            ),
        ),
        (
            "experiment",
            jobs.DONE,
            say("runs_finished", finished=10),
            zh("runs_finished", finished="10"),
        ),
        (
            "experiment",
            jobs.CANCELLED,
            say("cancelled", how_far=say("runs_kept", finished=2, runs=4)),
            zh("cancelled", how_far=zh("runs_kept", finished="2", runs="4")),
        ),
    ],
)
@pytest.mark.usefixtures("fresh_app")
def test_a_job_s_messages_are_chinese_on_the_page(kind, status, message, expected):
    view, key, part, spec = PAGES[kind]
    at = start_app(view, lang="zh")
    # A finished rerun is collected into the session: it needs a result to show.
    result = experiment.load_precomputed("reverse") if kind == "experiment" else None
    at.session_state[key] = StandIn(kind, spec, status, message, result)
    if part is None:
        at.run()
    else:
        at.segmented_control(key="train_section").set_value(part).run()
    assert not at.exception, at.exception
    text = shown(at)
    assert expected in text, text
    assert message.english() not in text


@pytest.mark.usefixtures("fresh_app")
def test_a_finished_training_names_its_metric_in_chinese():
    view, key, _, spec = PAGES["train"]
    at = start_app(view, lang="zh")
    result = work.TrainResult(path="mine.safetensors", metrics={"token_accuracy": 0.99})
    at.session_state[key] = StandIn("train", spec, jobs.DONE, say("saved", file="x"), result)
    at.run()
    assert not at.exception, at.exception
    text = shown(at)
    metric = translate("zh", "metric.token_accuracy.name")
    assert translate("zh", "train.done_score", metric=metric, value="99.0%") in text, text
    assert "accuracy" not in text.lower()
    # The model is named as the sidebar's picker lists it, in the language shown (issue 20).
    yours = translate("zh", "sidebar.source.yours")
    assert translate("zh", "sidebar.model_option", name="mine", source=yours) in text, text
    assert "yours" not in text
