"""The W_o atlas (issue 29): the plan and its keys, one run (seeded, arms that differ in W_o
alone, stopping at the target), the designed task, rows on disk (torn lines, first row wins), the
statistics (Welch, Holm), the bundled rows, and the sweep on Dask: the same numbers as without
Dask, through --scheduler, and a sweep whose worker and then client are killed, resumed, with
every run there exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import wait_until
from tfviz.cli import atlas as cli
from tfviz.core.model import Encoder
from tfviz.experiments import atlas, atlas_stats
from tfviz.experiments.atlas_store import BUNDLED, RowWriter, read_rows
from tfviz.experiments.stats import holm, welch_p_value

ROOT = Path(__file__).resolve().parents[2]
TINY = atlas.Cell("sort", n_layers=1, ffn=False, n_heads=2, d_model=16)


def tiny(arm: str = "learned", seed: int = 0, budget: int = 20, cell=TINY) -> dict:
    return atlas.RunSpec(cell, arm, seed, budget).to_dict()


def without_time(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "seconds"}


# ---- plan and keys -------------------------------------------------------------------------------
def test_the_core_plan_covers_every_task_and_architecture_with_four_arms_and_five_seeds():
    specs = atlas.plan("core")
    cells = {s.cell for s in specs}
    assert {c.task for c in cells} == set(atlas.ATLAS_TASKS) and len(atlas.ATLAS_TASKS) == 7
    assert {(c.n_layers, c.ffn, c.n_heads) for c in cells} == {
        (layers, ffn, heads) for layers in (1, 2) for ffn in (False, True) for heads in (1, 4)
    }
    for cell in cells:
        arms = {s.arm for s in specs if s.cell == cell}
        assert {*atlas.MAIN_ARMS, "frozen"} <= arms
        assert (atlas.MECHANISM_ARM in arms) == (
            cell.n_layers == 1 and not cell.ffn and cell.n_heads > 1
        )
        for arm in arms:
            assert sorted(s.seed for s in specs if s.cell == cell and s.arm == arm) == list(
                range(5)
            )
    keys = [s.key for s in specs]
    assert len(set(keys)) == len(keys)
    full = atlas.plan("full")
    assert {c.n_heads for c in {s.cell for s in full}} == {1, 2, 4, 8}
    assert {(s.cell.norm, s.cell.d_model) for s in full} == {
        (n, d) for n in ("post", "pre") for d in (32, 64)
    }
    assert "frozen" in {s.arm for s in full}


def test_keys_round_trip_and_bad_specs_are_refused():
    spec = atlas.RunSpec(TINY, "identity", 3, 40)
    assert atlas.RunSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert atlas.Cell.from_key(TINY.key) == TINY
    with pytest.raises(ValueError, match="arm must be one of"):
        atlas.RunSpec(TINY, "none", 0)
    with pytest.raises(ValueError, match="not divisible"):
        atlas.Cell("sort", n_heads=3, d_model=16)
    with pytest.raises(ValueError, match="unknown atlas task"):
        atlas.Cell("nope")
    with pytest.raises(ValueError, match="not an atlas cell key"):
        atlas.Cell.from_key("sort/L1")


# ---- one run -------------------------------------------------------------------------------------
def test_a_run_is_a_function_of_its_spec_and_arms_differ_in_w_o_alone():
    a, b = atlas.run_one(tiny()), atlas.run_one(tiny())
    assert without_time(a) == without_time(b)
    assert (
        a["steps"] == 20
        and len(a["curve"]) == 2
        and a["key"] == atlas.RunSpec.from_dict(tiny()).key
    )
    models = {arm: atlas.build(atlas.RunSpec.from_dict(tiny(arm)))[0] for arm in atlas.ARMS}
    ref = models["learned"].state_dict()
    for arm, model in models.items():
        enc = model.encoder if arm == atlas.MECHANISM_ARM else model
        for name, value in enc.state_dict().items():
            if ".W_o." not in name:  # every weight but W_o starts the same in every arm
                assert torch.equal(value, ref[name]), (arm, name)
    first = {arm: atlas.run_one(tiny(arm, budget=5))["curve"] for arm in ("learned", "frozen")}
    assert first["learned"] != first["frozen"]  # W_o trained or not changes the run


def test_the_frozen_arm_never_moves_w_o_and_identity_passes_concat_on():
    spec = atlas.RunSpec(TINY, "frozen", 0, 5)
    model, params, switches = atlas.build(spec)
    W = model.layers[0].attn.W_o.weight
    assert all(p is not W for p in params) and switches == {"w_o": "learned"}
    _, _, sw = atlas.build(atlas.RunSpec(TINY, "identity", 0, 5))
    assert sw == {"w_o": "identity"}


def test_a_run_stops_at_its_target_and_says_when():
    cell = atlas.Cell("balanced", n_layers=1, ffn=True, n_heads=2, d_model=16)
    row = atlas.run_one(tiny(cell=cell, budget=400))
    if row["steps_to_target"] is not None:
        assert row["steps"] == row["steps_to_target"] < 400
        assert atlas.reached("balanced", row["checks"][-1][1])
    else:  # censored: ran the whole budget, every look below the target
        assert row["steps"] == 400 and not any(
            atlas.reached("balanced", v) for _, v in row["checks"]
        )
    assert [s for s, _ in row["checks"]] == list(range(50, row["steps"] + 1, 50)) or row[
        "steps"
    ] % 50


def test_the_readout_arm_reads_the_attention_output_through_its_own_map():
    model, params, switches = atlas.build(atlas.RunSpec(TINY, atlas.MECHANISM_ARM, 0, 5))
    ids = torch.randint(0, 10, (3, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = model(ids, None, trace=False, **switches).logits
        plain = model.encoder(ids, None, trace=True, **switches)
        concat = plain.trace.layers[-1].concat
        want = plain.logits + model.readout(concat)
    assert torch.allclose(out, want, atol=1e-6)
    assert any(p is model.readout.weight for p in params)


# ---- a layer without a feed-forward net ----------------------------------------------------------
def test_a_layer_without_ffn_is_attention_add_and_norm_only():
    config = atlas.Cell("sort", n_layers=1, ffn=False, n_heads=2, d_model=16).model_config()
    model = Encoder(config).eval()
    assert not hasattr(model.layers[0], "ff") and config.n_params == sum(
        p.numel() for p in model.parameters()
    )
    ids = torch.randint(0, 10, (2, 5), generator=torch.Generator().manual_seed(1))
    out = model(ids)
    lt = out.trace.layers[0]
    want = model.layers[0].norm1(lt.resid_pre + lt.attn_out)
    assert torch.allclose(lt.resid_out, want, atol=1e-6) and torch.equal(lt.resid_out, lt.resid_mid)


# ---- the designed task ---------------------------------------------------------------------------
def test_difference_needs_two_tokens_combined_before_a_non_linearity():
    """No sum of logits f(first) + g(last) gets (first - last) mod 10 right: the best such sum,
    fitted on all 100 pairs, stays far below what a table of the pair reaches (100%)."""
    task = atlas.get_task("difference")
    batch = task.sample(200, np.random.default_rng(0))
    sym, lengths = batch.ids[:, 1:] if task.bos else batch.ids, batch.lengths
    first = sym[:, 0]
    last = sym[torch.arange(len(sym)), lengths - 1]
    assert torch.equal(batch.target, (first - last) % 10)
    a, b = torch.meshgrid(torch.arange(10), torch.arange(10), indexing="ij")
    a, b = a.flatten(), b.flatten()
    y = (a - b) % 10
    torch.manual_seed(0)
    f = torch.zeros(10, 10, requires_grad=True)
    g = torch.zeros(10, 10, requires_grad=True)
    opt = torch.optim.Adam([f, g], lr=0.1)
    for _ in range(1500):
        loss = torch.nn.functional.cross_entropy(f[a] + g[b], y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    additive = ((f[a] + g[b]).argmax(-1) == y).float().mean().item()
    assert additive < 0.5, additive
    # And a single head averaging the two sees e(first) + e(last): the same for (a, b) and (b, a)
    # while the answer differs for every a != b.
    assert ((a - b) % 10 != (b - a) % 10)[a != b].float().mean() > 0.85


# ---- rows on disk --------------------------------------------------------------------------------
def test_rows_survive_a_torn_line_and_the_first_row_of_a_key_wins(tmp_path):
    path = tmp_path / "runs.jsonl"
    rows = [{"format": atlas.FORMAT, "key": f"k{i}", "v": i} for i in range(3)]
    with RowWriter(path) as w:
        for row in rows[:2]:
            w.append(row)
    with path.open("ab") as f:
        f.write(b'{"format": "tfviz-atlas/1", "key": "torn"')  # a kill in mid-write
    with RowWriter(path) as w:
        w.append(rows[2])
        w.append({**rows[0], "v": 99})  # written twice: counted once, the first
    got = read_rows(path)
    assert list(got) == ["k0", "k1", "k2"] and got["k0"]["v"] == 0
    assert read_rows(tmp_path / "none.jsonl") == {}


# ---- statistics ----------------------------------------------------------------------------------
def test_welch_p_value_and_holm_match_hand_computed_values():
    # t = -2, df = 8: two-sided p = 0.0805 (scipy.stats.ttest_ind(..., equal_var=False)).
    assert welch_p_value([1, 2, 3, 4, 5], [3, 4, 5, 6, 7]) == pytest.approx(0.080516, abs=1e-5)
    assert holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])


def _row(cell, arm, seed, steps, loss=0.1, metric=0.99, budget=1000):
    return {
        "format": atlas.FORMAT,
        "key": f"{cell}/{arm}/s{seed}",
        "cell": cell,
        "arm": arm,
        "seed": seed,
        "metric": "accuracy",
        "budget": budget,
        "steps_to_target": steps,
        "final_loss": loss,
        "metric_value": metric,
        "curve": [loss],
        "curve_every": 10,
    }


def test_a_cell_is_read_only_when_trained_and_verdicts_follow_holm():
    fast, slow, untrained = (
        "sort/L1/noffn/H4/D64/post",
        "reverse/L1/noffn/H4/D64/post",
        "sum/L1/noffn/H4/D64/post",
    )
    rows = []
    for s in range(5):
        rows += [_row(fast, "learned", s, 200 + s), _row(fast, "identity", s, 400 + 3 * s)]
        a, b = (300, 320, 310, 330, 290)[s], (310, 300, 325, 295, 315)[s]
        rows += [_row(slow, "learned", s, a), _row(slow, "identity", s, b)]
        rows += [
            _row(untrained, "learned", s, None if s else 500),
            _row(untrained, "identity", s, None),
        ]
    res = atlas_stats.analyse(rows)
    assert res[fast].verdict("identity") == "helps"
    assert res[slow].verdict("identity") == "unclear"
    assert res[untrained].verdict("identity") == "not_trained" and not res[untrained].trained
    assert atlas_stats.family_size(res, "identity") == 2  # Holm's m: trained cells only
    comp = res[fast].comparisons[("identity", "steps")]
    assert comp.p_holm == pytest.approx(min(1.0, 2 * comp.p)) or comp.p_holm >= comp.p
    censored = res[untrained].comparisons[("identity", "steps")]
    assert censored.censored == 9 and censored.other == (1000.0,) * 5


def test_the_largest_difference_is_the_trained_cells_largest_in_size_with_its_interval():
    fast, slow, untrained = (
        "sort/L1/noffn/H4/D64/post",
        "reverse/L1/noffn/H4/D64/post",
        "sum/L1/noffn/H4/D64/post",
    )
    rows = []
    for s in range(5):
        rows += [_row(fast, "learned", s, 200 + s), _row(fast, "identity", s, 400 + 3 * s)]
        rows += [_row(slow, "learned", s, 300 + 5 * s), _row(slow, "identity", s, 310 - 5 * s)]
        # Untrained: a huge gap, but not a finding (its learned arm did not all reach the target).
        rows += [_row(untrained, "learned", s, None), _row(untrained, "identity", s, 100)]
    res = atlas_stats.analyse(rows)
    c = atlas_stats.largest_difference(res, "identity")
    assert c.cell == fast and c.difference == pytest.approx(np.mean(range(200, 205)) - 406)
    assert c.interval.low <= c.difference <= c.interval.high
    assert atlas_stats.largest_difference(res, "identity", task="reverse").cell == slow
    assert atlas_stats.largest_difference(res, "identity", task="sum") is None


# ---- the bundled atlas ---------------------------------------------------------------------------
def test_the_bundled_rows_are_whole_and_their_cells_are_in_the_plan():
    rows = read_rows(BUNDLED)
    assert rows, "models/atlas/runs.jsonl holds the bundled atlas"
    plan = {s.key for s in atlas.plan("core")}
    assert set(rows) <= plan
    for key, row in rows.items():
        assert row["key"] == key and row["steps"] <= row["budget"]
        assert (row["steps_to_target"] is None) or row["steps_to_target"] == row["steps"]
        assert np.isfinite(row["final_loss"]) and row["curve"]


# ---- the sweep on Dask ---------------------------------------------------------------------------
def _cli(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "tfviz.cli.atlas", "run", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the test can kill it and its workers
        **kw,
    )


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def test_a_run_on_a_dask_cluster_through_scheduler_equals_the_run_without_dask(tmp_path):
    from dask.distributed import LocalCluster

    out = tmp_path / "runs.jsonl"
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster:
        proc = _cli(
            "--tasks",
            "sort",
            "--seeds",
            "1",
            "--budget",
            "5",
            "--out",
            str(out),
            "--scheduler",
            cluster.scheduler_address,
        )
        try:
            log, _ = proc.communicate(timeout=300)
        finally:
            _kill_group(proc)
    assert proc.returncode == 0, log
    rows = read_rows(out)
    assert set(rows) == {
        s.key
        for s in cli.todo(
            [atlas.RunSpec(s.cell, s.arm, s.seed, 5) for s in atlas.plan("core", 1, ("sort",))],
            tmp_path / "nothing.jsonl",
        )
    }
    spec = next(iter(rows.values()))
    direct = atlas.run_one(atlas.RunSpec.from_dict(_spec_of(spec)).to_dict())
    assert without_time(direct) == without_time(spec)


def _spec_of(row: dict) -> dict:
    cell = atlas.Cell.from_key(row["cell"])
    return atlas.RunSpec(cell, row["arm"], row["seed"], row["budget"]).to_dict()


def _lines_per_key(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in path.read_bytes().splitlines():
        try:
            key = json.loads(line)["key"]
        except (json.JSONDecodeError, KeyError):
            continue
        counts[key] = counts.get(key, 0) + 1
    return counts


def _wait_rows(path: Path, n: int, proc: subprocess.Popen, timeout: float = 240) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        have = len(read_rows(path))
        if have >= n or proc.poll() is not None:
            return have
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} rows after {timeout} s")


# Steps a run of the kill test trains: what is tested is the sweep's bookkeeping (every run once
# across a killed worker and a killed client), which does not depend on how long a run learns.
KILL_BUDGET = 30


def test_a_sweep_killed_worker_then_client_resumes_with_every_run_once(tmp_path):
    import psutil

    out = tmp_path / "runs.jsonl"
    args = (
        "--tasks",
        "sort",
        "--seeds",
        "1",
        "--budget",
        str(KILL_BUDGET),
        "--out",
        str(out),
        "--workers",
        "2",
    )
    plan = atlas.plan("core", 1, ("sort",))
    specs = [atlas.RunSpec(s.cell, s.arm, s.seed, KILL_BUDGET) for s in plan]
    proc = _cli(*args)
    try:
        _wait_rows(out, 3, proc)
        workers = [
            p
            for p in psutil.Process(proc.pid).children(recursive=True)
            if "multiprocessing" in " ".join(p.cmdline())
            and "resource_tracker" not in " ".join(p.cmdline())
        ]
        assert workers, "the LocalCluster's worker processes"
        at_kill = len(read_rows(out))
        workers[0].kill()  # kill -9 of a worker mid-run: the nanny starts another, Dask reruns
        _wait_rows(out, at_kill + 4, proc)
        assert len(read_rows(out)) >= at_kill + 4
    finally:
        _kill_group(proc)  # kill -9 of the client (and what it started) mid-sweep
    before = read_rows(out)
    assert 0 < len(before) < len(specs), "killed mid-way"
    proc = _cli(*args)
    try:
        log, _ = proc.communicate(timeout=300)
    finally:
        _kill_group(proc)
    assert proc.returncode == 0, log
    assert f"{len(specs) - len(before)} rows written" in log
    counts = _lines_per_key(out)
    assert set(counts) == {s.key for s in specs} and set(counts.values()) == {1}
    assert {k: without_time(v) for k, v in read_rows(out).items() if k in before} == {
        k: without_time(v) for k, v in before.items()
    }
    done = _cli(*args)
    log, _ = done.communicate(timeout=120)
    assert "nothing to do" in log


def test_plan_prints_the_runs_left_and_an_estimate(tmp_path, capsys):
    assert cli.main(["run", "--plan", "--grid", "full", "--out", str(tmp_path / "r.jsonl")]) == 0
    said = capsys.readouterr().out
    assert f"{len(atlas.plan('full'))} runs in the full grid" in said and " h of one core" in said
    assert cli.main(["run", "--plan", "--seeds", "0"]) == 2


# ---- a sweep started from the app: a job under the server's one manager ------------------------
def _sweep(tmp_path: Path, name: str, seeds: int = 2, cell: str = TINY.key):
    """An app sweep of a cell (a few steps a run) into tmp_path/name.jsonl."""
    from tfviz.serve import work

    return work.AtlasSweep(work.SweepSpec(cell, seeds, tmp_path / f"{name}.jsonl", budget=3))


def _started(sweep, timeout: float = 30) -> subprocess.Popen:
    """The sweep's process, once its job has started it."""
    end = time.monotonic() + timeout
    while sweep.process is None:
        assert time.monotonic() < end, "the sweep's process never started"
        time.sleep(0.05)
    return sweep.process


