"""Nothing is fetched from the network at run time: a started server, with a page loaded, makes
no connection to any address outside this machine.

The server runs with a sitecustomize.py (on PYTHONPATH) that wraps socket.connect and
socket.getaddrinfo: a connection to a non-loopback address, or a lookup of a host name other than
localhost, is written down and refused before any packet leaves, so the test sends nothing
anywhere. Headless Streamlit used to ask an outside service for the machine's public
address at start-up; .streamlit/config.toml's browser.serverAddress stops that.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bench.harness import free_port, stop_server, wait_healthy
from bench.session import Stats, one_page_load

ROOT = Path(__file__).resolve().parents[2]
GUARD = textwrap.dedent(
    """
    import ipaddress, os, socket

    _connect = socket.socket.connect
    _log = os.environ["TFVIZ_CONNECT_LOG"]

    def _outside(address) -> bool:
        if not isinstance(address, tuple):  # a unix socket
            return False
        try:
            ip = ipaddress.ip_address(address[0])
        except ValueError:  # a host name
            return address[0] not in ("localhost", "")
        return not ip.is_loopback

    def connect(self, address):
        if _outside(address):
            with open(_log, "a") as f:
                f.write(f"{self.type!r} {address!r}\\n")
            raise OSError("blocked by the test: no outbound connections")
        return _connect(self, address)

    _getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        # A name looked up is a connection about to be made (and a DNS query already sent).
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and _outside((name, 0)):
            with open(_log, "a") as f:
                f.write(f"lookup {name!r}\\n")
            raise socket.gaierror(socket.EAI_NONAME, "blocked by the test: no lookups")
        return _getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect
    socket.getaddrinfo = getaddrinfo
    """
)


def guarded_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(GUARD)
    log = tmp_path / "connections.log"
    log.write_text("")
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, "TFVIZ_CONNECT_LOG": str(log)}


def test_the_guard_sees_an_outbound_connection(tmp_path):
    # What the server test relies on: Streamlit's public-address lookup is caught (and refused).
    env = dict(os.environ, **guarded_env(tmp_path))
    code = "from streamlit import net_util; print(net_util.get_external_ip())"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "None", out.stderr[-2000:]
    assert (tmp_path / "connections.log").read_text().strip(), "the lookup was not seen"


@pytest.mark.parametrize(
    "address",
    [None, "0.0.0.0"],  # the README's `streamlit run app.py`; the Dockerfile's bind address
)
def test_a_started_server_makes_no_outbound_connection(tmp_path, address):
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), f"--server.port={port}"]
    if address is not None:
        cmd.append(f"--server.address={address}")
    env = dict(os.environ, TFVIZ_USER_MODELS=str(tmp_path / "user_models"), **guarded_env(tmp_path))
    with open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        assert wait_healthy(f"http://127.0.0.1:{port}", proc, 60), (
            tmp_path / "server.log"
        ).read_text()[-3000:]
        stats = Stats()
        asyncio.run(one_page_load(f"ws://127.0.0.1:{port}/_stcore/stream", 60, stats))
        assert stats.page_loads and not stats.errors, stats.errors
        time.sleep(1)  # anything started in the background after the page
    finally:
        stop_server(proc)
    assert (tmp_path / "connections.log").read_text() == "", "outbound connection attempted"
