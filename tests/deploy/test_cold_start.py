"""A class on a cold server: 40 sessions at once on a fresh server, 5 starts, no traceback.

On a fresh server each session runs the script in its own thread, so the first page's imports
happen in several threads at once; plotly once found numpy half-imported by another session's
thread ("partially initialized module 'numpy' has no attribute 'ndarray'", 3 of 40 sessions).
app.py now imports numpy and pandas whole before anything draws. This runs bench/cold_start.py's
check: 5 fresh `streamlit run app.py`, each met by 40 websocket sessions opened at once, each
loading the first page; every session must show its prediction, and neither the sessions nor the
server's log may show an exception.

Without app.py's two imports this test fails: the race showed on most starts under load (figures
in bench/README.md, "Cold start"). The second test runs the same check against a small app that
fails on purpose, so each count is known to be able to fail.

Takes about 32 s on 2 busy cores (load average 6 to 9; each start 5 to 8 s). Deselect with
-m "not bench".
"""

from __future__ import annotations

import textwrap

import pytest

from bench.cold_start import cold_start
from tests.conftest import ROOT

pytestmark = pytest.mark.bench

STARTS = 5
SESSIONS = 40


def test_forty_sessions_at_once_on_five_cold_starts_all_see_a_prediction_and_no_exception():
    assert (ROOT / "app.py").is_file()
    lines: list[str] = []
    results = cold_start(STARTS, SESSIONS, str(ROOT / "app.py"), log=lines.append)
    text = "\n".join(lines)
    assert len(results) == STARTS
    for i, r in enumerate(results, 1):
        where = f"start {i}: {r.samples} {r.log_samples}\n{text}"
        assert r.loaded == SESSIONS, where  # every page load finished
        assert r.page_errors == 0, where  # no exception element, no error alert
        assert r.failures == 0, where  # no timeout, no closed socket
        assert r.log_tracebacks == 0 and r.log_problems == 0, where
        assert r.predictions == SESSIONS, where
        # The sessions did come at once: well inside the first page's imports (seconds on a
        # cold server), the window of the race; 2 s leaves room for the suite's other worker.
        assert r.connect_spread_s < 2.0, where


# A stand-in app, fast to start: of every five sessions one raises, one draws the prediction's
# code block outside its container, one draws it in a slot that is then emptied, one shows an
# error alert instead, and one draws it properly.
FAULTY_APP = """
    import itertools

    import streamlit as st


    @st.cache_resource
    def counter():
        return itertools.count()


    if "n" not in st.session_state:
        st.session_state.n = next(counter())
    kind = st.session_state.n % 5
    st.text_input("Sequence", key="sequence")
    if kind == 0:
        raise RuntimeError("a session that fails")
    if kind == 1:
        st.code("not in the prediction's container")
        st.container(key="prediction").text("no code here")
    if kind == 2:
        slot = st.empty()
        with slot.container():
            with st.container(key="prediction"):
                st.code("gone in a moment")
        slot.empty()
    if kind == 3:
        st.error("an error alert")
    if kind == 4:
        with st.container(key="prediction"):
            st.code("abc")
"""


def test_the_check_counts_exceptions_alerts_missing_predictions_and_tracebacks(tmp_path):
    app = tmp_path / "faulty_app.py"
    app.write_text(textwrap.dedent(FAULTY_APP))
    (r,) = cold_start(1, 10, str(app), timeout=60, log=lambda line: None)
    assert r.loaded == 10
    assert r.predictions == 2, r  # kind 4 only: a code block elsewhere or emptied does not count
    assert r.page_errors == 4, r  # two exceptions and two error alerts
    assert r.failures == 0, r
    assert r.log_tracebacks == 2, r  # Streamlit logs each uncaught exception with its traceback
    assert any("RuntimeError: a session that fails" in line for line in r.log_samples), r
    assert not r.clean
