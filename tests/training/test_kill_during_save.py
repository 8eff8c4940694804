"""kill -9 while models are being saved: nothing the picker lists is ever corrupt or half-written.

A replica can die at any instant (out of memory, a node lost, `kubectl delete --force`). The models
folder is shared by every replica, so a half-written file there would break every student's picker.
Here a process saves real checkpoints through tfviz's own save path (save_checkpoint, then the
training timeline beside the model, in TrainWork's order; new names with overwrite=False as the app
does, and overwrites of a few names) and is killed with SIGKILL at random moments. After every kill
the folder is read through the picker's own listing and loading code (ui.models.checkpoints_in)
and every timeline through load_timeline: each must load, and only `.*.tmp` files may be left over.

To make 20+ kills fit in a few seconds, one process imports torch once and forks a saver per
round; the saver is what gets killed (a forked child runs the same save code as a fresh process).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tfviz.training.checkpoint import load_checkpoint
from tfviz.training.timeline import SUFFIX as TIMELINE_SUFFIX
from tfviz.training.timeline import load_timeline

KILLS = 24
TIME_LIMIT_S = 45  # whole kill loop, generous for 2 loaded cores (it takes ~5 s alone)

# Reads "go <round>" lines; for each, forks a child that saves for ever (until killed), prints
# the child's pid, reaps it and prints how it ended. Models differ in size between rounds and
# names, so a file cut short or mixed from two saves cannot pass for a whole one.
SAVER = r"""
import os, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from tfviz.training.checkpoint import save_checkpoint
from tfviz.core.config import ModelConfig
from tfviz.core.model import Encoder
from tfviz.core.tasks import get_task
from tfviz.training.timeline import Timeline, save_timeline, timeline_path

folder = Path(sys.argv[1])
task = get_task("reverse")

def model(d_model, seed):
    torch.manual_seed(seed)
    cfg = task.model_config(d_model=d_model, n_heads=2, n_layers=1, d_ff=2 * d_model, dropout=0.0)
    return Encoder(cfg)

def save_forever(rnd):
    i = 0
    while True:
        m = model(16 * (1 + (rnd + i) % 4), rnd * 1000 + i)
        timeline = Timeline(every=1, max_snapshots=4)
        for step in range(3):
            timeline.record(step, m)
        # A new name, as a training saves it: never over an existing file, timeline after it.
        path = folder / f"new-{rnd}-{i}.safetensors"
        save_checkpoint(path, m, "reverse", {"round": rnd, "i": i}, {}, overwrite=False)
        save_timeline(timeline_path(path), timeline)
        # And the same few names over and over: a kill mid-replace must keep the old file.
        for name in ("again-a", "again-b"):
            save_checkpoint(folder / f"{name}.safetensors", m, "reverse", {"i": i})
        i += 1
        if i >= 3:  # the folder stays small enough to check after every kill
            i = 0
            for p in folder.glob(f"new-{rnd}-*"):
                p.unlink()

print("ready", flush=True)
for line in sys.stdin:
    rnd = int(line.split()[1])
    pid = os.fork()
    if pid == 0:
        try:
            save_forever(rnd)
        except BaseException:
            import traceback
            traceback.print_exc()
        os._exit(3)  # only if saving failed: the test sees a status other than SIGKILL
    print(pid, flush=True)
    _, status = os.waitpid(pid, 0)
    print(os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status), flush=True)
"""


def picker_listing(folder: Path) -> tuple[list[str], list[str]]:
    """What the app's model picker offers from folder and what it skips, through its own code."""
    from tfviz.ui.models import checkpoints_in

    problems: list[str] = []
    entries = checkpoints_in(folder, "yours", "cpu", problems)
    return [e.name for e in entries], problems


def check_folder(folder: Path) -> tuple[int, int]:
    """Assert every file a reader would open loads; returns (files checked, temp files left)."""
    names, problems = picker_listing(folder)
    assert problems == [], f"the picker skipped broken files: {problems}"
    visible = sorted(p.stem for p in folder.glob("*.safetensors") if not p.name.startswith("."))
    assert sorted(names) == visible, "the picker left out a file or listed one that is not there"
    leftovers = 0
    checked = len(names)
    for path in folder.iterdir():
        if path.name.startswith(".") and path.name.endswith(".tmp"):
            leftovers += 1  # a killed writer's own temporary file: nothing reads it
        elif path.suffix == ".safetensors":
            load_checkpoint(path)  # uncached, on top of the picker's (cached by digest) load
        elif path.suffix == TIMELINE_SUFFIX:
            model_path = path.with_suffix(".safetensors")
            if model_path.exists():  # its model may have been removed by the saver's cleanup
                _, meta = load_checkpoint(model_path)
                load_timeline(path, meta.config)
                checked += 1
        else:
            pytest.fail(f"an unexpected file in the models folder: {path.name}")
    return checked, leftovers


def test_kill_9_at_random_moments_never_leaves_a_broken_model(tmp_path):
    folder = tmp_path / "user_models"
    folder.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", SAVER, str(folder)],
        cwd=ROOT,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "saver.log").open("w"),
        text=True,
    )
    watchdog = threading.Timer(110, proc.kill)  # a hung saver must not hang the test run
    watchdog.daemon = True
    watchdog.start()

    def line() -> str:
        out = proc.stdout.readline()
        assert out, f"the saver ended early: {(tmp_path / 'saver.log').read_text()[-2000:]}"
        return out.strip()

    rng = random.Random(17)
    checked = mid_write = 0
    try:
        assert line() == "ready"
        start = time.monotonic()
        for rnd in range(KILLS):
            assert time.monotonic() - start < TIME_LIMIT_S, f"only {rnd} kills in time"
            proc.stdin.write(f"go {rnd}\n")
            proc.stdin.flush()
            pid = int(line())
            # Long enough for several saves, short enough to land anywhere within one.
            time.sleep(rng.uniform(0.02, 0.3))
            os.kill(pid, signal.SIGKILL)
            ended = int(line())
            assert ended == signal.SIGKILL, f"the saver failed on its own (status {ended})"
            files, leftovers = check_folder(folder)
            checked += files
            mid_write += leftovers > 0
            for tmp in folder.glob(".*.tmp"):  # what docs/deploy.md tells operators to do
                tmp.unlink()
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        watchdog.cancel()
        proc.kill()
    print(f"{KILLS} kills, {checked} files checked, {mid_write} kills left a temp file")
    assert checked >= KILLS  # the saver got something saved before most kills
    # Some kills must have landed in the middle of a write, or this test proved nothing.
    assert mid_write >= 1, "no kill left a temporary file: none landed mid-write"


def test_the_picker_ignores_a_killed_writers_temp_files(tmp_path):
    from tests.conftest import make_model
    from tfviz.core.tasks import get_task
    from tfviz.training.checkpoint import save_checkpoint

    task = get_task("reverse")
    model = make_model(vocab_size=task.vocab_size, n_out=task.n_out, max_len=task.positions)
    data = save_checkpoint(tmp_path / "whole.safetensors", model, "reverse").read_bytes()
    # What a kill mid-write leaves: a truncated temp file, named as write_atomic names it.
    (tmp_path / ".whole.safetensors.abcd1234.tmp").write_bytes(data[: len(data) // 2])
    (tmp_path / ".next.safetensors.efgh5678.tmp").write_bytes(data[:100])
    names, problems = picker_listing(tmp_path)
    assert (names, problems) == (["whole"], [])