def _stop_every_job(m) -> None:
    for job in m.jobs():
        job.cancel()
        job.wait(60)


def test_an_app_sweep_is_a_job_of_the_one_manager_in_a_process_of_its_own(tmp_path):
    import psutil

    from tfviz.messages import Refused, say
    from tfviz.serve import jobs

    m = jobs.JobManager(max_jobs=1, max_queue=1)  # the server's one cap: one slot, one place
    try:
        a = _sweep(tmp_path, "a")
        first = m.submit(a)
        runs = len(atlas.plan_cells([TINY], 2))
        assert first.kind == "atlas_sweep" and first.state().total == runs
        process = _started(a)
        assert process.pid != os.getpid() and os.getpgid(process.pid) == process.pid  # own group
        with pytest.raises(Refused, match="still running"):
            m.submit(_sweep(tmp_path, "a"))  # a session's rows file: one sweep at a time
        b = _sweep(tmp_path, "b", seeds=5)
        second = m.submit(b)  # the slot is taken: a sweep waits like any job
        assert second.state().position == 1 and b.process is None
        with pytest.raises(jobs.QueueFull):
            m.submit(_sweep(tmp_path, "c"))  # and the queue is full, whatever the kind
        with pytest.raises(ValueError):
            m.submit(_sweep(tmp_path, "d", cell="sort/L9"))  # no such cell: nothing starts
        assert first.wait(240)
        snap = first.state()
        assert snap.status == jobs.DONE, snap.message
        assert snap.done == runs and snap.message == say("runs_finished", finished=runs)
        want = {atlas.RunSpec(s.cell, s.arm, s.seed, 3).key for s in atlas.plan_cells([TINY], 2)}
        assert set(read_rows(a.spec.out)) == want == set(snap.result)
        # The slot went to the waiting sweep; its progress is its rows; a stop ends its group.
        group = _started(b).pid
        wait_until(lambda: second.state().done >= 1, timeout=240)
        assert second.state().status == jobs.RUNNING and second.state().total == 25
        second.cancel()
        assert second.wait(30)
        snap = second.state()
        how_far = say("runs_kept", finished=snap.done, runs=25)
        assert snap.status == jobs.CANCELLED and snap.message == say("cancelled", how_far=how_far)
        assert b.process.poll() is not None and len(snap.result) == snap.done >= 1
        # The command and its workers are gone (a killed worker may be a zombie for a moment,
        # until the system reaps it: dead, nothing of it runs).
        wait_until(lambda: not _alive_in_group(psutil, group), timeout=10)
        assert m.counts() == (0, 0)
    finally:
        _stop_every_job(m)


