"""tfviz.settings: every environment variable parsed in one place, with messages that say why."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tfviz import settings

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_without_the_environment(tmp_path):
    # The documented defaults, written out here rather than read back from tfviz.settings.
    # README: "TFVIZ_MAX_UPLOAD_MB (default 20; it cannot exceed server.maxUploadSize in
    # .streamlit/config.toml)", and that file allows 20 MB.
    assert settings.upload_mb({}) == 20
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == 20
    # docs/deploy.md: "each replica queues 8 more (TFVIZ_MAX_QUEUE)".
    assert settings.max_queue({}) == 8
    # README: "TFVIZ_MAX_JOBS (... default one per core)": the cores this process may use, as
    # coreutils' nproc counts them (it honours the CPU affinity, as a container's cpuset sets).
    nproc = shutil.which("nproc")
    if nproc:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}  # nproc obeys
        cores = int(subprocess.run([nproc], capture_output=True, text=True, env=env).stdout)
    else:
        cores = os.cpu_count()
    assert settings.max_jobs({}) == cores
    # README: "TFVIZ_DRAIN_SECONDS (default 120 ...)".
    assert settings.drain_seconds({}) == 120
    # README: "TFVIZ_USER_MODELS (where trained models go, default user_models/)".
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

    from tfviz.training.ensemble import train_runs
    from tfviz.training.train import train

    for fn in (train, train_runs):
        params = inspect.signature(fn).parameters
        for key, value in settings.TRAINING.items():
            assert params[key].default == value, (fn.__name__, key)


def test_the_pretrained_folder_is_optional_and_must_be_a_folder(tmp_path):
    assert settings.pretrained_dir({}) is None
    assert settings.pretrained_dir({settings.PRETRAINED_DIR_ENV: "  "}) is None
    assert settings.pretrained_dir({settings.PRETRAINED_DIR_ENV: str(tmp_path)}) == tmp_path
    with pytest.raises(ValueError, match="TFVIZ_PRETRAINED_DIR must name a folder"):
        settings.pretrained_dir({settings.PRETRAINED_DIR_ENV: str(tmp_path / "missing")})
