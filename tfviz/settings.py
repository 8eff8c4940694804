"""Settings in one place: every environment variable the server reads, every limit it enforces,
and the training defaults.

A classroom server is configured through the environment (Dockerfile, Kubernetes manifests,
compose file). Each variable is named and parsed here, with a message that says what is allowed,
so an operator's typo stops the server with a sentence rather than a traceback deep in a job.
The readers take the environment when called (cheap), so tests and operators can change it
between calls.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tfviz.refusal import Refusal

# ---- environment variables -----------------------------------------------------------------------
USER_MODELS_ENV = "TFVIZ_USER_MODELS"  # folder of models trained in the app (shared by replicas)
MAX_JOBS_ENV = "TFVIZ_MAX_JOBS"  # trainings and experiment reruns running at once
MAX_QUEUE_ENV = "TFVIZ_MAX_QUEUE"  # jobs allowed to wait for a slot
UPLOAD_MB_ENV = "TFVIZ_MAX_UPLOAD_MB"  # largest uploaded checkpoint
DRAIN_SECONDS_ENV = "TFVIZ_DRAIN_SECONDS"  # on SIGTERM, how long running jobs may finish
PRETRAINED_DIR_ENV = "TFVIZ_PRETRAINED_DIR"  # folder of model folders (BERT, RoBERTa, DistilBERT)

# ---- limits --------------------------------------------------------------------------------------
MAX_PARAMS = 5_000_000  # one uploaded or trained model on a shared classroom server
MAX_CHECKPOINT_BYTES = 64 * 1024 * 1024  # no bundled model is over 1 MB: a larger file is refused
MAX_STEPS = 20_000  # training: about ten minutes for a bundled-size model on one CPU core
RETRAIN_MAX_STEPS = 5000  # W_o alone trains fast; a few hundred steps show the recovery
EXPERIMENT_MAX_SEEDS = 5  # per condition; the shipped results use 5
EXPERIMENT_MAX_STEPS = 2000  # per run of an experiment rerun
MAX_SEED = 2**31 - 1
MIN_LR, MAX_LR = 1e-5, 1.0
DEFAULT_MAX_QUEUE = 8
DEFAULT_UPLOAD_MB = 20  # as server.maxUploadSize in .streamlit/config.toml
MAX_UPLOAD_MB = 1024
# A rolling update's SIGTERM lets running jobs finish for this long before the server stops. Two
# minutes covers every Train-form default (seconds on one core) many times over and a long custom
# training's last stretch. deploy/k8s (terminationGracePeriodSeconds, after the preStop pause) and
# deploy/compose (stop_grace_period) give the process more than this; tests/deploy/test_drain.py
# checks.
DEFAULT_DRAIN_SECONDS = 120
MAX_DRAIN_SECONDS = 3600

# ---- training defaults ---------------------------------------------------------------------------
# What tfviz.training.train.train and tfviz.training.ensemble.train_runs use unless told otherwise
# (seed 002's Adam learning rate and batch size; a cosine schedule with warm-up; gradient-norm clip
# 1).
TRAINING = {"steps": 1000, "batch_size": 64, "lr": 1e-3, "schedule": "cosine", "clip": 1.0}


class SettingError(Refusal, ValueError):
    """A server setting (an environment variable) that cannot be used: its code and values, worded
    by the catalogue (keys "refusal.setting.<code>") in each page's language; str() is the
    English, for the server's log. A ValueError too, as the readers always raised."""

    PREFIX = "refusal.setting."


def user_models_dir(root: Path, environ: Mapping[str, str] = os.environ) -> Path:
    """Where models trained in the app are saved: $TFVIZ_USER_MODELS, else root/user_models."""
    return Path(environ.get(USER_MODELS_ENV) or root / "user_models")


def pretrained_dir(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The server's folder of pretrained model folders ($TFVIZ_PRETRAINED_DIR), or None when
    unset. Each subfolder is one model in the Hugging Face layout (tfviz.hf); a path that is not
    a folder stops the server's picker with a sentence, not a traceback."""
    raw = environ.get(PRETRAINED_DIR_ENV, "").strip()
    if not raw:
        return None
    path = Path(raw)
    if not path.is_dir():
        raise SettingError("not_folder", name=PRETRAINED_DIR_ENV, value=repr(raw))
    return path


def max_jobs(environ: Mapping[str, str] = os.environ) -> int:
    """Jobs allowed to run at once: $TFVIZ_MAX_JOBS, else one per CPU core this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return _env_int(environ, MAX_JOBS_ENV, cores or 1, minimum=1)


def max_queue(environ: Mapping[str, str] = os.environ) -> int:
    """Jobs allowed to wait for a free slot: $TFVIZ_MAX_QUEUE, else DEFAULT_MAX_QUEUE."""
    return _env_int(environ, MAX_QUEUE_ENV, DEFAULT_MAX_QUEUE, minimum=0)


def upload_mb(environ: Mapping[str, str] = os.environ) -> int:
    """Largest upload in MB asked for: $TFVIZ_MAX_UPLOAD_MB, else DEFAULT_UPLOAD_MB (the app
    also caps it by Streamlit's server.maxUploadSize, which refuses larger bodies anyway)."""
    raw = environ.get(UPLOAD_MB_ENV, "").strip()
    if not raw:
        return DEFAULT_UPLOAD_MB
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_UPLOAD_MB:
        raise SettingError("upload_mb", name=UPLOAD_MB_ENV, most=MAX_UPLOAD_MB, value=repr(raw))
    return int(raw)


def drain_seconds(environ: Mapping[str, str] = os.environ) -> int:
    """Seconds a stopping server (SIGTERM) waits for running jobs: $TFVIZ_DRAIN_SECONDS, else
    DEFAULT_DRAIN_SECONDS; 0 stops at once."""
    value = _env_int(environ, DRAIN_SECONDS_ENV, DEFAULT_DRAIN_SECONDS, minimum=0)
    if value > MAX_DRAIN_SECONDS:
        raise SettingError(
            "drain_seconds", name=DRAIN_SECONDS_ENV, most=MAX_DRAIN_SECONDS, value=value
        )
    return value


def _env_int(environ: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingError("not_integer", name=name, least=minimum, value=repr(raw)) from None
    if value < minimum:
        raise SettingError("not_integer", name=name, least=minimum, value=repr(raw))
    return value