def test_an_app_sweep_whose_command_fails_fails_with_the_catalogue_s_words(tmp_path, monkeypatch):
    from tfviz.experiments import atlas_runner
    from tfviz.messages import say
    from tfviz.serve import jobs

    fails = [sys.executable, "-c", "import sys; sys.exit(3)"]
    monkeypatch.setattr(atlas_runner, "sweep_command", lambda *args: fails)
    m = jobs.JobManager(max_jobs=1, max_queue=0)
    try:
        job = m.submit(_sweep(tmp_path, "a"))
        assert job.wait(60)
        snap = job.state()
        assert snap.status == jobs.FAILED
        assert snap.message == say("sweep_failed", exit_code=3, finished=0, runs=snap.total)
        assert m.counts() == (0, 0)  # its slot is free again
    finally:
        _stop_every_job(m)


def _alive_in_group(psutil, group: int) -> list:
    """The processes of the group that still run (a zombie has ended)."""
    alive = []
    for p in psutil.process_iter():
        try:
            if _in_group(p, group) and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


def _in_group(process, group: int) -> bool:
    try:
        return os.getpgid(process.pid) == group
    except ProcessLookupError:  # ended while the list was taken
        return False


def test_the_shipped_atlas_readme_is_written_from_the_shipped_rows():
    from tfviz.experiments import atlas_report

    want = atlas_report.readme()  # the toy atlas's rows, then the language atlas's
    assert (BUNDLED.parent / "README.md").read_text(encoding="utf-8") == want


