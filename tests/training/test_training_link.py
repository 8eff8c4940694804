"""A page that was training and is loaded again (a reload, or a reconnect to another replica after
its server died) learns what became of that training: the address holds the name while it trains
(`training=`), and the new session finds the job again, or says the model was saved, or says the
training was lost with its server and nothing was saved."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import APP, start_app, submit_training, wait_until
from tests.ui.test_share import open_link
from tfviz.serve import jobs, work
from tfviz.ui import share

pytestmark = pytest.mark.usefixtures("fresh_app")
SORT = (Path(APP).parent / "models" / "sort.safetensors").read_bytes()


def reconnect(name: str, lang: str | None = None) -> AppTest:
    """A new session opened on the address a training page had written."""
    return open_link(training=name, **({"lang": lang} if lang else {}))


def warnings(at: AppTest) -> str:
    return " ".join(w.value.replace("\\", "") for w in at.warning)


def test_the_address_names_the_training_while_it_runs():
    at = start_app("Train")
    job = submit_training(at, "in_address", 20_000)
    try:
        at.run()
        assert at.query_params["training"] == "in_address"
    finally:
        job.cancel()
        assert job.wait(30)
    at.run()
    assert "training" not in at.query_params  # over: the address no longer names it


def test_a_reconnect_to_the_server_that_trains_takes_the_job_back():
    first = start_app("Train")
    job = submit_training(first, "still_going", 20_000)
    try:
        second = reconnect("still_going")
        assert second.session_state["train_job"] is job
        assert "still running" in warnings(second)
    finally:
        job.cancel()
        assert job.wait(30)


def test_a_reconnect_after_it_finished_says_the_model_is_in_the_picker(fresh_app):
    fresh_app.mkdir(parents=True, exist_ok=True)
    (fresh_app / "done_meanwhile.safetensors").write_bytes(SORT)
    at = reconnect("done_meanwhile")
    assert "finished while you were away" in warnings(at)
    assert "done_meanwhile (yours)" in at.selectbox(key="model").options


@pytest.mark.parametrize("lang, words", [("en", "was lost"), ("zh", "丢失")])
def test_a_reconnect_to_another_server_says_the_training_was_lost(lang, words):
    at = reconnect("died_with_its_server", lang)
    shown = warnings(at)
    assert words in shown and "died_with_its_server" in shown
    assert "train_job" not in at.session_state
    at.run()
    assert "training" not in at.query_params  # said once; the address forgets it


def test_a_name_that_no_model_could_have_is_refused_inertly():
    at = reconnect("../../etc/passwd")
    assert "no model name" in warnings(at)
    assert "train_job" not in at.session_state


def test_the_key_is_part_of_the_links_vocabulary():
    parsed = share.parse_query({"training": "abc_1"}, views=[], steps=[])
    assert parsed.training == "abc_1" and not parsed.notices
    query = share.query_of(
        model="bundled:reverse",
        sequence="ab",
        sentence_b=None,
        interventions=jobs_none(),
        view=None,
        step=None,
        training="abc_1",
    )
    assert query["training"] == "abc_1"


def jobs_none():
    from tfviz.core.interventions import NONE

    return NONE


def test_training_lookup_finds_only_active_trainings(tmp_path):
    manager = jobs.JobManager(max_jobs=1, max_queue=1)
    spec = work.JobSpec(
        task="reverse", name="looked_up", steps=20_000, d_model=16, n_heads=2, n_layers=1, d_ff=32
    )
    job = manager.submit(work.TrainWork(spec, tmp_path, device="cpu"))
    try:
        assert manager.training("looked_up") is job
        assert manager.training("other") is None
    finally:
        job.cancel()
        assert job.wait(30)
    wait_until(lambda: manager.training("looked_up") is None)
