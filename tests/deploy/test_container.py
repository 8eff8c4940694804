"""docker run, for real: the image built from the repository's Dockerfile (.ci/container.sh, with
podman) serves the app healthy, as uid 10001, on a read-only root file system with a writable
user_models volume; a model trained inside it is saved to the volume and listed by a new
container; a browser gets a page with a prediction.

Needs podman and the image tfviz:ci (`bash .ci/container.sh` builds it in about 2 minutes). Where
either is missing the module is skipped, except under CI=true, where .ci/run builds the image and
a missing one fails. Takes about 15 s once the image is built.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from bench.harness import free_port
from bench.session import Session, Stats
from tests.browser.test_browser import CHROMIUM, CHROMIUM_ARGS, CODE, EXCEPTION, IN_CI
from tfviz import load_checkpoint

pytestmark = pytest.mark.bench

IMAGE = os.environ.get("TFVIZ_IMAGE", "tfviz:ci")
WORK = Path(os.environ.get("TFVIZ_CONTAINER_WORK", "/var/tmp/tfviz-container"))
UID = "10001"  # the Dockerfile's USER
TRAINED = "in_container"
START_S = 90


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    conf = WORK / "containers.conf"  # written by .ci/container.sh: runc, ulimits
    if conf.exists():
        env["CONTAINERS_CONF"] = str(conf)
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, check=check, timeout=timeout, env=env
    )


def no_image(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: .ci/run builds the image, so it must be there)")
    pytest.skip(reason)


def healthy(port: int) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only
    try:
        with opener.open(f"http://127.0.0.1:{port}/_stcore/health", timeout=3) as r:
            return r.read() == b"ok"
    except OSError:
        return False


class Container:
    """One container of the image: read-only root, /tmp in memory, the volume at user_models."""

    def __init__(self, volume: Path, *extra: str):
        self.port = free_port()
        run = podman(
            "run", "-d", "-p", f"127.0.0.1:{self.port}:8501", "--read-only",
            "--tmpfs", "/tmp", "-v", f"{volume}:/app/user_models", *extra, IMAGE,
        )  # fmt: skip
        self.id = run.stdout.strip()
        deadline = time.monotonic() + START_S
        while not healthy(self.port):
            if time.monotonic() > deadline:
                logs = podman("logs", self.id, check=False).stdout[-2000:]
                self.stop()
                pytest.fail(f"the container did not answer its health check:\n{logs}")
            time.sleep(0.5)

    def exec(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return podman("exec", self.id, *args, check=False, timeout=timeout)

    def page(self, model: str | None = None) -> Session:
        """The first page over Streamlit's websocket, as a browser loads it, then the picker's
        first option starting with `model`, when one is asked for."""
        ws = f"ws://127.0.0.1:{self.port}/_stcore/stream"
        session = Session(ws, Stats(), random.Random(0), 60.0, (0.1, 0.2))

        async def visit() -> None:
            async with session.connect() as socket:
                await session._request(socket)
                if model is not None:
                    options = session.page.widgets["model"][1].options
                    picked = next((o for o in options if o.startswith(model)), None)
                    assert picked is not None, f"no {model} in the picker: {options}"
                    session.choose("model", picked)
                    await session._request(socket)

        asyncio.run(visit())
        return session

    def stop(self) -> None:
        podman("rm", "-f", self.id, check=False)


@pytest.fixture(scope="module")
def volume(tmp_path_factory) -> Path:
    if shutil.which("podman") is None:
        no_image("podman is not installed (Debian: apt-get install podman)")
    if podman("image", "exists", IMAGE, check=False).returncode != 0:
        no_image(f"no image {IMAGE}: build it with `bash .ci/container.sh`")
    folder = tmp_path_factory.mktemp("user_models")
    os.chown(folder, int(UID), int(UID))  # as a volume for the image's user must be
    return folder


@pytest.fixture(scope="module")
def container(volume):
    c = Container(volume)
    yield c
    c.stop()


def test_the_image_carries_its_health_check_and_the_container_passes_it(container):
    check = podman("image", "inspect", IMAGE, "--format", "{{json .HealthCheck}}").stdout
    assert "/_stcore/health" in check, check
    run = podman("healthcheck", "run", container.id, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_app_runs_as_the_unprivileged_user_on_a_read_only_root(container):
    assert container.exec("id", "-u").stdout.strip() == UID
    wrote = container.exec("python", "-c", "open('/app/tfviz/x', 'w')")
    assert wrote.returncode != 0 and "Read-only file system" in wrote.stderr, wrote.stderr
    # The check can fail: the same image run as root says so.
    root = podman("run", "--rm", "--user", "0", "--entrypoint", "id", IMAGE, "-u")
    assert root.stdout.strip() == "0" != UID


def test_the_first_page_shows_a_prediction_and_no_error(container):
    page = container.page()
    assert page.page.shows_code_in("prediction"), page.stats.samples
    assert not page.stats.errors, page.stats.samples


def test_a_model_trained_in_the_container_is_saved_to_the_volume_and_listed_by_a_new_one(
    container, volume
):
    out = f"/app/user_models/{TRAINED}.safetensors"
    trained = container.exec(
        "python", "-m", "tfviz.cli.train", "--task", "reverse", "--steps", "30", "--out", out
    )
    assert trained.returncode == 0, trained.stdout[-1000:] + trained.stderr[-2000:]
    saved = volume / f"{TRAINED}.safetensors"
    model, meta = load_checkpoint(saved)  # whole, and readable outside the container
    assert meta.task == "reverse"
    assert os.stat(saved).st_uid == int(UID)
    again = Container(volume)  # a new container on the same volume: an update, a restart
    try:
        page = again.page(model=TRAINED)
        assert not page.stats.errors, page.stats.samples
        # page() found it among the picker's options and picked it; the page then predicts.
        assert page.page.shows_code_in("prediction")
    finally:
        again.stop()


def test_a_browser_opens_the_container_s_page(container):
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        no_image(f"no Chromium at {CHROMIUM}")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{container.port}/", timeout=60_000)
            page.wait_for_selector(CODE, timeout=60_000)
            assert page.locator(EXCEPTION).count() == 0
            assert page.locator(CODE).first.inner_text().strip()
        finally:
            browser.close()
