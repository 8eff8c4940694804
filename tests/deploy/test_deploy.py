"""Beyond one server: the Kubernetes manifests, the compose demo, and the one models folder that
every replica reads and writes.

No cluster and no Docker engine are needed. kubernetes-validate checks every manifest against the
Kubernetes API schemas of the versions stated below; our own checks read the promises (replicas,
probes, sticky sessions, the shared volume where the app reads, resources sized from
bench/load.py). Each check returns a list of problems and runs on the real files (none) and on
broken copies (some), so every check is known to be able to fail. The shared folder is tested
with real, separate Python processes.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.conftest import MODELS, ROOT
from tfviz import load_checkpoint
from tfviz.settings import MAX_JOBS_ENV, USER_MODELS_ENV
from tfviz.training.checkpoint import save_checkpoint

K8S = ROOT / "deploy" / "k8s"
COMPOSE = ROOT / "deploy" / "compose" / "compose.yaml"
NGINX = ROOT / "deploy" / "compose" / "nginx.conf"
DOCS = ROOT / "docs" / "deploy.md"
DOCKERFILE = (ROOT / "Dockerfile").read_text()

# The oldest Kubernetes we claim to run on, and the newest kubernetes-validate 1.37.0 knows.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
HEALTH = "/_stcore/health"
# bench/README.md, bench/load.py with 40 sessions on one server process: 0.94 cores and a
# 313.7 MiB peak with think times of 0.2-1 s (the busiest run); docs/deploy.md does the sums.
SESSIONS_PER_REPLICA = 40
CORES_AT_40 = 0.94
PEAK_MIB_AT_40 = 313.7
STUDENTS = 400
# The longest shared link a proxy must pass (deploy/compose/nginx.conf says where it comes from).
LINK_KB = 120
REPLICAS_FOR_STUDENTS = math.ceil(STUDENTS / SESSIONS_PER_REPLICA) + 1  # one spare

# What the image promises (Dockerfile) and the largest upload (.streamlit/config.toml).
PORT = int(re.search(r"^EXPOSE\s+(\d+)", DOCKERFILE, re.M).group(1))
UID = int(re.findall(r"^USER\s+(\d+)", DOCKERFILE, re.M)[-1])
MODELS_DIR = re.search(rf"\b{USER_MODELS_ENV}=(\S+)", DOCKERFILE).group(1)
UPLOAD_MB = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"][
    "maxUploadSize"
]


def quantity(q) -> float:
    """A Kubernetes quantity in cores (cpu) or MiB (memory): "500m" 0.5, "1" 1, "384Mi" 384."""
    q = str(q)
    units = {"m": 1e-3, "Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024**2}
    for unit, factor in units.items():
        if q.endswith(unit):
            return float(q[: -len(unit)]) * factor
    return float(q)


def nginx_mib(size: str) -> float:
    """An nginx size in MiB: "25m" 25, "1g" 1024, "512k" 0.5, "1048576" 1."""
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", size.strip().lower()).groups()
    return int(number) * {"": 2**-20, "k": 2**-10, "m": 1, "g": 1024}[unit]


# ------------------------------------------------------------------------------------------------
# Kubernetes
# ------------------------------------------------------------------------------------------------


def load_manifests() -> dict[str, dict]:
    """Every object under deploy/k8s (kustomization.yaml aside), keyed "Kind/name"."""
    objs = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            for doc in yaml.safe_load_all(path.read_text()):
                objs[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return objs


def one(objs: dict[str, dict], kind: str) -> dict:
    found = [o for o in objs.values() if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def k8s_problems(objs: dict[str, dict]) -> list[str]:
    """What the manifests fail to promise; empty when they keep every promise."""
    problems = []
    dep, svc, ing = one(objs, "Deployment"), one(objs, "Service"), one(objs, "Ingress")
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    if dep["spec"].get("replicas", 1) < 2:
        problems.append("the Deployment runs fewer than 2 replicas")
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    if PORT not in ports.values():
        problems.append(f"the container does not declare port {PORT} (Dockerfile EXPOSE)")
    for kind in ("readinessProbe", "livenessProbe"):
        get = container.get(kind, {}).get("httpGet", {})
        if get.get("path") != HEALTH or ports.get(get.get("port"), get.get("port")) != PORT:
            problems.append(f"no {kind} on :{PORT}{HEALTH}")
    res = container.get("resources", {})
    for key in ("cpu", "memory"):
        if key not in res.get("requests", {}) or key not in res.get("limits", {}):
            problems.append(f"{key} requests and limits are not both set")
        elif quantity(res["requests"][key]) > quantity(res["limits"][key]):
            problems.append(f"the {key} request is over its limit")
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    if quantity(res.get("requests", {}).get("memory", 0)) < PEAK_MIB_AT_40:
        problems.append(f"the memory request is under the {PEAK_MIB_AT_40} MiB measured peak")
    if quantity(res.get("requests", {}).get("cpu", 0)) < CORES_AT_40:
        problems.append(f"the cpu request is under the {CORES_AT_40} cores measured")
    jobs = int(env.get(MAX_JOBS_ENV) or 0)
    if not jobs or quantity(res.get("limits", {}).get("cpu", 0)) < 1 + jobs:
        problems.append(f"{MAX_JOBS_ENV} unset, or no cpu limit for the server plus each job")
    if env.get(USER_MODELS_ENV, MODELS_DIR) != MODELS_DIR:
        problems.append(f"{USER_MODELS_ENV} is not {MODELS_DIR}, the image's folder")
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod.get("volumes", [])
        if "persistentVolumeClaim" in v
    }
    mounted = [m["name"] for m in container.get("volumeMounts", []) if m["mountPath"] == MODELS_DIR]
    pvc = objs.get(f"PersistentVolumeClaim/{claims.get(mounted[0])}") if mounted else None
    if pvc is None:
        problems.append(f"no PersistentVolumeClaim is mounted at {MODELS_DIR}")
    elif "ReadWriteMany" not in pvc["spec"].get("accessModes", []):
        problems.append("the models volume is not ReadWriteMany: replicas would not share it")
    security = pod.get("securityContext", {})
    if not security.get("runAsNonRoot") or security.get("runAsUser") != UID:
        problems.append(f"the pod does not run as non-root user {UID}")
    if security.get("fsGroup") is None:
        problems.append("no fsGroup: the shared volume may not be writable by the app user")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    if not svc["spec"].get("selector") or svc["spec"]["selector"].items() - labels.items():
        problems.append("the Service does not select the Deployment's pods")
    targets = [p["targetPort"] for p in svc["spec"]["ports"]]
    if not any(ports.get(t, t) == PORT for t in targets):
        problems.append(f"no Service targetPort reaches the container's {PORT}")
    notes = ing["metadata"].get("annotations", {})
    nginx = "nginx.ingress.kubernetes.io/"
    if notes.get(nginx + "affinity") != "cookie" or not notes.get(nginx + "session-cookie-name"):
        problems.append("the Ingress has no cookie affinity: sessions would hop replicas")
    if notes.get(nginx + "affinity-mode") != "persistent":
        problems.append("affinity-mode is not persistent: scaling up would move sessions")
    for t in ("proxy-read-timeout", "proxy-send-timeout"):
        if int(notes.get(nginx + t, 60)) < 3600:
            problems.append(f"{t} under an hour: idle websockets would be cut")
    if nginx_mib(notes.get(nginx + "proxy-body-size", "1m")) <= UPLOAD_MB:
        problems.append(f"proxy-body-size does not fit a {UPLOAD_MB} MB upload")
    backends = [p["backend"]["service"] for r in ing["spec"]["rules"] for p in r["http"]["paths"]]
    svc_ports = {key for p in svc["spec"]["ports"] for key in (p["name"], p["port"])}
    if not backends or any(
        b["name"] != svc["metadata"]["name"] or set(b["port"].values()).isdisjoint(svc_ports)
        for b in backends
    ):
        problems.append("the Ingress does not route to the Service's port")
    return problems


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_is_valid_kubernetes(version):
    objs = load_manifests()
    assert {o["kind"] for o in objs.values()} >= {
        "Deployment", "Service", "Ingress", "PersistentVolumeClaim"
    }  # fmt: skip
    for key, obj in objs.items():
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{key} is not valid Kubernetes {version}: {e.message} at {list(e.path)}")


def test_the_validator_rejects_a_broken_manifest():
    dep = copy.deepcopy(one(load_manifests(), "Deployment"))
    dep["spec"]["replica"] = dep["spec"].pop("replicas")  # a typo: strict mode knows no "replica"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, KUBERNETES_VERSIONS[0], strict=True)


def test_the_manifests_keep_their_promises():
    assert k8s_problems(load_manifests()) == []


def _app(objs):
    """The app container of the Deployment."""
    return one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def _notes(objs):
    return one(objs, "Ingress")["metadata"]["annotations"]


def _env_without(objs, name):
    return [e for e in _app(objs)["env"] if e["name"] != name]


K8S_BREAKS = {
    # what is broken: (how, words of the problem it must cause)
    "one replica": (lambda o: one(o, "Deployment")["spec"].update(replicas=1), "replicas"),
    "probe path": (lambda o: _app(o)["readinessProbe"]["httpGet"].update(path="/"), "readiness"),
    "no liveness": (lambda o: _app(o).pop("livenessProbe"), "livenessProbe"),
    "other port": (lambda o: _app(o)["ports"][0].update(containerPort=80), f"port {PORT}"),
    "no limits": (lambda o: _app(o)["resources"].pop("limits"), "limits"),
    "small memory": (lambda o: _app(o)["resources"]["requests"].update(memory="128Mi"), "peak"),
    "small cpu": (lambda o: _app(o)["resources"]["requests"].update(cpu="250m"), "cores"),
    "no job cap": (lambda o: _app(o).update(env=_env_without(o, MAX_JOBS_ENV)), MAX_JOBS_ENV),
    "not mounted": (lambda o: _app(o)["volumeMounts"][0].update(mountPath="/data"), "mounted"),
    "rwo volume": (
        lambda o: one(o, "PersistentVolumeClaim")["spec"].update(accessModes=["ReadWriteOnce"]),
        "ReadWriteMany",
    ),
    "root": (
        lambda o: one(o, "Deployment")["spec"]["template"]["spec"]["securityContext"].pop(
            "runAsNonRoot"
        ),
        "non-root",
    ),
    "no affinity": (lambda o: _notes(o).pop("nginx.ingress.kubernetes.io/affinity"), "cookie"),
    "short timeout": (
        lambda o: _notes(o).update({"nginx.ingress.kubernetes.io/proxy-read-timeout": "60"}),
        "websockets",
    ),
    "small uploads": (
        lambda o: _notes(o).pop("nginx.ingress.kubernetes.io/proxy-body-size"),
        "upload",
    ),
    "other pods": (
        lambda o: one(o, "Service")["spec"].update(selector={"app": "other"}),
        "select",
    ),
    "other backend": (
        lambda o: one(o, "Ingress")["spec"]["rules"][0]["http"]["paths"][0]["backend"].update(
            service={"name": "web", "port": {"number": 80}}
        ),
        "route",
    ),
    "wrong target": (
        lambda o: one(o, "Service")["spec"]["ports"][0].update(targetPort=8080),
        "targetPort",
    ),
}


@pytest.mark.parametrize("name", K8S_BREAKS)
def test_each_manifest_check_catches_a_break(name):
    objs = copy.deepcopy(load_manifests())
    brk, words = K8S_BREAKS[name]
    brk(objs)
    problems = k8s_problems(objs)
    assert any(words in p for p in problems), problems


def test_kustomization_applies_every_manifest_with_the_image_and_replicas():
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kust["resources"]) == files
    dep = one(load_manifests(), "Deployment")
    image = dep["spec"]["template"]["spec"]["containers"][0]["image"].split(":")[0]
    assert [i["name"] for i in kust["images"]] == [image]
    # Its replica count overrides the Deployment's, so it keeps the same promise.
    assert [r["name"] for r in kust["replicas"]] == [dep["metadata"]["name"]]
    assert kust["replicas"][0]["count"] >= 2


# ------------------------------------------------------------------------------------------------
# Compose: two replicas behind nginx on one host
# ------------------------------------------------------------------------------------------------


def compose_problems(compose: dict, nginx: str) -> list[str]:
    problems = []
    services = compose.get("services", {})
    here = COMPOSE.parent

    def built_here(s: dict) -> bool:
        build = s.get("build")
        context = build if isinstance(build, str) else (build or {}).get("context", "")
        return bool(build) and (here / context).resolve() == ROOT

    apps = {name: s for name, s in services.items() if built_here(s)}
    if len(apps) < 2:
        problems.append(f"{len(apps)} app replicas built from the repository; two are promised")
    if len({json.dumps(s, sort_keys=True) for s in apps.values()}) > 1:
        problems.append("the app replicas are configured differently")
    named = set(compose.get("volumes") or {})
    for name, s in apps.items():
        shared = [v.split(":")[0] for v in s.get("volumes", []) if v.split(":")[1] == MODELS_DIR]
        if not shared or shared[0] not in named:
            problems.append(f"{name} does not mount a named volume at {MODELS_DIR}")
        if s.get("ports"):
            problems.append(f"{name} publishes a port: browsers would bypass the sticky proxy")
    proxies = [s for s in services.values() if str(s.get("image", "")).startswith("nginx:")]
    if len(proxies) != 1:
        return problems + ["there is no nginx proxy service"]
    proxy = proxies[0]
    if proxy["image"].endswith(":latest") or not proxy.get("ports"):
        problems.append("the proxy's image is not pinned or it publishes no port")
    if set(apps) - set(proxy.get("depends_on", {})):
        problems.append("the proxy does not wait for every replica")
    conf = re.sub(r"#.*", "", nginx)
    upstream = re.search(r"upstream\s+(\w+)\s*\{([^}]*)\}", conf)
    body = upstream.group(2) if upstream else ""
    servers = set(re.findall(r"server\s+([\w.-]+):(\d+)", body))
    if servers != {(name, str(PORT)) for name in apps}:
        problems.append(f"the upstream lists {sorted(servers)}, not each replica at :{PORT}")
    hashed = re.search(r"hash\s+\$(\w+)\s+consistent\s*;", body)
    cookie = hashed and re.search(rf"map\s+\$cookie_(\w+)\s+\${hashed.group(1)}\s*\{{", conf)
    sets = cookie and re.search(rf"Set-Cookie\s+\"{cookie.group(1)}=\${hashed.group(1)};", conf)
    if not (hashed and cookie and sets):
        problems.append("the proxy does not hash on a cookie it sets: sessions would hop")
    if not upstream or f"proxy_pass http://{upstream.group(1)};" not in conf:
        problems.append("the proxy does not pass requests to the upstream")
    for needed in (
        "proxy_http_version 1.1;",
        "proxy_set_header Upgrade $http_upgrade;",
        "proxy_set_header Connection $connection_upgrade;",
    ):
        if needed not in conf:
            problems.append(f"no `{needed}`: the websocket would not pass")
    timeout = re.search(r"proxy_read_timeout\s+(\d+)s;", conf)
    if not timeout or int(timeout.group(1)) < 3600:
        problems.append("proxy_read_timeout under an hour: idle websockets would be cut")
    body_size = re.search(r"client_max_body_size\s+(\w+);", conf)
    if nginx_mib(body_size.group(1) if body_size else "1m") <= UPLOAD_MB:
        problems.append(f"client_max_body_size does not fit a {UPLOAD_MB} MB upload")
    buffers = re.search(r"large_client_header_buffers\s+(\d+)\s+(\w+)\s*;", conf)
    if nginx_mib(buffers.group(2) if buffers else "8k") * 1024 < LINK_KB:
        problems.append(f"large_client_header_buffers do not fit a {LINK_KB} KB shared link")
    return problems


def test_compose_keeps_its_promises():
    assert compose_problems(yaml.safe_load(COMPOSE.read_text()), NGINX.read_text()) == []


COMPOSE_BREAKS = {
    # what is broken: (how it changes (compose, nginx.conf), words of the problem it must cause)
    "one replica": (lambda c, n: (c["services"].pop("app2"), n)[1], "two are promised"),
    "published": (lambda c, n: (c["services"]["app2"].update(ports=["8502:8501"]), n)[1], "port"),
    "own volumes": (
        lambda c, n: ([s.update(volumes=[]) for s in c["services"].values()], n)[1],
        "named volume",
    ),
    "ip hash": (lambda c, n: n.replace("hash $tfviz_route", "hash $remote_addr"), "cookie"),
    "no cookie": (lambda c, n: n.replace("add_header Set-Cookie", "# "), "cookie"),
    "one server": (lambda c, n: n.replace("server app2:8501;", ""), "upstream"),
    "no wait": (lambda c, n: (c["services"]["proxy"].pop("depends_on"), n)[1], "wait"),
    "no upgrade": (lambda c, n: n.replace("proxy_set_header Upgrade", "#"), "websocket"),
    "short timeout": (
        lambda c, n: n.replace("read_timeout 3600s", "read_timeout 60s"),
        "websockets",
    ),
    "small header buffers": (
        lambda c, n: re.sub(r"large_client_header_buffers[^;]*;", "", n),
        "shared link",
    ),
}


@pytest.mark.parametrize("name", COMPOSE_BREAKS)
def test_each_compose_check_catches_a_break(name):
    compose = copy.deepcopy(yaml.safe_load(COMPOSE.read_text()))
    nginx = NGINX.read_text()
    brk, words = COMPOSE_BREAKS[name]
    nginx_after = brk(compose, nginx)
    problems = compose_problems(compose, nginx_after)
    assert any(words in p for p in problems), problems


def nginx_exe() -> str:
    """nginx's path. It is no Python dependency: skipped where it is missing, except under
    CI=true, where .ci/run installs it and a skip would hide a broken setup."""
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else "")
    if not exe:
        assert os.environ.get("CI") != "true", "nginx is missing under CI: .ci/run installs it"
        pytest.skip("nginx is not installed")
    return exe


def test_nginx_accepts_the_proxy_config(tmp_path):
    """`nginx -t` on the config, with the replicas' compose host names replaced by loopback
    addresses that resolve here."""
    exe = nginx_exe()
    conf = re.sub(r"server app\d+:", "server 127.0.0.1:", NGINX.read_text())
    conf = conf.replace("listen 80;", "listen 127.0.0.1:1;")
    (tmp_path / "tfviz.conf").write_text(conf)
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{ access_log off; include {tmp_path}/tfviz.conf; }}\n"
    )
    res = subprocess.run(
        [exe, "-t", "-q", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, res.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _through_proxy(exe: str, conf: str, tmp_path: Path, path: str, referer: str):
    """Run nginx with conf and GET path once through it, with this Referer.

    Returns (status, body). Behind the proxy, instead of the replicas, a server block of the same
    nginx (with room for any header) answers 200 with the request URI it got. nginx runs in the
    foreground as one process, its files under tmp_path.
    """
    port, replica = _free_port(), _free_port()
    conf = re.sub(r"server app\d+:\d+;", f"server 127.0.0.1:{replica};", conf)
    conf = conf.replace("listen 80;", f"listen 127.0.0.1:{port};")
    (tmp_path / "tfviz.conf").write_text(conf)
    stand_in = (
        f"server {{ listen 127.0.0.1:{replica}; large_client_header_buffers 4 1m; "
        'location / { return 200 "$request_uri"; } }'
    )
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\ndaemon off;\n"
        f"master_process off;\nevents {{}}\n"
        f"http {{ access_log off; include {tmp_path}/tfviz.conf; {stand_in} }}\n"
    )
    proc = subprocess.Popen(
        [exe, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:  # until nginx listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "nginx did not start listening"
                time.sleep(0.1)
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Referer": referer})
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, ""
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_long_shared_link_passes_the_proxy_and_nginx_default_would_refuse_it(tmp_path):
    """A LINK_KB link reaches the replica whole, in the request line and as the Referer of a
    later request; without the config's large_client_header_buffers nginx refuses it (414)."""
    exe = nginx_exe()
    # The longest sentences a link takes (5,000 characters each), in Chinese, percent-encoded as
    # the browser sends them (9 bytes a character): about 90 KB; padded to LINK_KB, the margin.
    sentence = urllib.parse.quote("注意力" * 1666 + "注")
    link = f"/?model=minilm&sequence={sentence}&sentence_b={sentence}&lang=zh&pad="
    link += "x" * (LINK_KB * 1024 - len(link))
    status, body = _through_proxy(exe, NGINX.read_text(), tmp_path, link, "")
    assert (status, body) == (200, link)  # the replica got the whole link
    status, _ = _through_proxy(exe, NGINX.read_text(), tmp_path, "/static/app.js", link)
    assert status == 200  # the page's later requests carry the link as their Referer
    default = re.sub(r"large_client_header_buffers[^;]*;", "", NGINX.read_text())
    status, _ = _through_proxy(exe, default, tmp_path, link, "")
    assert status == 414  # what the fix is for: nginx's default buffers refuse the link
    status, _ = _through_proxy(exe, default, tmp_path, "/static/app.js", link)
    assert status == 400  # and a header that long


