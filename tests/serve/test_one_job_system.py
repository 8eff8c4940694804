"""One job system (issue 45): the server's one JobManager (tfviz.serve.jobs) runs every kind of
work under one cap, an atlas sweep too (tfviz.serve.work.AtlasSweep, the only code of the server
that starts a process), and every view draws its job with one panel (tfviz.ui.jobs.job_panel).

Read from the syntax tree of every module of tfviz/ (and app.py), so a second job system (a
runner with a cap of its own, a thread started for a job elsewhere, a view's own polling fragment
or progress bar) fails here, naming its file and line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support import python_tree, tfviz_files

ROOT = Path(__file__).resolve().parents[2]

# Where a thread may be started, and why: the job workers, and two that are not jobs.
THREADS = {
    ("tfviz/serve/jobs.py", "JobManager._start_waiting"): "a job's worker thread",
    ("tfviz/ui/shutdown.py", "drain_on_sigterm.install.on_sigterm"): "the drain on SIGTERM",
    ("tfviz/core/dissect.py", "MeasureCache.warm"): "a cache's warm-up, not a job",
    ("tfviz/ui/compute.py", "touch"): "the idle watcher that releases memory, not a job",
}
# Where the server may start or signal a process: the atlas sweep's job, nowhere else.
PROCESSES = {
    ("tfviz/serve/work.py", "AtlasSweep._start"),
    ("tfviz/serve/work.py", "AtlasSweep._stop"),
}
COMMAND_LINES = "tfviz/cli/"  # commands run by hand (git, pip), never by the server
THREAD_CALLS = {
    "threading.Thread", "Thread", "ThreadPoolExecutor", "concurrent.futures.ThreadPoolExecutor",
    "_thread.start_new_thread", "threading.Timer", "Timer",
}  # fmt: skip
PROCESS_CALLS = {
    "subprocess.Popen", "subprocess.run", "subprocess.call", "subprocess.check_call",
    "subprocess.check_output", "Popen", "os.fork", "os.system", "os.posix_spawn", "os.killpg",
    "os.execv", "os.execvp", "multiprocessing.Process", "multiprocessing.Pool", "Process",
    "ProcessPoolExecutor", "concurrent.futures.ProcessPoolExecutor", "LocalCluster", "Client",
}  # fmt: skip
# The views that run a job, each drawing it with the one panel.
JOB_VIEWS = (
    "tfviz/ui/views/train/new_model.py",
    "tfviz/ui/views/train/language.py",
    "tfviz/ui/views/train/retrain.py",
    "tfviz/ui/views/experiment.py",
    "tfviz/ui/views/lessons/recipe.py",
    "tfviz/ui/atlas.py",
)
PANEL = ("tfviz/ui/jobs.py", "job_panel")


@dataclass(frozen=True)
class Found:
    path: str
    line: int
    where: str  # the qualified name of the function it is in ("" at module level)
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.where or '<module>'}: {self.what}"


def dotted(node: ast.AST) -> str:
    """a.b.c for a name or an attribute chain, "" otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def calls(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.Call]]:
    """(qualified name of the function it is in, call) for every call in tree."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield from calls(node, f"{prefix}{node.name}.")
            continue
        if isinstance(node, ast.Call):
            yield prefix.rstrip("."), node
        yield from calls(node, prefix)


def started(root: Path, names: set[str]) -> list[Found]:
    """Every call of one of names (threads or processes) in tfviz/, outside the command lines."""
    found = []
    for path in tfviz_files(root):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(COMMAND_LINES):
            continue
        for where, call in calls(python_tree(path)):
            name = dotted(call.func)
            if name in names:
                found.append(Found(rel, call.lineno, where, name))
    return found


def panel_breaches(root: Path = ROOT) -> list[Found]:
    """Where a module of the pages other than the panel's own polls or draws a job itself: a
    fragment, a progress bar, a button bound to a job's cancel."""
    found = []
    pages = [root / "app.py", *sorted((root / "tfviz" / "ui").rglob("*.py"))]
    for path in pages:
        rel = path.relative_to(root).as_posix()
        if rel == PANEL[0] or not path.exists():
            continue
        tree = python_tree(path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for deco in node.decorator_list:
                    target = deco.func if isinstance(deco, ast.Call) else deco
                    if dotted(target).endswith("fragment") and polls_a_job(node):
                        found.append(Found(rel, node.lineno, node.name, "a fragment polls a job"))
        for where, call in calls(tree):
            name = dotted(call.func)
            if name.endswith(".progress") and name.split(".")[0] in ("st", "col", "left", "right"):
                found.append(Found(rel, call.lineno, where, f"{name}: a progress bar"))
            for kw in call.keywords:
                if kw.arg == "on_click" and dotted(kw.value).endswith(".cancel"):
                    found.append(Found(rel, call.lineno, where, "a button bound to a cancel"))
            if name.endswith("fragment") and call.args:
                fragment = dotted(call.args[0])
                for fn in ast.walk(tree):
                    if isinstance(fn, ast.FunctionDef) and fn.name == fragment and polls_a_job(fn):
                        found.append(Found(rel, call.lineno, where, "a fragment polls a job"))
    return found


def polls_a_job(function: ast.AST) -> bool:
    """A function that reads a job's state or stops it: a call of .state() or .cancel."""
    return any(
        isinstance(n, ast.Attribute)
        and n.attr in ("state", "cancel")
        and isinstance(n.ctx, ast.Load)
        for n in ast.walk(function)
    )


# ---- the checks ---------------------------------------------------------------------------------


def test_only_the_job_manager_starts_a_thread_for_a_job():
    found = started(ROOT, THREAD_CALLS)
    assert len(found) >= 1, "no thread found at all: is the scan broken?"
    stray = [str(f) for f in found if (f.path, f.where) not in THREADS]
    assert not stray, "a thread started outside the one job manager:\n" + "\n".join(stray)
    workers = [f for f in found if f.path == "tfviz/serve/jobs.py"]
    assert [f.where for f in workers] == ["JobManager._start_waiting"]


def test_only_the_atlas_sweep_starts_a_process_in_the_server():
    found = started(ROOT, PROCESS_CALLS)
    stray = [str(f) for f in found if (f.path, f.where) not in PROCESSES]
    assert not stray, "a process started outside the atlas sweep's job:\n" + "\n".join(stray)
    assert {(f.path, f.where) for f in found} == PROCESSES, "is the scan broken?"


def test_every_kind_of_work_is_run_by_the_one_manager():
    """No runner, queue or cap beside JobManager: every class that does a job's work
    (run(self, report, should_stop)) is in tfviz/serve, or a lesson's (its recipe, in
    tfviz/lessons), and the atlas runner of before is gone."""
    kinds, managers = [], []
    for path in tfviz_files():
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(python_tree(path)):
            if not isinstance(node, ast.ClassDef):
                continue
            methods = {m.name: m for m in node.body if isinstance(m, ast.FunctionDef)}
            run = methods.get("run")
            if run is not None and [a.arg for a in run.args.args] == [
                "self",
                "report",
                "should_stop",
            ]:
                kinds.append((rel, node.name))
            if (
                node.name in ("Runner", "Busy", "Sweep")
                or {"submit", "start"} & set(methods)
                and ("limit" in ast.unparse(node) or "max_jobs" in ast.unparse(node))
            ):
                managers.append((rel, node.name))
    assert ("tfviz/serve/work.py", "AtlasSweep") in kinds
    assert all(rel.startswith(("tfviz/serve/", "tfviz/lessons/")) for rel, _ in kinds), kinds
    assert managers == [("tfviz/serve/jobs.py", "JobManager")], managers


def test_every_view_that_runs_a_job_draws_it_with_the_one_panel():
    for rel in JOB_VIEWS:
        names = {dotted(call.func) for _, call in calls(python_tree(ROOT / rel))}
        assert PANEL[1] in names, f"{rel} does not draw its job with {PANEL[1]}"
    stray = panel_breaches()
    assert not stray, "a page polls or draws a job its own way:\n" + "\n".join(map(str, stray))


def test_the_scans_find_a_second_job_system(tmp_path):
    ui = tmp_path / "tfviz" / "ui"
    ui.mkdir(parents=True)
    (tmp_path / "app.py").write_text("")
    (tmp_path / "tfviz" / "runner.py").write_text(
        "import subprocess, threading\n"
        "class Runner:\n"
        "    def start(self, cmd):\n"
        "        threading.Thread(target=self.poll).start()\n"  # line 4
        "        return subprocess.Popen(cmd)\n"  # line 5
    )
    (ui / "view.py").write_text(
        "@st.fragment(run_every=0.5)\n"
        "def own_progress(job):\n"  # line 2
        "    snap = job.state()\n"
        "    st.progress(snap.fraction)\n"  # line 4
        "    st.button('x', on_click=job.cancel)\n"  # line 5
    )
    assert [(f.line, f.where) for f in started(tmp_path, THREAD_CALLS)] == [(4, "Runner.start")]
    assert [(f.line, f.where) for f in started(tmp_path, PROCESS_CALLS)] == [(5, "Runner.start")]
    assert sorted((f.line, f.what) for f in panel_breaches(tmp_path)) == [
        (2, "a fragment polls a job"),
        (4, "st.progress: a progress bar"),
        (5, "a button bound to a cancel"),
    ]
