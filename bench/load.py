"""Load benchmark: N concurrent sessions against a local tfviz server, over Streamlit's websocket.

Each session speaks the protocol the browser speaks (protobuf BackMsg / ForwardMsg on
ws://HOST/_stcore/stream), without a browser: it loads the page, then until the time is up it
types a new random valid sequence for the shown model's task, toggles W_o between "learned" and
"off", and waits a random think time between actions. Printed: requests, errors, p50/p95 rerun
latency, and the server's memory (VmRSS, children included) at start, per session at peak and
after every session has closed.

Targets on 2 cores: 40 sessions with 0 errors, p95 rerun latency under 2 s, memory back within 10%
of its start once the sessions close. The script says whether each is met and exits 0 either way
(a benchmark, not a test), unless the server fails to start (exit 1).

With --models toy,minilm the benchmark runs once per entry, each on a fresh server: "toy" is
the plain run above (the opening toy model); "minilm" has every session pick the pretrained
all-MiniLM-L6-v2 first and type sentences into sentence A. Then the ratio of the two runs' peak
memory is printed (issue 9's target: within 1.5x), and the MiniLM run's memory per session is
set against the model's own size: sessions share one copy (st.cache_resource), so each adds far
less than a model.

With --models decoder (issue 32) the server's $TFVIZ_PRETRAINED_DIR holds one random decoder of a
real model's sizes (--decoder llama: SmolLM-135M's, as bench/hf_decoders.py builds it; gpt2,
qwen2), every session picks it first and types texts of 5 to 20 words, toggling W_o as above;
its memory per session is set against the decoder's weights in the same way. A decoder's rerun
costs one traced pass of ~135-500 M parameters (two with W_o off), so it is run with fewer
sessions or longer think times than the toy run's 40 on two cores.

With --classes N, N classes come one after another to the one server: each class's sessions act,
close, and then the memory is read; printed are the start, each class's peak and after-close
memory and their ratio to the start, and whether the server comes back within 25% of its start
after each class with classes 2, 3, ... not above class 1's after-close + 5% (a server that holds
what each class left, or grows class after class, does not).

Usage: python -m bench.load [--sessions 40] [--seconds 60] [--port P]
       python -m bench.load --models decoder --classes 3 [--sessions 20]
       python -m bench.load --models toy,minilm [--seconds 60]
       python -m bench.load --models decoder [--decoder llama] [--sessions 10]
       python -m bench.load --url http://127.0.0.1:8501 [--pid PID]   (a server already running)

The protocol and the simulated user are bench/session.py's (its notes say how it speaks).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

from bench.harness import (
    descendants,
    free_port,
    percentile,
    start_server,
    stop_server,
    wait_healthy,
)
from bench.session import Session, Stats, one_model_pick, one_page_load

TARGET_SESSIONS = 40
TARGET_P95_S = 2.0
TARGET_MEMORY_RATIO = 0.10
TARGET_CLASS_MEMORY = 0.25  # --classes: after each class, memory within 25% of its start
TARGET_CLASS_GROWTH = 0.05  # and classes 2, 3, ... not above class 1's after-close + 5%
TARGET_MINILM_MEMORY = 1.5  # peak memory with MiniLM / the same run on toy models (issue 9)
MODELS = ("toy", "minilm", "decoder")  # what --models takes


# ---- server memory ----------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of pid and its children so far, in seconds; None once pid is gone."""
    ticks, seen = 0, False
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
        seen = True
    return ticks / os.sysconf("SC_CLK_TCK") if seen else None


def rss_bytes(pid: int) -> int | None:
    """VmRSS of pid and its children, in bytes; None once pid is gone."""
    total, seen = 0, False
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        seen = True
                        break
        except OSError:
            continue
    return total if seen else None


async def settled_rss(pid: int, samples: int = 3, gap: float = 0.5) -> int | None:
    """The smallest of a few readings, so a transient allocation does not count."""
    values = []
    for i in range(samples):
        if i:
            await asyncio.sleep(gap)
        value = rss_bytes(pid)
        if value is not None:
            values.append(value)
    return min(values) if values else None


class PeakSampler:
    """Reads the server's RSS every interval until stopped; keeps the largest."""

    def __init__(self, pid: int, interval: float = 0.5):
        self.pid, self.interval, self.peak = pid, interval, 0
        self._task: asyncio.Task | None = None

    async def _loop(self) -> None:
        while True:
            value = rss_bytes(self.pid)
            if value is not None:
                self.peak = max(self.peak, value)
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> int:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        value = rss_bytes(self.pid)
        if value is not None:
            self.peak = max(self.peak, value)
        return self.peak


