"""A stopping server lets its running jobs finish: SIGTERM drains the job manager first.

A rolling update (Kubernetes, `docker compose up` with a new image, `docker stop`) sends SIGTERM
and, after a grace period, SIGKILL. Streamlit's own SIGTERM handler stops the server at once, and
the worker threads (daemons) die with it: a student's training a few seconds from done would be
lost. So once a job manager exists, SIGTERM first drains it (tfviz.serve.jobs.JobManager.drain: no
new job, queued ones end unstarted, running ones get up to $TFVIZ_DRAIN_SECONDS), then hands over to
Streamlit's handler, which stops the server and the process exits 0. The pages stay served while
it drains. A second SIGTERM, or SIGINT (Ctrl-C in a terminal), stops at once.

Python lets only the main thread install a signal handler, and a script run is on another thread:
the handler is installed by a callback on the server's event loop, which runs on the main thread.
A server that never created a job manager has nothing to drain and keeps Streamlit's handler.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading

from tfviz.serve.jobs import JobManager


def drain_on_sigterm(manager: JobManager, seconds: float) -> bool:
    """Install the draining SIGTERM handler for this process; False where there is no server
    event loop to install it from (a script run outside `streamlit run`, such as AppTest)."""
    from streamlit.runtime import Runtime

    if not Runtime.exists():
        return False
    # A private accessor, the only way to the loop the server runs on (tests/deploy/test_drain.py
    # fails if a Streamlit upgrade removes it: the server would then stop without draining).
    loop = getattr(Runtime.instance()._get_async_objs(), "eventloop", None)
    if not isinstance(loop, asyncio.AbstractEventLoop) or loop.is_closed():
        return False  # AppTest's stand-in runtime

    def install() -> None:  # on the main thread
        streamlit_handler = signal.getsignal(signal.SIGTERM)

        def hand_over(signum: int) -> None:
            signal.signal(signal.SIGTERM, streamlit_handler)
            if callable(streamlit_handler):
                streamlit_handler(signum, None)
            else:  # no Python handler was set: the default action ends the process
                signal.raise_signal(signum)

        def drain_then_stop(signum: int) -> None:
            print(f"tfviz: SIGTERM: running jobs may finish for {seconds:g} s", file=sys.stderr)
            finished = manager.drain(seconds)
            print(
                "tfviz: every job ended; stopping"
                if finished
                else "tfviz: jobs still running after the grace period were cancelled; stopping",
                file=sys.stderr,
            )
            loop.call_soon_threadsafe(hand_over, signum)

        def on_sigterm(signum: int, frame) -> None:
            if manager.draining:  # asked twice: stop now
                hand_over(signum)
                return
            threading.Thread(
                target=drain_then_stop, args=(signum,), name="tfviz-drain", daemon=True
            ).start()

        signal.signal(signal.SIGTERM, on_sigterm)

    loop.call_soon_threadsafe(install)
    return True