def test_the_ingress_tells_the_controller_header_buffers_a_long_link_needs():
    """ingress-nginx takes the header buffers from its controller's ConfigMap only (no
    annotation): the Ingress's comment gives the key and a size that fits a LINK_KB link."""
    text = (K8S / "ingress.yaml").read_text()
    found = re.search(r'"large-client-header-buffers"\s*:\s*"(\d+) (\w+)"', text)
    assert found, "ingress.yaml does not say which ConfigMap key the controller needs"
    assert nginx_mib(found.group(2)) * 1024 >= LINK_KB


# ------------------------------------------------------------------------------------------------
# The docs
# ------------------------------------------------------------------------------------------------


def test_docs_give_the_commands_and_the_sizing_the_manifests_use():
    text = DOCS.read_text()
    for needed in (
        "kubectl apply -k deploy/k8s",
        "docker compose -f deploy/compose/compose.yaml up --build",
        f"{SESSIONS_PER_REPLICA} sessions per replica",
        f"{REPLICAS_FOR_STUDENTS} replicas",
        "ReadWriteMany",
        "sticky",
    ):
        assert needed in text, f"docs/deploy.md does not say {needed!r}"
    res = _app(load_manifests())["resources"]
    for value in (*res["requests"].values(), *res["limits"].values()):
        assert f"`{value}`" in text, f"docs/deploy.md does not give the figure {value}"
    assert "docs/deploy.md" in (ROOT / "README.md").read_text()