# ---- the benchmark ---------------------------------------------------------------------------


def mib(n: float | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.1f} MiB"


async def bench(args, base_url: str, pid: int | None, model: str | None = None) -> dict:
    """One run; model: the picker option every session picks first (None: the opening one)."""
    ws_url = base_url.replace("http://", "ws://").replace("https://", "wss://") + "/_stcore/stream"
    result: dict = {"sessions": args.sessions, "seconds": args.seconds, "url": base_url}
    result["model"] = model or "toy"

    cold = rss_bytes(pid) if pid else None
    # Warm-up: the first page load imports torch, loads the checkpoints and fills caches, which
    # every later session shares; memory "at start" is measured after it. A model the sessions
    # pick is picked by it too, so that "at start" holds that model once and the growth per
    # session shows whether each session holds one more.
    warm_stats = Stats()
    if model is None:
        await one_page_load(ws_url, args.timeout * 2, warm_stats)
    else:
        await one_model_pick(ws_url, args.timeout * 2, warm_stats, model)
    result["warmup_errors"] = sum(warm_stats.errors.values())
    result["warmup_samples"] = warm_stats.samples
    start = await settled_rss(pid) if pid else None
    result.update(rss_cold=cold, rss_start=start)
    classes = []
    for n in range(args.classes):
        figures = await one_class(args, ws_url, pid, model, args.seed + n, start)
        classes.append(figures)
        if args.classes > 1:
            print(f"class {n + 1} of {args.classes}: {class_line(figures, start)}", flush=True)
    result.update(classes[0])  # the first class's figures, as a one-class run prints them
    result["classes"] = [
        {key: figures[key] for key in ("rss_peak", "rss_after", "errors", "reruns")}
        for figures in classes
    ]
    return result


async def one_class(
    args, ws_url: str, pid: int | None, model: str | None, seed: int, start: int | None
) -> dict:
    """One class: args.sessions sessions act for args.seconds and close; then, the sessions
    expired, the server's memory is read. Its figures."""
    stats = Stats()
    sampler = PeakSampler(pid) if pid else None
    if sampler:
        sampler.start()
    cpu0 = cpu_seconds(pid) if pid else None
    load0 = os.getloadavg()[0]
    t0 = time.monotonic()
    deadline = t0 + args.seconds
    master = random.Random(seed)

    async def user(i: int) -> None:
        rng = random.Random(master.random())
        await asyncio.sleep(rng.uniform(0, args.ramp))  # users arrive over the ramp
        think = (args.think_min, args.think_max)
        await Session(ws_url, stats, rng, args.timeout, think, model).run(deadline)

    # A session ends at the deadline after its request in flight (timeout bounded); this bound
    # only guards against a hung connection.
    tasks = [asyncio.create_task(user(i)) for i in range(args.sessions)]
    _, pending = await asyncio.wait(tasks, timeout=args.seconds + args.ramp + args.timeout + 30)
    for task in pending:
        task.cancel()
        stats.error("hung", "a session did not end")
    await asyncio.gather(*pending, return_exceptions=True)
    elapsed = time.monotonic() - t0
    cpu1 = cpu_seconds(pid) if pid else None
    load1 = os.getloadavg()[0]
    peak = await sampler.stop() if sampler else None
    after = await memory_after(args, ws_url, pid) if pid else None
    return dict(
        elapsed=elapsed,
        requests=stats.requests,
        page_loads=len(stats.page_loads),
        reruns=len(stats.reruns),
        errors=sum(stats.errors.values()),
        errors_by_kind=dict(stats.errors),
        error_samples=stats.samples,
        warnings=stats.warnings,
        page_load_p50=percentile(stats.page_loads, 50),
        page_load_p95=percentile(stats.page_loads, 95),
        rerun_p50=percentile(stats.reruns, 50),
        rerun_p95=percentile(stats.reruns, 95),
        rerun_max=max(stats.reruns) if stats.reruns else math.nan,
        rss_peak=peak,
        rss_per_session=(peak - start) / args.sessions if peak and start else None,
        rss_after=after,
        server_cpu=cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None,
        loadavg=(load0, load1),
        cores=len(os.sched_getaffinity(0)),
    )


async def memory_after(args, ws_url: str, pid: int) -> int | None:
    """The server's memory once a class has gone: closed sessions stay for reconnection for the
    TTL; then one more session comes and goes, which makes the server drop the expired ones, and
    the memory is read."""
    await asyncio.sleep(args.settle)
    await one_page_load(ws_url, args.timeout, Stats())
    await asyncio.sleep(1.0)
    return await settled_rss(pid)


