"""Smoke test of the load benchmark: 2 sessions for 5 s against a server of its own.

Takes about 20 s (a real `streamlit run app.py` on a free loopback port). Deselect with
`-m "not bench"` (or `-k "not load_bench"`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "load.py"
APP = ROOT / "app.py"

pytestmark = pytest.mark.bench


def test_two_sessions_run_without_errors_and_report_memory(tmp_path):
    assert APP.is_file(), f"{APP} does not exist: there is no app to load"  # a defect, not a skip
    out = tmp_path / "result.json"
    assert BENCH.is_file()
    cmd = [sys.executable, "-m", "bench.load", "--sessions", "2", "--seconds", "5", "--ramp", "0.5"]
    cmd += ["--session-ttl", "2", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text

    requests = re.search(r"^requests: (\d+) \(\d+ page loads, (\d+) reruns\)", text, re.M)
    assert requests, text
    assert int(requests.group(1)) > 0 and int(requests.group(2)) > 0, text
    assert re.search(r"^errors: 0$", text, re.M), text
    assert re.search(r"^rerun latency: p50 \d+\.\d+ s, p95 \d+\.\d+ s", text, re.M), text
    for line in ("memory at start: ", "memory at peak: ", "memory after close: "):
        assert re.search(rf"^{line}\d+\.\d MiB", text, re.M), f"no {line!r} figure in:\n{text}"
    assert "per session: " in text, text

    result = json.loads(out.read_text())
    assert result["requests"] > 0 and result["reruns"] > 0
    assert result["errors"] == 0, result["error_samples"]
    assert result["warmup_errors"] == 0, result["warmup_samples"]
    start, peak, after = result["rss_start"], result["rss_peak"], result["rss_after"]
    MiB = 2**20
    # "At start" is read after the warm-up page load, so the server has torch and streamlit
    # imported: importing those two alone takes about 250 MiB resident here (bench/README's
    # 40-session run: 284.2 MiB at start). 150 MiB is a floor a wrong unit or pid misses.
    assert 150 * MiB < start < 4096 * MiB, result
    # The peak is the largest reading taken after "start", while two more sessions run: it
    # cannot be below start, and two toy sessions do not add gigabytes.
    assert start <= peak < start + 1024 * MiB, result
    assert result["rss_per_session"] == pytest.approx((peak - start) / 2), result
    assert 0.5 * start < after < peak + 256 * MiB, result
    # The printed figures are the JSON's (the report a person reads is the measured one).
    for line, value in (("memory at start", start), ("memory at peak", peak)):
        shown = re.search(rf"^{line}: (\d+\.\d) MiB", text, re.M)
        assert float(shown.group(1)) == pytest.approx(value / MiB, abs=0.051), (line, text)


def test_a_decoders_sessions_type_text_and_report_memory_against_its_weights(tmp_path):
    """--models decoder: the server's folder holds one (here tiny) Llama; every session picks
    it, types texts and switches W_o, with no error; its memory per session is set against the
    decoder's weights."""
    if os.environ.get("CI", "").lower() != "true":  # (under CI it is installed: never skipped)
        pytest.importorskip("transformers")  # bench/hf_decoders.py builds the folder with it
    cmd = [sys.executable, "-m", "bench.load", "--models", "decoder", "--tiny-decoder"]
    cmd += ["--sessions", "2", "--seconds", "5", "--ramp", "0.5", "--session-ttl", "2"]
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [*cmd, "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text
    assert "every session picks llama first" in text, text
    assert re.search(r"^errors: 0$", text, re.M), text
    result = json.loads(out.read_text())
    assert result["warmup_errors"] == 0, result["warmup_samples"]
    assert result["reruns"] > 2 and result["errors"] == 0, result["error_samples"]
    assert result["weights_bytes"] > 0
    shown = re.search(r"^  per session: (\d+\.\d) MiB, (\d+\.\d)% of the weights", text, re.M)
    assert shown, text
    per_session = result["rss_per_session"]
    assert float(shown.group(2)) == pytest.approx(
        100 * per_session / result["weights_bytes"], abs=0.051
    )