# ------------------------------------------------------------------------------------------------
# One models folder, several processes
# ------------------------------------------------------------------------------------------------

# Process B: the app itself (AppTest), one browser session that stays open. Each line on stdin
# reruns the session, as any widget change does; after each run it prints the picker's options.
PICKER = """
import json, sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file("app.py", default_timeout=60)
while True:
    at.run()
    if at.exception:
        sys.exit(f"the app failed: {at.exception}")
    print(json.dumps(list(at.selectbox(key="model").options)), flush=True)
    if not sys.stdin.readline():
        break
"""

# A replica saving model `who` (reverse's weights times `sign`: same size, other values) to
# ref-<who> once, then, after a line on stdin, to shared.safetensors until the stop file exists.
WRITER = """
import sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from tfviz import load_checkpoint
from tfviz.training.checkpoint import save_checkpoint
folder, who, sign = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
model, meta = load_checkpoint("models/reverse.safetensors")
with torch.no_grad():
    for p in model.parameters():
        p.mul_(sign)
save_checkpoint(folder / f"ref-{who}.safetensors", model, meta.task, {"writer": who})
print("ready", flush=True)
sys.stdin.readline()
n = 0
while not (folder.parent / "stop").exists():
    save_checkpoint(folder / "shared.safetensors", model, meta.task, {"writer": who})
    n += 1
print(n, flush=True)
"""