def report(r: dict) -> None:
    """Print the figures and whether each target is met."""
    print(f"tfviz load benchmark: {r['sessions']} sessions for {r['seconds']:g} s on {r['url']}")
    if r["model"] != "toy":
        print(f"every session picks {r['model']} first")
    if r["warmup_errors"]:
        print(f"warm-up page load failed: {'; '.join(r['warmup_samples'])}")
    print(
        f"requests: {r['requests']} ({r['page_loads']} page loads, {r['reruns']} reruns) "
        f"in {r['elapsed']:.1f} s, {r['requests'] / max(r['elapsed'], 1e-9):.1f}/s"
    )
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["errors_by_kind"].items()))
    print(f"errors: {r['errors']}" + (f" ({kinds})" if kinds else ""))
    for sample in r["error_samples"]:
        print(f"  e.g. {sample}")
    if r["warnings"]:
        print(f"warnings shown by the app (not errors): {r['warnings']}")
    if r["server_cpu"] is not None:
        cpu = r["server_cpu"]
        print(
            f"server CPU: {cpu:.1f} s in {r['elapsed']:.1f} s ({cpu / r['elapsed']:.2f} cores), "
            f"{1000 * cpu / max(r['requests'], 1):.0f} ms per request"
        )
    print(
        f"machine: {r['cores']} cores, load average {r['loadavg'][0]:.1f} at start, "
        f"{r['loadavg'][1]:.1f} at end (the server and these sessions included)"
    )
    print(f"page load latency: p50 {r['page_load_p50']:.3f} s, p95 {r['page_load_p95']:.3f} s")
    print(
        f"rerun latency: p50 {r['rerun_p50']:.3f} s, p95 {r['rerun_p95']:.3f} s, "
        f"max {r['rerun_max']:.3f} s"
    )
    if r["rss_start"] is None:
        print("memory: skipped (no server pid; pass --pid with --url)")
    else:
        print(
            f"memory at start: {mib(r['rss_start'])} (before the warm-up page load: "
            f"{mib(r['rss_cold'])})"
        )
        print(
            f"memory at peak: {mib(r['rss_peak'])}, per session: {mib(r['rss_per_session'])} "
            f"((peak - start) / {r['sessions']})"
        )
        if r["rss_after"] is not None:
            change = r["rss_after"] / r["rss_start"] - 1
            print(f"memory after close: {mib(r['rss_after'])} ({change:+.1%} of start)")
        else:
            print("memory after close: n/a (the server is gone)")

    print("targets:")
    if r["sessions"] < TARGET_SESSIONS:
        verdict = f"n/a (ran {r['sessions']} sessions; the target is {TARGET_SESSIONS})"
    else:
        verdict = "met" if r["errors"] == 0 and r["reruns"] > 0 else "NOT met"
        verdict += f" ({r['errors']} errors)"
    print(f"  {TARGET_SESSIONS} sessions with 0 errors: {verdict}")
    p95 = r["rerun_p95"]
    verdict = "n/a (no rerun)" if math.isnan(p95) else "met" if p95 < TARGET_P95_S else "NOT met"
    print(f"  p95 rerun latency under {TARGET_P95_S:g} s: {verdict} ({p95:.3f} s)")
    if r["rss_start"] is None or r["rss_after"] is None:
        verdict = "n/a (no memory figures)"
    else:
        change = r["rss_after"] / r["rss_start"] - 1
        ok = abs(change) <= TARGET_MEMORY_RATIO
        verdict = f"{'met' if ok else 'NOT met'} ({change:+.1%})"
    print(f"  memory after close within {TARGET_MEMORY_RATIO:.0%} of start: {verdict}")
    if len(r.get("classes", ())) > 1:
        report_classes(r)


def class_line(figures: dict, start: int | None) -> str:
    """One class's peak and after-close memory, each against the server's start."""
    peak, after = figures["rss_peak"], figures["rss_after"]
    if not start or peak is None or after is None:
        return f"{figures['errors']} errors, memory n/a"
    return (
        f"peak {mib(peak)} ({peak / start:.2f}x start), after close {mib(after)} "
        f"({after / start:.2f}x start), {figures['errors']} errors"
    )