def test_the_mechanism_hint_reads_untrained_cells_only_and_says_what_recovered():
    cell = "reverse/L1/noffn/H4/D64/post"
    rows = []
    for s in range(5):
        loss = (1.30, 1.32, 1.28, 1.31, 1.29)[s]
        rows += [
            _row(cell, "learned", s, None, loss=loss),
            _row(cell, "identity", s, None, loss=loss + 0.3),
            _row(cell, atlas.MECHANISM_ARM, s, None, loss=(1.31, 1.29, 1.30, 1.28, 1.32)[s]),
        ]
    res = atlas_stats.analyse(rows)
    assert not res[cell].trained and res[cell].verdict("identity") == "not_trained"
    hint = atlas_stats.mechanism_hint(res, "final_loss")
    assert hint == atlas_stats.Hint((cell,), (cell,), (cell,))
    assert atlas_stats.mechanism(res) == []  # no trained cell: no finding
    means = atlas_stats.arm_means(rows, [cell], ("learned", "identity"), "final_loss")
    assert means.mean[0] == pytest.approx([1.30, 1.60])
    # half-width = t(0.975, 4) * sd / sqrt(5) = 2.776 * 0.0158 / 2.236
    assert means.half_width[0, 0] == pytest.approx(
        2.7764 * np.std([1.30, 1.32, 1.28, 1.31, 1.29], ddof=1) / 5**0.5, rel=1e-3
    )
    counts = atlas_stats.verdict_counts(res, "identity", ffn=False)
    assert counts["not_trained"] == 1 and sum(counts.values()) == 1