def _spawn(code: str, *args: str, env: dict, log: Path) -> subprocess.Popen:
    """A Python process running code; its stderr goes to log; killed after 180 s at most."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
    )
    # A child that hangs must not hang the test run (readline would wait for ever).
    watchdog = threading.Timer(180, proc.kill)
    watchdog.daemon = True
    watchdog.start()
    return proc


def _line(proc: subprocess.Popen, log: Path) -> str:
    line = proc.stdout.readline()
    assert line, f"the process ended early: {log.read_text()[-2000:]}"
    return line


def test_a_model_saved_by_one_process_shows_in_anothers_picker_without_restart(tmp_path):
    folder = tmp_path / "user_models"
    env = dict(os.environ, **{USER_MODELS_ENV: str(folder)})
    env.pop("TFVIZ_MAX_UPLOAD_MB", None)
    log = tmp_path / "picker.log"
    picker = _spawn(PICKER, env=env, log=log)
    try:
        before = json.loads(_line(picker, log))
        assert before and not any("from_a" in o for o in before), before
        model, meta = load_checkpoint(MODELS / "sort.safetensors")
        save_checkpoint(folder / "from_a.safetensors", model, meta.task)
        picker.stdin.write("\n")
        picker.stdin.flush()
        after = json.loads(_line(picker, log))
        # Listed for every session; "yours" only in the one that trained it, not this one.
        assert [o for o in after if o not in before] == ["from_a (class model)"], after
        picker.stdin.close()
        assert picker.wait(timeout=60) == 0, log.read_text()[-2000:]
    finally:
        picker.kill()


def test_two_processes_saving_one_name_never_leave_a_broken_or_mixed_file(tmp_path):
    folder = tmp_path / "user_models"
    folder.mkdir()
    writers = [
        _spawn(WRITER, str(folder), who, sign, env=dict(os.environ), log=tmp_path / f"{who}.log")
        for who, sign in (("A", "1"), ("B", "-1"))
    ]
    try:
        for w, who in zip(writers, "AB", strict=True):
            assert _line(w, tmp_path / f"{who}.log").strip() == "ready"
        refs = {(folder / f"ref-{who}.safetensors").read_bytes(): who for who in "AB"}
        assert len(refs) == 2 and len({len(r) for r in refs}) == 1  # same size, other bytes
        for w in writers:
            w.stdin.write("go\n")
            w.stdin.flush()
        # Read while both write, until the file has changed hands often: every read is one
        # writer's whole file, never a part, never a mix of the two.
        shared, last, handovers = folder / "shared.safetensors", None, 0
        deadline = time.monotonic() + 90
        while handovers < 20:
            assert time.monotonic() < deadline, f"only {handovers} handovers seen"
            for w, who in zip(writers, "AB", strict=True):
                assert w.poll() is None, f"{who} failed: {(tmp_path / f'{who}.log').read_text()}"
            try:
                data = shared.read_bytes()
            except FileNotFoundError:
                continue
            assert data in refs, f"a read saw {len(data)} bytes that neither writer wrote"
            if last is not None and refs[data] != last:
                handovers += 1
            last = refs[data]
        (tmp_path / "stop").touch()
        saves = [
            int(_line(w, tmp_path / f"{who}.log")) for w, who in zip(writers, "AB", strict=True)
        ]
        assert all(w.wait(timeout=60) == 0 for w in writers)
    finally:
        for w in writers:
            w.kill()
    assert min(saves) > 0
    data = shared.read_bytes()
    assert data in refs
    _, meta = load_checkpoint(shared)
    assert meta.record["writer"] == refs[data]
    # No half-written temporary file is left behind.
    assert sorted(p.name for p in folder.iterdir()) == [
        "ref-A.safetensors", "ref-B.safetensors", "shared.safetensors"
    ]  # fmt: skip