def report_classes(r: dict) -> None:
    """--classes N: each class's memory on the one server, and whether it comes back."""
    classes, start = r["classes"], r["rss_start"]
    print(f"\n{len(classes)} classes in a row on one server, memory at start {mib(start)}:")
    for n, figures in enumerate(classes, 1):
        print(f"  class {n}: {class_line(figures, start)}")
    afters = [figures["rss_after"] for figures in classes]
    if not start or None in afters:
        print("  target: n/a (no memory figures)")
        return
    back = all(after <= start * (1 + TARGET_CLASS_MEMORY) for after in afters)
    flat = all(after <= afters[0] * (1 + TARGET_CLASS_GROWTH) for after in afters[1:])
    print(
        f"  target: within {TARGET_CLASS_MEMORY:.0%} of start after each class, and classes 2+ "
        f"not above class 1's after-close + {TARGET_CLASS_GROWTH:.0%}: "
        f"{'met' if back and flat else 'NOT met'} (back: {back}, no growth: {flat})"
    )


def report_models(results: dict[str, dict]) -> None:
    """MiniLM's run against the toy run: peak memory ratio, and no copy of the model per session;
    a decoder's run: its memory per session against its weights."""
    decoder = results.get("decoder")
    if decoder and decoder.get("weights_bytes") and decoder["rss_per_session"] is not None:
        print(f"\n{decoder['model']}, {decoder['sessions']} sessions:")
        shared_copy(decoder["rss_per_session"], decoder["weights_bytes"], decoder["sessions"])
    toy, minilm = results.get("toy"), results.get("minilm")
    if not toy or not minilm or not toy["rss_peak"] or not minilm["rss_peak"]:
        return
    from tfviz.hf import pretrained

    weights = (pretrained.model_dir() / "model.safetensors").stat().st_size
    ratio = minilm["rss_peak"] / toy["rss_peak"]
    print(f"\n{pretrained.NAME} against toy models, {minilm['sessions']} sessions each:")
    print(
        f"  memory at start: {mib(minilm['rss_start'])} vs {mib(toy['rss_start'])} "
        f"(MiniLM loaded once: {mib(minilm['rss_start'] - toy['rss_start'])} more; its "
        f"weights file: {mib(weights)})"
    )
    print(f"  memory at peak: {mib(minilm['rss_peak'])} vs {mib(toy['rss_peak'])}")
    ok = ratio <= TARGET_MINILM_MEMORY
    print(
        f"  peak ratio MiniLM / toy: {ratio:.2f} (target <= {TARGET_MINILM_MEMORY:g}: "
        f"{'met' if ok else 'NOT met'})"
    )
    shared_copy(minilm["rss_per_session"] or 0.0, weights, minilm["sessions"])


