"""Starting the app for benchmarks and browser tests: a free loopback port, a health probe, and
the `streamlit run` command every one of them uses."""

from __future__ import annotations

import socket
import sys
import urllib.error
import urllib.request


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(base_url: str) -> bool:
    """True when Streamlit's health endpoint at base_url answers "ok"."""
    try:
        with urllib.request.urlopen(f"{base_url}/_stcore/health", timeout=2) as r:
            return r.status == 200 and r.read().strip() == b"ok"
    except (urllib.error.URLError, OSError):
        return False


def streamlit_command(app: str, port: int, *extra: str) -> list[str]:
    """`streamlit run app` headless on 127.0.0.1:port, no telemetry, no file watcher."""
    return [
        sys.executable, "-m", "streamlit", "run", str(app),
        f"--server.port={port}", "--server.address=127.0.0.1", "--server.headless=true",
        "--browser.gatherUsageStats=false", "--server.fileWatcherType=none", *extra,
    ]  # fmt: skip
