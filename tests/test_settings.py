"""tfviz.settings: every environment variable parsed in one place, with messages that say why."""

from __future__ import annotations

import os

import pytest

from tfviz import settings


def test_defaults_without_the_environment(tmp_path):
    assert settings.upload_mb({}) == settings.DEFAULT_UPLOAD_MB
    assert settings.max_queue({}) == settings.DEFAULT_MAX_QUEUE
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert settings.max_jobs({}) == cores
    assert settings.user_models_dir(tmp_path, {}) == tmp_path / "user_models"


def test_values_from_the_environment(tmp_path):
    env = {
        settings.UPLOAD_MB_ENV: " 5 ",
        settings.MAX_JOBS_ENV: "2",
        settings.MAX_QUEUE_ENV: "0",
        settings.USER_MODELS_ENV: str(tmp_path / "shared"),
    }
    assert settings.upload_mb(env) == 5
    assert (settings.max_jobs(env), settings.max_queue(env)) == (2, 0)
    assert settings.user_models_dir(tmp_path, env) == tmp_path / "shared"


@pytest.mark.parametrize("raw", ["0", "1025", "2.5", "-3", "lots", "５"])
def test_a_bad_upload_limit_says_what_is_allowed(raw):
    with pytest.raises(ValueError, match="TFVIZ_MAX_UPLOAD_MB must be a whole number of MB from 1"):
        settings.upload_mb({settings.UPLOAD_MB_ENV: raw})


def test_every_training_path_takes_its_defaults_from_one_place():
    import inspect

    from tfviz.ensemble import train_runs
    from tfviz.trainer import train

    for fn in (train, train_runs):
        params = inspect.signature(fn).parameters
        for key, value in settings.TRAINING.items():
            assert params[key].default == value, (fn.__name__, key)