# What a re-run shares with a bundled row on any processor. Training is chaotic and float kernels
# differ between processors (AVX2 against AVX-512): a row is bit for bit only on the machine that
# made it. Its bookkeeping is exact everywhere; its first steps agree to far better than REPLAY_LOSS
# (differences start near 1e-7 and grow slowly); its verdict (the target reached or not) holds, and
# the step it was reached at may move by a few checks (seen: 200 here, 250 on an AVX-512 machine).
REPLAY_FIELDS = ("format", "key", "cell", "arm", "seed", "task", "metric", "target", "budget",
                 "recipe", "curve_every")  # fmt: skip
REPLAY_LOSS = 1e-3  # the first curve point: the mean training loss of the first 10 steps
REPLAY_STEPS = 3 * atlas.CHECK_EVERY


def test_a_bundled_row_is_reproduced_by_its_spec_within_what_training_allows():
    """The shipped rows are what run_one computes: one cheap row run again; its bookkeeping
    equal, its first steps equal within REPLAY_LOSS, its verdict the same and its step to the
    target within REPLAY_STEPS (models/atlas/README.md says what a reader can reproduce)."""
    row = read_rows(BUNDLED)["balanced/L1/ffn/H4/D64/post/learned/s0"]
    spec = atlas.RunSpec(atlas.Cell.from_key(row["cell"]), row["arm"], row["seed"])
    again = atlas.run_one(spec.to_dict())
    assert {k: again[k] for k in REPLAY_FIELDS} == {k: row[k] for k in REPLAY_FIELDS}
    assert abs(again["curve"][0] - row["curve"][0]) < REPLAY_LOSS
    assert row["steps_to_target"] is not None and again["steps_to_target"] is not None
    assert abs(again["steps_to_target"] - row["steps_to_target"]) <= REPLAY_STEPS
    assert again["metric_value"] >= row["target"] - 0.02  # the held-out metric, at the target