def shared_copy(per_session: float, weights: float, sessions: int) -> None:
    """A run's memory per session against its model's weights: far less means one shared copy."""
    shared = per_session < weights / 4
    print(
        f"  per session: {mib(per_session)}, {per_session / weights:.1%} of the "
        f"weights: {'one shared copy' if shared else 'MORE than a shared copy would need'} "
        f"({mib(weights * sessions)} if every session held its own)"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=40, help="concurrent sessions (default 40)")
    p.add_argument("--seconds", type=float, default=60, help="how long they act (default 60)")
    p.add_argument("--port", type=int, default=0, help="port of the server started here")
    p.add_argument("--url", help="use this running server (e.g. http://127.0.0.1:8501) instead")
    p.add_argument("--pid", type=int, help="with --url: the server's pid, for memory figures")
    p.add_argument("--app", default="app.py", help="the script the server runs (default app.py)")
    p.add_argument(
        "--models",
        default="toy",
        help="comma-separated runs, each on a fresh server: 'toy' (the opening model), "
        "'minilm' (sessions pick all-MiniLM-L6-v2; with toy, their memory is compared) and/or "
        "'decoder' (sessions pick a random decoder of --decoder's family)",
    )
    p.add_argument(
        "--decoder",
        default="llama",
        choices=("gpt2", "llama", "qwen2"),
        help="with --models decoder: the family, at its real model's sizes (default llama)",
    )
    p.add_argument(
        "--tiny-decoder",
        action="store_true",
        help="with --models decoder: 2 layers, D 64, 512 tokens (a smoke test of this script)",
    )
    p.add_argument("--think-min", type=float, default=0.2, help="think time, seconds (min)")
    p.add_argument("--think-max", type=float, default=1.0, help="think time, seconds (max)")
    p.add_argument("--ramp", type=float, default=2.0, help="sessions start over this many s")
    p.add_argument("--timeout", type=float, default=30.0, help="per request, seconds")
    p.add_argument(
        "--session-ttl",
        type=int,
        default=5,
        help="server.disconnectedSessionTTL of the server started here (default 5 s)",
    )
    p.add_argument(
        "--settle",
        type=float,
        help="seconds to wait after the sessions close before the memory reading "
        "(default: session TTL + 2)",
    )
    p.add_argument("--startup-timeout", type=float, default=120.0, help="server start, seconds")
    p.add_argument(
        "--classes",
        type=int,
        default=1,
        help="classes in a row on the one server: each class's sessions act, close, then the "
        "memory is read (default 1)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = p.parse_args(argv)
    if args.sessions < 1 or args.seconds <= 0 or args.think_min > args.think_max:
        p.error("need --sessions >= 1, --seconds > 0 and --think-min <= --think-max")
    if args.classes < 1:
        p.error("need --classes >= 1")
    if args.settle is None:
        args.settle = args.session_ttl + 2.0
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not args.models or set(args.models) - set(MODELS):
        p.error(f"--models takes a comma-separated list of {', '.join(MODELS)}")
    if args.url and len(args.models) > 1:
        p.error("--url measures one running server: give one of --models")
    return args


def picked(model: str, decoder: str = "llama") -> str | None:
    """The model picker option a --models entry makes sessions pick (None: the opening model;
    a decoder's folder is named after its family, its option "llama (Llama)")."""
    if model == "toy":
        return None
    if model == "decoder":
        return decoder
    from tfviz.hf import pretrained

    return pretrained.NAME


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = {}
    for i, model in enumerate(args.models):
        if i:
            print()
        result = run_once(args, model)
        if result is None:
            return 1
        results[model] = result
    report_models(results)
    if args.json:
        out = results[args.models[0]] if len(results) == 1 else results
        args.json.write_text(json.dumps(out, indent=2, default=str))
    return 0


def run_once(args, model: str) -> dict | None:
    """One benchmark run on a fresh server (or the --url one); None if the server is not up."""
    proc = None
    with tempfile.TemporaryDirectory(prefix="tfviz-load-") as tmp:
        log_path = Path(tmp) / "server.log"
        try:
            if args.url:
                base_url = args.url.rstrip("/")
                host = urlparse(base_url).hostname
                pid = args.pid
                if not wait_healthy(base_url, None, args.startup_timeout):
                    print(f"server at {base_url} is not healthy (/_stcore/health)")
                    return None
                print(f"using the running server at {base_url} ({host})")
            else:
                port = args.port or free_port()
                base_url = f"http://127.0.0.1:{port}"
                models_dir = None
                if model == "decoder":
                    models_dir = decoder_folder(args.decoder, Path(tmp), args.tiny_decoder)
                started = time.monotonic()
                proc = start_server(
                    port, args.session_ttl, log_path, Path(tmp), args.app, models_dir
                )
                pid = proc.pid
                if not wait_healthy(base_url, proc, args.startup_timeout):
                    log = log_path.read_text(errors="replace")[-3000:]
                    print(f"the server did not start (exit code {proc.poll()}); its log:\n{log}")
                    return None
                print(f"server pid {pid} healthy after {time.monotonic() - started:.1f} s")
            result = asyncio.run(bench(args, base_url, pid, picked(model, args.decoder)))
            if model == "decoder" and not args.url:
                weights = models_dir.glob(f"{args.decoder}/*.safetensors")
                result["weights_bytes"] = sum(f.stat().st_size for f in weights)
            report(result)
            return result
        finally:
            if proc is not None:
                stop_server(proc)


def decoder_folder(kind: str, tmp: Path, tiny: bool = False) -> Path:
    """A folder of model folders holding one random decoder of this family at its real model's
    sizes (bench/decoder_folders.py builds it, as bench/hf_decoders.py does), or TINY_DECODER's,
    for the server's $TFVIZ_PRETRAINED_DIR."""
    from bench import decoder_folders

    root = tmp / "models"
    sizes = decoder_folders.SIZES[kind]
    if tiny:
        sizes = dict(sizes, **TINY_DECODER)
    started = time.monotonic()
    decoder_folders.build(kind, root / kind, sizes)
    took = time.monotonic() - started
    named = "a tiny" if tiny else f"a {decoder_folders.NAMED[kind]}-sized"
    print(f"built {named} random {kind} in {took:.1f} s")
    return root


TINY_DECODER = dict(layers=2, heads=4, kv_heads=2, hidden=64, ff=128, vocab=512, positions=256)


if __name__ == "__main__":
    sys.exit(main())
