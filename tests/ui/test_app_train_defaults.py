"""A class's first training through the Train tab (AppTest): the task's own defaults in the form,
what they should reach said up front, a free model name for every session, a message for a
name that is too long, and a clear warning under a model that did not learn."""

from __future__ import annotations

import time

import pytest

from tests.conftest import start_app, submit_training
from tests.support import unescape
from tfviz import list_tasks
from tfviz.serve import jobs
from tfviz.training.recipes import CLASS_RECIPES, class_recipe
from tfviz.ui.i18n import translate

pytestmark = pytest.mark.usefixtures("fresh_app")


def sidebar_text(at) -> str:
    """The sidebar's plain texts: the loaded model's facts."""
    return "\n".join(text.value for text in at.sidebar.text)


def finished(at, timeout: float = 90) -> None:
    """Rerun the page until the session's training has ended and its result is shown."""
    job = at.session_state["train_job"]
    assert job.wait(timeout), "the training did not end"
    end = time.monotonic() + 30
    while not (at.success or at.warning or at.error):
        assert time.monotonic() < end, "the result never showed"
        at.run()
        assert not at.exception


def test_the_form_holds_each_tasks_own_defaults_and_says_what_they_reach():
    at = start_app("Train")
    assert at.selectbox(key="train_task").value == "reverse"  # the model shown: reverse
    for task in list_tasks():
        at.selectbox(key="train_task").set_value(task).run()
        assert not at.exception
        recipe = class_recipe(task)
        assert at.number_input(key="train_steps").value == recipe.steps
        assert at.number_input(key="train_lr").value == pytest.approx(recipe.lr)
        said = " ".join(c.value for c in at.caption)
        # No fixed time is promised: it is measured from the run's own first steps.
        assert " s on one" not in said and "progress bar times its first steps" in said, said
    # The defaults differ between tasks: one set cannot serve them all.
    assert len({(r.steps, r.lr) for r in CLASS_RECIPES.values()}) > 1


def test_every_session_is_offered_a_free_name_and_a_second_student_is_not_refused(fresh_app):
    first, second = start_app("Train"), start_app("Train")
    names = [at.text_input(key="train_name").value for at in (first, second)]
    assert names[0] != names[1] and all(n.startswith("reverse_") for n in names)
    for at in (first, second):  # each presses Start with the name it was offered
        job = submit_training(at, at.text_input(key="train_name").value, 5)
        assert job.wait(60) and job.state().status == jobs.DONE, job.state().message
    assert sorted(p.stem for p in fresh_app.iterdir() if p.suffix == ".safetensors") == sorted(
        names
    )
    first.run()
    assert first.text_input(key="train_name").value not in names  # ready for a next model


def test_a_typed_name_is_kept_when_the_task_changes_and_a_proposed_one_follows_the_task():
    at = start_app("Train")
    at.selectbox(key="train_task").set_value("sort").run()
    assert at.text_input(key="train_name").value.startswith("sort_")
    at.text_input(key="train_name").set_value("mine").run()
    at.selectbox(key="train_task").set_value("sum").run()
    assert at.text_input(key="train_name").value == "mine"


def test_a_name_over_the_limit_is_refused_with_the_limit_not_dropped():
    at = start_app("Train")
    at.text_input(key="train_name").set_value("x" * 300)
    at.button(key="train_submit").click().run()
    assert not at.exception
    assert at.text_input(key="train_name").value == "x" * 300  # kept, so it can be shortened
    message = unescape(at.error[0].value)
    assert "300 characters" in message and "at most 64" in message
    assert "train_job" not in at.session_state


def test_a_model_that_did_not_learn_is_said_so_with_what_to_change():
    at = start_app("Train")
    submit_training(at, "too_short", 5)  # 5 steps of a tiny model: it cannot learn reverse
    finished(at)
    assert at.success  # it was trained and saved...
    warning = unescape(at.warning[0].value)  # ...but not silently
    assert "has not learned the task" in warning
    assert "at least 1,000 steps" in warning  # fewer steps than the task's default
    assert "the default sizes" in warning  # the tiny sizes differ from the default ones


def test_the_warning_speaks_chinese():
    at = start_app("Train", lang="zh")
    submit_training(at, "too_short_zh", 5)
    finished(at)
    warning = at.warning[0].value
    assert "没有学会这个任务" in warning and "至少 1,000 步" in warning


def test_show_this_model_opens_it_in_the_picker():
    at = start_app("Train")
    submit_training(at, "shown", 5)
    finished(at)
    # The trained model's sizes (submit_training's: not those of the reverse model shown now),
    # as the sidebar states them for the model it has loaded.
    sizes = translate("en", "sidebar.size", d_model=16, heads=2, layers=1, d_ff=32)
    assert sizes not in sidebar_text(at)
    at.button(key="open_trained").click().run()
    assert not at.exception
    # The picker holds it, and the page is that model's, not only the picker's label.
    assert at.selectbox(key="model").value == "yours:shown"
    assert sizes in sidebar_text(at)