# ---- the cells that did not train, given more steps ----------------------------------------------
UNTRAINED = "reverse/L1/noffn/H4/D64/post"  # 0 of 5 seeds reached the target in 1,000 steps


def longer_rows(budget: int, reached: dict[str, list[int | None]]) -> dict[str, dict]:
    """UNTRAINED's bundled rows made over as runs of a longer budget: reached[arm][seed] is the
    step the run reached the target at (None: never)."""
    bundled = read_rows(BUNDLED)
    out = {}
    for arm, steps in reached.items():
        for seed, step in enumerate(steps):
            row = dict(bundled[f"{UNTRAINED}/{arm}/s{seed}"])
            row.update(key=f"{row['key']}/b{budget}", budget=budget, steps_to_target=step)
            out[row["key"]] = row
    return out


def test_a_cell_that_did_not_train_is_read_at_a_longer_budget_only_if_every_seed_learned():
    results = atlas_stats.analyse(read_rows(BUNDLED))
    assert not results[UNTRAINED].trained
    untrained = [k for k, r in results.items() if not r.trained]
    pending = atlas_stats.longer(results, {})
    assert set(pending) == set(untrained)
    assert {x.state for x in pending.values()} == {"pending"}

    def state(reached):
        got = atlas_stats.longer(results, longer_rows(3000, reached))
        assert {k for k, x in got.items() if x.state != "pending"} == {UNTRAINED}
        return got[UNTRAINED]

    assert state({"learned": [None, None]}).state == "none"
    partly = state({"learned": [2000, None, 2500]})
    assert (partly.state, partly.seeds, partly.reached, partly.budget) == ("partly", 3, 2, 3000)
    assert state({"learned": [2000, 2500]}).state == "trains"  # nothing compared yet
    read = state({"learned": [1200, 1300, 1250], "identity": [2000, 2100, 1900]})
    assert read.state == "read"
    c = read.result.comparisons[("identity", "steps")]
    assert c.difference == pytest.approx(1250 - 2000) and read.result.verdict("identity") == "helps"
    counts = atlas_stats.longer_counts(pending | {UNTRAINED: read})
    assert counts == {"read": 1, "trains": 0, "partly": 0, "none": 0, "pending": len(untrained) - 1}
