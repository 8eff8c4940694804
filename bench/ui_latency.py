"""UI latency in a real Chromium: keystroke -> every chart redrawn; server start -> first render.

What a student feels. For each configuration (default model at T=8 and T=16, the largest bundled
model at T=16) the script types distinct valid sequences of length T into "Sequence", alternating
so that every edit really changes every chart, and measures in the page, with performance.now():

  start  the Enter keydown (a capture listener on the document, before Streamlit sees it);
  end    the script state went running -> notRunning after it (a fast run may never show
         "running": then the two next conditions stand for it), the prediction block shows the
         new input, every chart on the page has re-rendered after the keydown
         (plotly_afterplot / plotly_react on each plotly graph div, tfviz:drawn on each
         canvas chart of widgets.canvas_charts), nothing more was drawn for
         QUIET_MS, and two animation frames have passed after the last redraw (it is painted).

Per configuration it prints the median and p95 over --edits edits (after --warmup unrecorded
ones), and where the time went: Enter -> the app shows "running" (the request reaching the
server), running -> notRunning (the script run, its elements drawn as they arrive), notRunning ->
last chart painted (plotly finishing). The same edits are then timed over a bare websocket, without
a browser (the server's share: the request, the script run, the elements serialised), so the
browser's share is the difference.

Time to first render: from spawning `streamlit run` to the first page showing the prediction and
every chart drawn, over --starts fresh servers (a fresh browser context each time). With
--compare-app OTHER/app.py the starts alternate between the two apps (each served from its own
folder, so it imports its own tfviz) and the ratio of their medians is printed: a before/after
figure from one run. --first-render-only skips the keystroke measurements.

With --models reverse,minilm the keystrokes are measured on the toy `reverse` model (T=16, its
longest sequence) and on the pretrained all-MiniLM-L6-v2 (sentence A of --pieces word-pieces,
[CLS] and [SEP] included; default 32), side by side in one page of one server, and the ratio of
their p95 is printed (issue 9's target: MiniLM <= 1.5x reverse). A MiniLM edit is done when
sentence A's word-pieces show the new sentence and every chart has been repainted.

With --families bert,roberta,distilbert the keystrokes are also measured on models of the
server's folder ($TFVIZ_PRETRAINED_DIR), one per family, built for the run in its temporary
folder by bench/hf_families.py's builder: random masked-LM models of MiniLM's size (6 layers,
D = 384, 12 heads, d_ff = 1536, 30,522 embeddings, 512 positions; random weights cost what trained
ones do), with MiniLM's vocab.txt for BERT and DistilBERT and a byte-level BPE trained on WORDS
for RoBERTa, so that each sentence has exactly the asked number of pieces under that folder's own
tokenizer ('roberta:128': 128; default --pieces). They are picked as "bert (BERT)" and so on,
typed into sentence A and waited for as MiniLM is; each sentence has one mask marker in its
middle, so the fill-in-the-mask answer is computed on every edit, as on the model's own example.
The decoder families gpt2, llama and qwen2 are built by bench/hf_decoders.py's builder at their
real models' sizes (GPT-2 small, SmolLM-135M, Qwen2-0.5B) with its small tokenizer; their texts
are typed into the "Text" box, and an edit is done when the next-token table lists the new
text's tokens and every chart is repainted. Per family and length the median, the p95 and the
p95's ratio to MiniLM's at the same length (with minilm:N in --models) are printed.

With --floor the same edits are typed, by turns, into the app and into bench/floor_app.py's
attention page (the same text box, the input shown, ONE plain heatmap of the cells the app's
Attention view draws, the model run on every edit, on one torch thread as in the app), and the
ratio of their p95 is printed (issue 44's target: <= 1.0; issue 18's was 1.25); with --families,
the floor page reads the same folder model. --navigations N adds N page opens of each, by turns,
each in a fresh browser context on a warm server: navigation start -> the input and every chart
drawn (the app opened by a link to the model and the Attention tab). --bertviz adds, in the same
turns, bertviz's head_view page of the same attention opened from file:// (bench/standalone.py's
page and timing), and prints the app's median / bertviz's (issue 31's target: <= 3); --compare-app
OTHER/app.py adds that app's page, served beside this one (a before/after figure from one run).

With --floor --parts neuron,freedom,lens,shares the edits are typed with each part of the app
open (issue 46), by turns against bench/floor_app.py's page of the same part (the same box, the
input shown, plain plotly charts of the numbers the part shows, computed with the same
tfviz.analysis calls): the Attention tab with "Inside one head" switched on; "Take W_o apart" on
"W_o's freedom"; Analysis on "Logit lens" (folder models only: a toy model has no vocabulary);
"Before/after W_o" with its head shares. The bench clicks the tab and the section or toggle once
before the edits. A part's charts of the weights alone are not redrawn by an edit, in either page,
so there an edit ends when the charts it redraws are painted, the run finished and the input shown.

Targets (2 CPU cores): p95 under 300 ms at T=16; first render under 5 s. Met / not met is printed;
the exit status is 0 either way (a benchmark, not a test) unless nothing could be measured.

Needs Debian's Chromium at /usr/bin/chromium. Talks only to the servers it starts on 127.0.0.1.

Usage: python -m bench.ui_latency [--edits 30] [--warmup 3] [--starts 3] [--json out.json]
       python -m bench.ui_latency --first-render-only --starts 5 [--compare-app OLD/app.py]
       python -m bench.ui_latency --models reverse,minilm [--pieces 32] --starts 0
       python -m bench.ui_latency --floor --models reverse,minilm --starts 0 --navigations 10
           [--bertviz]
       python -m bench.ui_latency --models minilm:32 --families bert,roberta,distilbert
           [--pieces 32] --starts 0 --edits 15 --no-server-only
       python -m bench.ui_latency --floor --models reverse,minilm --families gpt2 --starts 0
           --edits 15 --no-server-only   (issue 44: the three kinds of model against the floor)
       python -m bench.ui_latency --floor --parts neuron,freedom,lens,shares --models reverse
           --families gpt2 --starts 0 --edits 12 --warmup 3 --no-server-only   (issue 46)
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import math
import os
import random
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

from bench.harness import (
    APP,
    CHROMIUM,
    FLOOR_APP,
    MODELS,
    TARGET_P95_MS,
    VIEWPORT,
    WORDS,
    Server,
    largest_bundled,
    launch_chromium,
    median,
    percentile,
    verdict,
)
from bench.pages import (
    EDIT_TIMEOUT_MS,
    FIRST_RENDER_JS,
    HARNESS_JS,
    QUIET_MS,
    bertviz_file,
    harnessed_page,
    open_file_page,
    pick_model,
    wait_quiet,
)

DEFAULT_MODEL = "reverse"
TARGET_MINILM_RATIO = 1.5  # MiniLM's p95 / reverse's p95, measured in the same run (issue 9)
MINILM = "minilm"  # what --models calls the pretrained sentence encoder
TARGET_FIRST_RENDER_S = 5.0
ALPHABET_RE = re.compile(r"Alphabet: (\S+)\s+Length: (\d+) to (\d+)")

# The page harness (HARNESS_JS, FIRST_RENDER_JS, waitEdit) is bench/pages.py's.

# When, in epoch ms, the first page load reached each step (see first_renders).
FIRST_RENDER_MARKS_JS = """
() => {
  const o = performance.timeOrigin, tf = window.__tfviz;
  const nav = performance.getEntriesByType('navigation')[0];
  const last = tf.ws.length ? tf.ws[tf.ws.length - 1][0] : null;
  return {
    page_ready: nav ? o + nav.domContentLoadedEventEnd : null,
    first_message: tf.ws.length > 2 ? o + tf.ws[2][0] : null,
    last_message: last === null ? null : o + last,
  };
}
"""

# ---- configurations ----------------------------------------------------------------------------


@dataclass
class Config:
    """One measured configuration: a model and a sequence length."""

    model: str
    T: int  # characters of a toy sequence; word-pieces of a sentence, [CLS] and [SEP] included
    target_ms: float | None  # p95 target, or None where none is set
    source: str = "bundled"  # as the picker shows it, "NAME (source)"; "pretrained": MiniLM;
    # a folder model's family ("BERT")
    folder: str = ""  # a model of the server's folder ($TFVIZ_PRETRAINED_DIR): where it was built
    task: str = ""  # the sidebar's "Task: ..." once picked; "": the toy task's or MiniLM's name
    decoder: bool = False  # a decoder folder (GPT-2, Llama): one "Text" box, a next-token table
    alphabet: str = ""  # read from the sidebar once the model is shown
    edits: list[dict] = field(default_factory=list)  # what waitEdit resolved with, per edit
    server_ms: list[float] = field(default_factory=list)  # websocket-only rerun times
    failures: list[str] = field(default_factory=list)
    floor: Config | None = None  # with --floor: the same edits on bench/floor_app.py
    navigations: list[float] = field(default_factory=list)  # with --navigations: ms each
    bertviz: list[float] = field(default_factory=list)  # with --bertviz: its page's opens, ms
    other: Config | None = None  # with --navigations and --compare-app: the other app's opens
    part: str = ""  # with --parts: the part of PARTS open while the edits are typed

    @property
    def name(self) -> str:
        return f"{self.part + ': ' if self.part else ''}{self.model} T={self.T}"

    @property
    def label(self) -> str:
        """The model's option in the sidebar's picker."""
        return f"{self.model} ({self.source})"

    @property
    def minilm(self) -> bool:
        """The bundled pretrained sentence encoder."""
        return self.source == "pretrained"

    @property
    def sentence(self) -> bool:
        """MiniLM or a folder model: sentence A's box, no alphabet, word-pieces shown."""
        return self.minilm or bool(self.folder)

    @property
    def task_name(self) -> str:
        """What the sidebar names the model's task ("Task: ...") once it is picked."""
        if self.task:
            return self.task
        return sentence_task_name() if self.minilm else self.model

    def col(self, key: str) -> list[float]:
        return [e[key] for e in self.edits if e.get(key) is not None]


# ---- the browser side ------------------------------------------------------------------------


def task_facts(page) -> tuple[str, int, int]:
    """(alphabet, min length, max length) from the sidebar's "Alphabet: ... Length: a to b"."""
    text = page.locator('[data-testid="stSidebar"]').inner_text()
    match = ALPHABET_RE.search(text)
    if match is None:
        raise RuntimeError("no 'Alphabet: ... Length: a to b' text in the sidebar")
    return match.group(1), int(match.group(2)), int(match.group(3))


def sequences(alphabet: str, T: int, n: int, seed: int) -> list[str]:
    """n distinct sequences of length T; neighbours differ, so every edit changes the charts."""
    rng = random.Random(seed)
    seen: list[str] = []
    while len(seen) < n:
        s = "".join(rng.choice(alphabet) for _ in range(T))
        if s not in seen:
            seen.append(s)
    return seen


def sentence_task_name() -> str:
    from tfviz.hf.pretrained import SentenceTask

    return SentenceTask.name


def sentence_task(cfg: Config):
    """The tfviz.hf.pretrained.SentenceTask that splits the configuration's text as the app does:
    MiniLM's, or the folder model's own tokenizer with its masked-LM head."""
    return _sentence_task(cfg.folder)


@functools.cache
def _sentence_task(folder: str):
    from tfviz.hf.pretrained import SentenceTask, load_minilm

    if not folder:
        return SentenceTask(load_minilm()[1])
    from tfviz import hf

    loaded = hf.open_folder(folder)
    if loaded.model.config.causal:
        return hf.NextTokenTask(loaded.tokenizer)
    return SentenceTask(loaded.tokenizer, head=loaded.head)


NEXT_ROWS = 16  # the positions a decoder's next-token table lists (tfviz.ui.next_token.ROWS)


def decoder_texts(task, pieces: int, n: int, seed: int) -> list[tuple[str, str]]:
    """n distinct texts of exactly `pieces` tokens for a decoder folder's tokenizer (its
    beginning-of-text token included where it adds one), each with the token column of the
    app's next-token table joined without spaces (its last NEXT_ROWS labels): what the page shows
    once the edit is in. Each text starts with "the" (one token at a text's start under
    bench/hf_decoders.py's tokenizer), then words that are one token after a space; neighbours
    differ in their last word, so every edit changes every chart."""
    from bench.decoder_folders import WORDS as DECODER_WORDS

    start = len(task.pieces("the").ids)  # "the", after a beginning-of-text token if one is added
    words = [w for w in DECODER_WORDS if len(task.pieces(f"the {w}").ids) == start + 1]
    if not words or pieces <= start:
        raise RuntimeError(f"no text of {pieces} tokens of hf_decoders.WORDS for this tokenizer")
    rng = random.Random(seed)
    found: dict[str, str] = {}
    last = None
    while len(found) < n:
        chosen = ["the"] + [rng.choice(words) for _ in range(pieces - start)]
        text = " ".join(chosen)
        if chosen[-1] == last or text in found:
            continue
        if len(task.pieces(text).ids) != pieces:
            raise RuntimeError(f"{text!r} is not {pieces} tokens")
        found[text] = re.sub(r"\s+", "", "".join(task.labels(text)[-NEXT_ROWS:]))
        last = chosen[-1]
    return list(found.items())


def sentences(task, pieces: int, n: int, seed: int) -> list[tuple[str, str]]:
    """n distinct (sentence, its word-pieces joined without spaces) of exactly `pieces`
    word-pieces for the task's tokenizer, [CLS] and [SEP] (or <s> and </s>) included; neighbours
    differ, so every edit changes every chart.

    With a masked-LM head (a folder model) the middle word is the mask marker, so the app
    answers for it on every edit, as it does for its own example."""
    # Words that are one piece both first (capitalised, no space before: byte-level BPE tells
    # them apart) and later in a sentence: n of them and the full stop are n + 3 pieces.
    words = [w for w in WORDS if len(task.pieces(f"{w.capitalize()} {w}.").ids) == 5]
    if not words:
        raise RuntimeError("no word of WORDS is one word-piece for this tokenizer")
    rng = random.Random(seed)
    found: dict[str, str] = {}
    while len(found) < n:
        chosen = [rng.choice(words) for _ in range(pieces - 3)]
        chosen[0] = chosen[0].capitalize()
        if task.mask is not None and len(chosen) > 1:
            chosen[len(chosen) // 2] = task.mask
        text = " ".join(chosen) + "."
        encoded = task.pieces(text)
        if len(encoded.ids) != pieces:
            raise RuntimeError(f"{text!r} has {len(encoded.ids)} word-pieces, not {pieces}")
        # The page's pieces block is compared without whitespace (waitEdit).
        found.setdefault(text, re.sub(r"\s+", "", "".join(encoded.pieces)))
    return list(found.items())


def one_edit(page, cfg: Config, text: str, shown: str) -> dict:
    """Type text in the configuration's box; wait until `shown` (no spaces) is on the page."""
    label = "Text" if cfg.decoder else "Sentence A (traced)" if cfg.sentence else "Sequence"
    box = page.get_by_role("textbox", name=label)
    box.fill(text)
    page.evaluate("window.__tfviz.t0 = -1")
    box.press("Enter")
    key = "next" if cfg.decoder else "pieces" if cfg.sentence else "prediction"
    # A part's page keeps charts of the weights alone, which an edit does not redraw.
    return page.evaluate(
        "([s, q, t, k, c]) => window.__tfviz.waitEdit(s, q, t, k, c)",
        [shown, QUIET_MS, EDIT_TIMEOUT_MS, key, bool(cfg.part)],
    )


def plan_edits(page, cfg: Config, n: int, seed: int) -> list[tuple[str, str]]:
    """Pick the configuration's model; n (text typed, input as shown without spaces) for it."""
    pick_model(page, cfg.label, cfg.task_name)
    if cfg.decoder:
        return decoder_texts(sentence_task(cfg), cfg.T, n, seed)
    if cfg.sentence:
        return sentences(sentence_task(cfg), cfg.T, n, seed)
    alphabet, lo, hi = task_facts(page)
    cfg.alphabet = alphabet
    if not lo <= cfg.T <= hi:
        raise RuntimeError(f"{cfg.model} takes lengths {lo}..{hi}, not {cfg.T}")
    return [(s, s) for s in sequences(alphabet, cfg.T, n, seed)]


def timed_edit(page, cfg: Config, text: str, shown: str, record: bool) -> None:
    """One edit, kept in cfg.edits when record; a failed edit is counted, not fatal."""
    try:
        result = one_edit(page, cfg, text, shown)
    except Exception as e:  # noqa: BLE001 - reported with the figures
        cfg.failures.append(f"{text}: {' '.join(str(e).split())[:300]}")
        return
    if record:
        cfg.edits.append(result)


def measure_edits(page, cfg: Config, n: int, warmup: int, seed: int) -> list[str]:
    """Time n edits (after `warmup` unrecorded ones); returns the sequences typed, in order."""
    typed = plan_edits(page, cfg, warmup + n, seed)
    for i, (text, shown) in enumerate(typed):
        timed_edit(page, cfg, text, shown, record=i >= warmup)
    return [text for text, _ in typed][warmup:]


# ---- against the floor (issue 18) --------------------------------------------------------------

# The app's p95 / the floor page's p95, both from one run: issue 18 asked <= 1.25, issue 44 <= 1.0.
TARGET_FLOOR_RATIO = 1.0
# The app's page opened / bertviz's head_view page opened (medians, one run; issue 31).
TARGET_BERTVIZ_RATIO = 3.0


@dataclass(frozen=True)
class Part:
    """A part of the app (issue 46) and how the bench opens it: its tab, then a section picked
    in the tab's segmented control (its widget key and the section's catalogue key) or a toggle
    switched on (its widget key). Its floor page is bench/floor_app.py's view of the same name."""

    tab: str  # the view's id (tfviz.ui.router.VIEWS)
    picker: str = ""  # the section picker's widget key
    section: str = ""  # the section's catalogue key
    toggle: str = ""  # a toggle's widget key
    vocabulary: bool = False  # needs a model with a vocabulary head: a folder model's


PARTS = {
    "neuron": Part("attention", toggle="attn_neuron"),
    "freedom": Part("parts", picker="parts_section", section="parts.section.freedom"),
    "lens": Part(
        "analysis", picker="analysis_section", section="analysis.section.lens", vocabulary=True
    ),
    "shares": Part("w_o"),
}
OPEN_PART_TIMEOUT_MS = 180_000  # a tab's first look at a GPT-2-sized model computes its weights'


def part_configs(configs: list[Config], spec: str) -> list[Config]:
    """--parts: one configuration per part and model where the part applies, parts outermost."""
    from dataclasses import replace

    parts = [name.strip() for name in spec.split(",")]
    unknown = [name for name in parts if name not in PARTS]
    if unknown:
        raise SystemExit(f"--parts: {', '.join(unknown)} not among {', '.join(PARTS)}")
    return [
        replace(cfg, part=name, edits=[], failures=[])
        for name in parts
        for cfg in configs
        if cfg.folder or not PARTS[name].vocabulary
    ]


def open_tab(page, view: str) -> None:
    """Click the tab of the view (its id) and wait until the page is drawn and quiet."""
    from tfviz.ui.i18n import translate

    page.get_by_role("tab", name=translate("en", f"app.view.{view}"), exact=True).click()
    wait_quiet(page, timeout_ms=OPEN_PART_TIMEOUT_MS)


def open_part(page, part: str) -> None:
    """Open the part in the app's page: its tab, then its section or toggle, and wait until
    the page is drawn and quiet."""
    from tfviz.ui.i18n import translate

    spec = PARTS[part]
    open_tab(page, spec.tab)
    if spec.picker:
        # By its words as drawn: a picker's help icon is a button too, so no position is safe.
        label = translate("en", spec.section)
        page.locator(f".st-key-{spec.picker}").get_by_text(label, exact=True).click()
    if spec.toggle:
        toggle = page.locator(f".st-key-{spec.toggle} input")
        if not toggle.is_checked():
            page.locator(f".st-key-{spec.toggle} label").click()
    wait_quiet(page, timeout_ms=OPEN_PART_TIMEOUT_MS)


def floor_server(workdir: Path, cfg: Config, server_args: list[str]) -> Server:
    """bench/floor_app.py's page for the configuration's model: its part's (with --parts), else
    the attention page."""
    environ = {"TFVIZ_FLOOR_VIEW": cfg.part or "attention"}
    model = f"folder:{cfg.folder}" if cfg.folder else MINILM if cfg.minilm else cfg.model
    environ["TFVIZ_FLOOR_MODEL"] = model
    return Server(workdir, server_args, FLOOR_APP, environ)


def measure_against_floor(browser, workdir: Path, configs: list[Config], args) -> None:
    """Each configuration's edits typed into the app and into its floor page by turns, the
    same texts in both (which page goes first alternates).

    Each page has a browser of its own: two pages of one browser are two tabs, and the one
    behind gets no animation frames (Chromium throttles hidden pages), which an edit's end waits
    for; bringing each to the front in turn made it repaint and re-lay out its charts instead.
    """
    floor_browser = launch_chromium(browser.browser_type)
    server = Server(workdir, args.server_arg, environ=folder_environ(configs))
    try:
        server.wait_healthy()
        context, page = harnessed_page(browser, server.url)
        for i, cfg in enumerate(configs):
            cfg.floor = Config(
                f"floor {cfg.model}",
                cfg.T,
                None,
                source=cfg.source,
                folder=cfg.folder,
                decoder=cfg.decoder,
                part=cfg.part,
            )
            floor = floor_server(workdir, cfg, args.server_arg)
            floor_context = None
            try:
                floor.wait_healthy()
                floor_context, floor_page = harnessed_page(floor_browser, floor.url)
                if cfg.part:  # the model is picked on the Attention tab: a part's first look at
                    # a GPT-2-sized model (its weights' numbers) outlasts the pick's wait
                    open_tab(page, "attention")
                typed = plan_edits(page, cfg, args.warmup + args.edits, args.seed + i)
                if cfg.part:
                    open_part(page, cfg.part)
                for j, (text, shown) in enumerate(typed):
                    pair = [(page, cfg), (floor_page, cfg.floor)]
                    for tab, c in pair if j % 2 == 0 else pair[::-1]:
                        timed_edit(tab, c, text, shown, record=j >= args.warmup)
            finally:
                if floor_context is not None:
                    floor_context.close()
                floor.stop()
            print(f"measured {cfg.name} and its floor: {len(cfg.edits)} edits", flush=True)
            if args.navigations:
                measure_navigations(browser, workdir, cfg, server, args)
        context.close()
    finally:
        server.stop()
        floor_browser.close()


# Page time (ms since navigation start) once the first run has drawn the input and every chart.
NAVIGATED_JS = (
    f"() => {{ const t = ({FIRST_RENDER_JS})(); return t && t - performance.timeOrigin; }}"  # noqa: E501
)


def app_link(cfg: Config) -> str:
    """The app's address opening the configuration's model on its first example, Attention tab."""
    return f"/?model={'pretrained' if cfg.minilm else 'bundled'}:{cfg.model}&view=attention"


def first_example_trace(cfg: Config):
    """The trace of what the app's link to cfg's model shows: its task's first example."""
    from tfviz import get_task, load_checkpoint
    from tfviz.core.trace import run_trace
    from tfviz.hf import pretrained

    if cfg.minilm:
        model, tokenizer = pretrained.load_minilm("cpu")
        task = pretrained.SentenceTask(tokenizer)
    else:
        model, meta = load_checkpoint(MODELS / f"{cfg.model}.safetensors")
        task = get_task(meta.task)
    return run_trace(model, task, task.examples[0])


def bertviz_target(workdir: Path, cfg: Config) -> tuple[str, str] | None:
    """bertviz's head_view page (bench/standalone.py) of the attention the app's link shows
    (every layer; it draws layer 0's heads), as (file URL, its drawn condition); None without
    bertviz or its libraries."""
    folder = workdir / f"bertviz_{cfg.model}"
    folder.mkdir(exist_ok=True)
    found = bertviz_file(first_example_trace(cfg), folder)
    return None if found is None else (found[0].as_uri(), found[1])


def measure_navigations(browser, workdir: Path, cfg: Config, server: Server, args) -> None:
    """Open the app (a link to the model) and the floor page by turns, each in a fresh browser
    context (nothing cached), timing navigation start -> the input and every chart drawn. The
    first of each is not timed (it warms the servers' caches). With --bertviz, bertviz's
    head_view page of the same attention (from file://, no server) takes its turn too."""
    floor = floor_server(workdir, cfg, args.server_arg)
    bertviz = bertviz_target(workdir, cfg) if args.bertviz else None
    if args.bertviz and bertviz is None:
        cfg.failures.append("bertviz or its libraries (bench/standalone.py) are missing")
    other = None
    if args.compare_app:
        other = Server(workdir, args.server_arg, args.compare_app.resolve())
        cfg.other = Config(f"{cfg.model} (other app)", cfg.T, None, source=cfg.source)
    try:
        floor.wait_healthy()
        targets = [(server.url + app_link(cfg), cfg), (floor.url, cfg.floor)]
        if other is not None:
            other.wait_healthy()
            targets.append((other.url + app_link(cfg), cfg.other))
        if bertviz is not None:
            targets.append((bertviz[0], None))
        for j in range(args.navigations + 1):
            for url, c in targets if j % 2 == 0 else targets[::-1]:
                if c is None:
                    shown_ms = open_file_page(browser, url, bertviz[1])
                    if j > 0:
                        cfg.bertviz.append(shown_ms)
                    continue
                context = browser.new_context(viewport=VIEWPORT)
                try:
                    page = context.new_page()
                    page.goto(url)
                    shown = page.wait_for_function(NAVIGATED_JS, polling="raf", timeout=60_000)
                    if j > 0:
                        c.navigations.append(shown.json_value())
                except Exception as e:  # noqa: BLE001 - reported with the figures
                    c.failures.append(f"navigation to {url}: {' '.join(str(e).split())[:300]}")
                finally:
                    context.close()
    finally:
        floor.stop()
        if other is not None:
            other.stop()
    print(f"measured {cfg.name}: {len(cfg.navigations)} navigations", flush=True)


def report_floor(configs: list[Config]) -> None:
    """Each configuration against its floor page: medians, p95 and their ratios (issue 18)."""
    pairs = [(c, c.floor) for c in configs if c.floor is not None]
    if not pairs:
        return
    parts = any(c.part for c, _ in pairs)
    what = "plain plotly charts" if parts else "one plain heatmap"
    what += " of the same cells"
    print(
        f"\nAgainst the floor (bench/floor_app.py: the same box, the input shown, {what}),"
        "\nthe same texts typed into both by turns (ms)"
    )
    head = f"{'measure':<34} {'app med':>7} {'p95':>6} {'floor med':>9} {'p95':>6} {'p95 ratio':>9}"
    print(head + "  target")
    print("-" * (len(head) + 30))
    for c, f in pairs:
        rows = [("keystroke -> every chart painted", c.col("total"), f.col("total"))]
        if c.navigations:
            rows.append(("navigation -> attention drawn", c.navigations, f.navigations))
        for what, app, floor in rows:
            ratio = percentile(app, 95) / percentile(floor, 95)
            print(
                f"{c.name + ': ' + what:<34} {median(app):7.0f} {percentile(app, 95):6.0f} "
                f"{median(floor):9.0f} {percentile(floor, 95):6.0f} {ratio:9.2f}  "
                f"<= {TARGET_FLOOR_RATIO}: {verdict(ratio <= TARGET_FLOOR_RATIO)} "
                f"(medians {median(app) / median(floor):.2f}; n={len(app)}/{len(floor)})"
            )
    for c, f in pairs:
        if c.other is not None and c.other.navigations:
            app, other = median(c.navigations), median(c.other.navigations)
            print(
                f"{c.name + ': navigation / --compare-app':<34} {app:7.0f} "
                f"{percentile(c.navigations, 95):6.0f} {other:9.0f} "
                f"{percentile(c.other.navigations, 95):6.0f}  medians {app / other:.2f}"
            )
        if c.bertviz:
            app, other = median(c.navigations), median(c.bertviz)
            p95s = percentile(c.navigations, 95), percentile(c.bertviz, 95)
            print(
                f"{c.name + ': navigation / bertviz head_view':<34} {app:7.0f} "
                f"{p95s[0]:6.0f} {other:9.0f} {p95s[1]:6.0f}"
                f"  medians {app / other:.2f}  <= {TARGET_BERTVIZ_RATIO}: "
                f"{verdict(app / other <= TARGET_BERTVIZ_RATIO)} "
                f"(floor / bertviz {median(f.navigations) / other:.2f})"
            )
    for c, f in pairs:
        for failure in f.failures + (c.other.failures if c.other else []):
            print(f"FAILED ({f.name}): {failure}")


def first_renders(
    browser, workdir: Path, starts: int, extra: list[str], apps: list[Path] = (APP,)
) -> list[dict]:
    """Spawn -> healthy -> first complete render, over `starts` fresh servers of each app.

    Several apps take turns (a, b, a, b, ...), so a change in the machine's load falls on both.
    """
    results = []
    for app in [app for _ in range(starts) for app in apps]:
        context = browser.new_context(viewport=VIEWPORT)
        context.add_init_script(HARNESS_JS)
        page = context.new_page()  # ready before the spawn: only the server's time counts
        server = Server(workdir, extra, app)
        try:
            healthy_s = server.wait_healthy()
            page.goto(server.url)
            shown_ms = page.wait_for_function(FIRST_RENDER_JS, polling="raf", timeout=60_000)
            marks = page.evaluate(FIRST_RENDER_MARKS_JS)  # epoch ms, or null
            spawned_ms = 1000 * server.spawned
            result = {"app": str(app), "healthy_s": healthy_s}
            result["first_render_s"] = shown_ms.json_value() / 1000
            result["first_render_s"] -= server.spawned
            for key, value in marks.items():
                result[f"{key}_s"] = None if value is None else (value - spawned_ms) / 1000
            results.append(result)
        finally:
            context.close()
            server.stop()
    return results


# ---- the server side alone, over the websocket -----------------------------------------------


async def server_only(url: str, plan: list[tuple[Config, list[str]]], timeout: float) -> None:
    """Time the same edits without a browser: rerun_script sent -> script_finished received."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    ok = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_SUCCESSFULLY")
    states: dict[str, WidgetState] = {}
    ids: dict[str, str] = {}  # user key -> widget id

    async def request(ws) -> float:
        msg = BackMsg()
        client = msg.rerun_script
        client.query_string = ""
        client.page_script_hash = ""
        client.widget_states.SetInParent()
        client.widget_states.widgets.extend(states.values())
        started = time.perf_counter()
        await ws.send(msg.SerializeToString())
        run_id = None
        while True:
            left = started + timeout - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no script_finished within {timeout} s")
            fwd = ForwardMsg()
            fwd.ParseFromString(await asyncio.wait_for(ws.recv(), left))
            kind = fwd.WhichOneof("type")
            if kind == "new_session":
                run_id = fwd.metadata.run.script_run_id
            elif kind == "delta" and run_id and fwd.delta.WhichOneof("type") == "new_element":
                element = fwd.delta.new_element
                proto = getattr(element, element.WhichOneof("type") or "empty", None)
                wid = getattr(proto, "id", "")
                if isinstance(wid, str) and wid.startswith("$$ID-"):
                    ids[wid.split("-", 2)[-1]] = wid
            elif kind == "script_finished" and run_id and fwd.script_finished == ok:
                return time.perf_counter() - started

    ws_url = url.replace("http://", "ws://") + "/_stcore/stream"
    async with websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None) as ws:
        await request(ws)  # the page load
        for cfg, texts in plan:
            states[ids["model"]] = WidgetState(id=ids["model"], string_value=cfg.label)
            await request(ws)  # the model change (it resets the sequence)
            for text in texts:
                states[ids["sequence"]] = WidgetState(id=ids["sequence"], string_value=text)
                cfg.server_ms.append(1000 * await request(ws))


# ---- report ----------------------------------------------------------------------------------


def report(configs: list[Config], starts: list[dict], edits: int, keystrokes: bool = True) -> None:
    if keystrokes:
        report_edits(configs, edits)
        report_minilm_ratio(configs)
        report_long_ratio(configs)
    apps = list(dict.fromkeys(s["app"] for s in starts))
    for app in apps:
        report_starts([s for s in starts if s["app"] == app], app if len(apps) > 1 else "")
    if len(apps) == 2:
        this, other = (median([s["first_render_s"] for s in starts if s["app"] == a]) for a in apps)
        print(f"\nfirst render, median: {apps[0]} / {apps[1]} = {this / other:.2f}")


def report_edits(configs: list[Config], edits: int) -> None:
    print(f"\nKeystroke (Enter) -> every chart redrawn and painted, {edits} edits each (ms)")
    head = f"{'configuration':<22} {'median':>7} {'p95':>7} {'max':>7}  target"
    print(head)
    print("-" * (len(head) + 24))
    for c in configs:
        total = c.col("total")
        med, p95 = median(total), percentile(total, 95)
        target = "-"
        if c.target_ms is not None:
            target = f"p95 < {c.target_ms:.0f} ms: {verdict(p95 < c.target_ms)}"
        print(f"{c.name:<22} {med:7.0f} {p95:7.0f} {max(total, default=math.nan):7.0f}  {target}")
    print("\nWhere the time goes (medians per edit; ms unless said)")
    head = (
        f"{'configuration':<22} {'sent':>5} {'reply':>5} {'to running':>10} {'run':>5} "
        f"{'after run':>9} "
        f"{'server only':>11} {'(p95)':>5} {'plotly draws':>12} {'draw ms':>7} "
        f"{'long tasks':>10} {'KiB in':>6}"
    )
    print(head)
    print("-" * len(head))
    for c in configs:
        print(
            f"{c.name:<22} {median(c.col('to_sent')):5.0f} {median(c.col('to_reply')):5.0f} "
            f"{median(c.col('to_running')):10.0f} {median(c.col('running')):5.0f} "
            f"{median(c.col('after_run')):9.0f} {median(c.server_ms):11.0f} "
            f"{percentile(c.server_ms, 95):5.0f} "
            f"{median(c.col('draws')):6.0f} of {median(c.col('plots')):<3.0f} "
            f"{median(c.col('draw_ms')):7.0f} {median(c.col('long_ms')):10.0f} "
            f"{median(c.col('ws_bytes')) / 1024:6.1f}"
        )
    print(
        "sent: Enter -> the rerun request handed to the websocket. reply: Enter -> the server's "
        "first message after it.\n"
        "to running: Enter -> the app shows 'running'. run: running -> notRunning (the script run;"
        " elements are drawn\nas they arrive). after run: notRunning -> last chart painted. "
        "server only: the same kind of edit over a\nbare websocket, no browser (request -> "
        "script_finished). plotly draws: full plotly redraws per edit, of\nhow many charts; "
        "draw ms: time inside them. long tasks: main-thread tasks over 50 ms, summed. KiB in:\n"
        "websocket bytes received per edit."
    )
    for c in configs:
        unseen = sum(e.get("running") is None for e in c.edits)
        if unseen:
            print(f"{c.name}: 'running' never showed in {unseen} edits (left out of those columns)")
        for f in c.failures:
            print(f"FAILED edit ({c.name}): {f}")


TARGET_LONG_RATIO = 2.0  # MiniLM's p95 at 256 word-pieces / at 32, from one run (issue 19)


def report_long_ratio(configs: list[Config]) -> None:
    """MiniLM's longest input against its shortest, both from this run (issue 19's target)."""
    ours = [c for c in configs if c.minilm and not c.name.startswith("floor ")]
    sentence = sorted(ours, key=lambda c: c.T)
    if len(sentence) < 2:
        return
    short, long = sentence[0], sentence[-1]
    ratio = percentile(long.col("total"), 95) / percentile(short.col("total"), 95)
    print(
        f"\np95 {long.name} / {short.name} = {ratio:.2f} "
        f"(target <= {TARGET_LONG_RATIO}: {verdict(ratio <= TARGET_LONG_RATIO)})"
    )


def report_minilm_ratio(configs: list[Config]) -> None:
    """MiniLM's p95 against the toy reverse model's, both from this run (issue 9's target)."""
    sentence = [c for c in configs if c.minilm]
    toy = [c for c in configs if c.model == DEFAULT_MODEL and not c.sentence]
    if not sentence or not toy:
        return
    s, r = sentence[0], toy[-1]
    ratio = percentile(s.col("total"), 95) / percentile(r.col("total"), 95)
    ok = ratio <= TARGET_MINILM_RATIO
    print(
        f"\np95 {s.name} / {r.name} = {ratio:.2f} "
        f"(target <= {TARGET_MINILM_RATIO}: {verdict(ok)}); "
        f"server only: {percentile(s.server_ms, 95) / percentile(r.server_ms, 95):.2f}"
    )


def report_families(configs: list[Config]) -> None:
    """Each folder model's keystroke per length, beside MiniLM's at the same length when it was
    measured in the same run, and the ratio of their p95."""
    folders = [c for c in configs if c.folder]
    if not folders:
        return
    minilm = {c.T: c for c in configs if c.minilm and not c.name.startswith("floor ")}
    print(
        "\nPer family: keystroke (Enter) -> every chart painted, random models of the server's "
        "folder (masked-LM\nencoders of MiniLM's size, one mask in each sentence; decoders at "
        "their real sizes) (ms; ratio:\np95 / MiniLM's p95 at the same length, this run)"
    )
    head = f"{'family':<12} {'pieces':>6} {'median':>7} {'p95':>7} {'/ MiniLM':>8} {'edits':>5}"
    print(head)
    print("-" * len(head))
    for T in sorted({c.T for c in folders}):
        ref = minilm.get(T)
        ref_p95 = percentile(ref.col("total"), 95) if ref else math.nan
        rows = ([("MiniLM", ref)] if ref else []) + [(c.source, c) for c in folders if c.T == T]
        for family, c in rows:
            total = c.col("total")
            p95 = percentile(total, 95)
            ratio = f"{p95 / ref_p95:8.2f}" if ref else f"{'-':>8}"
            print(f"{family:<12} {T:>6} {median(total):7.0f} {p95:7.0f} {ratio} {len(total):>5}")


def report_starts(starts: list[dict], app: str) -> None:
    if starts:
        times = [s["first_render_s"] for s in starts]
        of = f" of {app}" if app else ""
        print(f"\nServer spawn -> first complete render{of}, {len(starts)} fresh starts (s)")
        for i, s in enumerate(starts, 1):
            steps = [("healthy", "healthy_s"), ("page JS ready", "page_ready_s")]
            steps += [("script output starts", "first_message_s")]
            steps += [("ends", "last_message_s"), ("charts drawn", "first_render_s")]
            shown = ", ".join(f"{name} {s[k]:.2f}" for name, k in steps if s.get(k) is not None)
            print(f"  start {i}: {shown}")
        print(
            f"  median {median(times):.2f}, max {max(times):.2f}  "
            f"target < {TARGET_FIRST_RENDER_S:.0f} s (every start): "
            f"{verdict(max(times) < TARGET_FIRST_RENDER_S)}"
        )


# ---- main ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--edits", type=int, default=30, help="timed edits per configuration")
    p.add_argument("--warmup", type=int, default=3, help="untimed edits first, per configuration")
    p.add_argument("--starts", type=int, default=3, help="fresh server starts for first render")
    p.add_argument(
        "--first-render-only", action="store_true", help="measure first renders only, no edits"
    )
    p.add_argument(
        "--compare-app",
        type=Path,
        help="another checkout's app.py: first renders (and with --floor, navigations) "
        "alternate with it, and the ratio is printed",
    )
    p.add_argument(
        "--models",
        help=f"comma-separated models to time keystrokes on instead of the default set: bundled "
        f"names at T=16 and '{MINILM}' (the pretrained sentence encoder at --pieces; "
        f"'{MINILM}:N' at N word-pieces)",
    )
    p.add_argument(
        "--families",
        help="comma-separated model families of the server's folder to time keystrokes on too: "
        "bert, roberta, distilbert (random MiniLM-sized models built for the run, each at "
        "--pieces; 'bert:N' at N word-pieces)",
    )
    p.add_argument(
        "--pieces",
        type=int,
        default=32,
        help="MiniLM's and the families' sentence A in word-pieces (default 32)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--lesson-steps",
        type=int,
        default=0,
        help="time this many lesson step changes (Next/Previous) instead of the keystrokes",
    )
    p.add_argument(
        "--floor",
        action="store_true",
        help="type the same edits into bench/floor_app.py's attention page by turns and print "
        "the ratios (issue 18)",
    )
    p.add_argument(
        "--parts",
        help=f"with --floor: the edits typed with each of these parts of the app open "
        f"({', '.join(PARTS)}; lens on folder models only), each against bench/floor_app.py's "
        f"page of the same part (issue 46)",
    )
    p.add_argument(
        "--navigations",
        type=int,
        default=0,
        help="with --floor: also open the app and the floor page this many times each, by turns",
    )
    p.add_argument(
        "--bertviz",
        action="store_true",
        help="with --navigations: also open bertviz's head_view page of the same attention "
        "(bench/standalone.py) by turns, and print the app / bertviz ratio (issue 31)",
    )
    p.add_argument("--no-server-only", action="store_true", help="skip the websocket-only timing")
    p.add_argument("--json", type=Path, help="also write every figure here")
    p.add_argument(
        "--server-arg",
        action="append",
        default=[],
        help="extra `streamlit run` option for every server (repeatable), "
        "e.g. --server-arg=--runner.postScriptGC=false",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from playwright.sync_api import sync_playwright

    largest = largest_bundled()
    configs = [
        Config(DEFAULT_MODEL, 8, None),
        Config(DEFAULT_MODEL, 16, TARGET_P95_MS),
        Config(largest, 16, TARGET_P95_MS),
    ]
    if args.models:
        configs = [model_config(name.strip(), args.pieces) for name in args.models.split(",")]
    elif args.families:
        configs = []
    if args.families and (args.lesson_steps or args.first_render_only):
        raise SystemExit("--families goes with neither --lesson-steps nor --first-render-only")
    if args.parts and not args.floor:
        raise SystemExit("--parts goes with --floor")
    print(f"largest bundled model: {largest}; {os.cpu_count()} CPUs seen; chromium {CHROMIUM}")
    if args.server_arg:
        print(f"server options: {' '.join(args.server_arg)}")
    apps = [APP] + ([args.compare_app.resolve()] if args.compare_app else [])
    with tempfile.TemporaryDirectory(prefix="tfviz_ui_latency_") as tmp, sync_playwright() as pw:
        workdir = Path(tmp)
        if args.families:
            configs += family_configs(args.families, args.pieces, workdir / FAMILIES_DIR)
            print(f"built {args.families} in {workdir / FAMILIES_DIR}", flush=True)
        if args.parts:
            configs = part_configs(configs, args.parts)
        browser = launch_chromium(pw.chromium)
        try:
            starts = first_renders(browser, workdir, args.starts, args.server_arg, apps)
            if args.lesson_steps:
                measure_lesson_steps(browser, workdir, args.lesson_steps, args.server_arg)
            elif args.floor:
                measure_against_floor(browser, workdir, configs, args)
            elif not args.first_render_only:
                measure_keystrokes(browser, workdir, configs, args)
        finally:
            browser.close()
    keystrokes = not (args.first_render_only or args.lesson_steps)
    floors = [c.floor for c in configs if c.floor is not None]  # their parts of the time too
    report(configs + floors, starts, args.edits, keystrokes=keystrokes)
    report_floor(configs)
    if keystrokes:
        report_families(configs)
    if args.json:
        out = {"configs": [asdict(c) for c in configs], "first_renders": starts}
        args.json.write_text(json.dumps(out, indent=1))
    if args.first_render_only:
        return 0 if starts else 1
    return 0 if any(c.edits for c in configs) else 1


def model_config(name: str, pieces: int) -> Config:
    """A --models entry: a bundled model at T=16, or MiniLM at `pieces` word-pieces (or at N
    given as minilm:N)."""
    if name == MINILM or name.startswith(MINILM + ":"):
        from tfviz.hf.pretrained import NAME

        _, _, length = name.partition(":")
        return Config(NAME, int(length) if length else pieces, None, source="pretrained")
    if not (MODELS / f"{name}.safetensors").is_file():
        raise SystemExit(f"--models: no bundled model {name!r} and not {MINILM!r}")
    return Config(name, 16, TARGET_P95_MS)


FAMILIES_DIR = "pretrained_dir"  # the workdir's folder of model folders, served to the app


def write_tokenizer(kind: str, folder: Path) -> None:
    """Tokenizer files under which every word of WORDS is one piece (at a sentence's start,
    capitalised, and later), so a sentence's length in pieces is exact: MiniLM's own vocab.txt
    for BERT and DistilBERT (a real 30,522-piece vocabulary), and for RoBERTa a byte-level BPE
    trained on WORDS (RoBERTa's specials as ids 0..4, its "<mask>" swallowing the space before
    it, as roberta-base's does)."""
    if kind != "roberta":
        from tfviz.hf.pretrained import model_dir

        shutil.copyfile(model_dir() / "vocab.txt", folder / "vocab.txt")
        return
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000,  # room for every merge: each word ends as one piece
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([f"{w.capitalize()} {w}." for w in WORDS] * 5, trainer)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    tok.save(str(folder / "tokenizer.json"))


def build_family(kind: str, root: Path, sizes: dict | None = None) -> Path:
    """root/kind: a random masked-LM model of the family (bench/hf_families.py's builder, at
    MiniLM's sizes unless told) with write_tokenizer's files; built once, then reused."""
    from bench import encoder_folders

    folder = root / kind
    if not folder.is_dir():
        encoder_folders.build(kind, folder, sizes or encoder_folders.MINILM, write_tokenizer)
    return folder


def build_decoder(kind: str, root: Path) -> Path:
    """root/kind: a random decoder of the family at its real model's sizes (bench/hf_decoders.py's
    builder: GPT-2 small, SmolLM-135M, Qwen2-0.5B) with its small tokenizer; built once."""
    from bench import decoder_folders

    folder = root / kind
    if not folder.is_dir():
        decoder_folders.build(kind, folder, decoder_folders.SIZES[kind])
    return folder


def family_configs(spec: str, pieces: int, root: Path) -> list[Config]:
    """--families entries ("bert", "roberta:128", "gpt2"): each family's model built in root, a
    configuration per entry at its length (default `pieces`)."""
    from bench import decoder_folders, encoder_folders
    from tfviz.ui.i18n import translate

    known = {**encoder_folders.FAMILIES, **decoder_folders.FAMILIES}
    configs = []
    for entry in spec.split(","):
        kind, _, length = entry.strip().partition(":")
        if kind not in known:
            raise SystemExit(f"--families: {kind!r} is not one of {', '.join(known)}")
        decoder = kind in decoder_folders.FAMILIES
        folder = build_decoder(kind, root) if decoder else build_family(kind, root)
        # The picker shows a folder model as "NAME (Family)"; built with a masked-LM head, its
        # task is fill-in-the-mask, a decoder's the next token (tfviz.ui.folders.folder_info).
        task = translate("en", "folder.task_next" if decoder else "folder.task_masked")
        T = int(length) if length else pieces
        configs.append(
            Config(kind, T, None, known[kind], folder=str(folder), task=task, decoder=decoder)
        )
    return configs


def folder_environ(configs: list[Config]) -> dict[str, str]:
    """$TFVIZ_PRETRAINED_DIR for the app when a configuration is a folder model."""
    from tfviz.settings import PRETRAINED_DIR_ENV

    roots = {str(Path(c.folder).parent) for c in configs if c.folder}
    if len(roots) > 1:
        raise ValueError(f"folder models from several folders: {sorted(roots)}")
    return {PRETRAINED_DIR_ENV: roots.pop()} if roots else {}


def measure_keystrokes(browser, workdir: Path, configs: list[Config], args) -> None:
    """The edits of every configuration in one page of one server, then the same over a socket."""
    plan: list[tuple[Config, list[str]]] = []
    server = Server(workdir, args.server_arg, environ=folder_environ(configs))
    try:
        server.wait_healthy()
        context, page = harnessed_page(browser, server.url)
        for i, cfg in enumerate(configs):
            texts = measure_edits(page, cfg, args.edits, args.warmup, args.seed + i)
            plan.append((cfg, texts))
            print(f"measured {cfg.name}: {len(cfg.edits)} edits", flush=True)
        context.close()
        if not args.no_server_only:
            # Fresh sequences, so the server's trace cache does not answer from memory.
            fresh = []
            for i, (cfg, texts) in enumerate(plan):
                seed = 1000 + args.seed + i
                if cfg.sentence:
                    more = sentences(sentence_task(cfg), cfg.T, 2 * len(texts), seed)
                    more = [text for text, _ in more]
                else:
                    more = sequences(cfg.alphabet, cfg.T, 2 * len(texts), seed)
                fresh.append((cfg, [s for s in more if s not in texts][: len(texts)]))
            # Playwright's sync API owns this thread's event loop: use another thread.
            with ThreadPoolExecutor(1) as pool:
                run = partial(asyncio.run, server_only(server.url, fresh, EDIT_TIMEOUT_MS / 1000))
                pool.submit(run).result()
    finally:
        server.stop()


# ---- lesson step changes (issue 10) ------------------------------------------------------------

LESSON_STEP_JS = """
([n, quietMs]) => {
  const app = document.querySelector('[data-testid="stApp"]');
  const picker = document.querySelector('.st-key-lesson_step input');
  const tf = window.__tfviz;
  return app && app.getAttribute('data-test-script-state') === 'notRunning'
      && picker && picker.value.startsWith(n + '. ')
      && tf.changed > tf.t0 && performance.now() - tf.changed > quietMs;
}
"""


def measure_lesson_steps(browser, workdir: Path, n: int, server_args: list[str]) -> None:
    """Lesson step change p95: a click on Next or Previous -> the new step drawn and quiet.

    The page opens on the Lessons tab through a shared link (?view=lessons) and walks the four
    steps up and down (1 2 3 4 3 2 1 2 ...), n changes after one untimed round. A change ends
    at the last DOM change (charts included) before QUIET_MS of quiet, with the app idle and
    the step picker showing the new step; it starts at the click, in page time.
    """
    server = Server(workdir, server_args)
    try:
        server.wait_healthy()
        context, page = harnessed_page(browser, f"{server.url}/?view=lessons")
        page.evaluate(
            "document.addEventListener('click', () => { window.__tfviz.t0 = performance.now(); },"
            " true)"
        )
        step, times, by_step = 1, [], {}
        for i in range(n + 6):  # the first round (six changes) warms the caches up
            target = (2, 3, 4, 3, 2, 1)[i % 6]
            key = "lesson_next" if target > step else "lesson_prev"
            step = target
            page.evaluate("window.__tfviz.t0 = Infinity")
            page.locator(f".st-key-{key} button").click()
            page.wait_for_function(
                LESSON_STEP_JS, arg=[step, QUIET_MS], polling=20, timeout=EDIT_TIMEOUT_MS
            )
            if i >= 6:
                ms = page.evaluate("window.__tfviz.changed - window.__tfviz.t0")
                times.append(ms)
                by_step.setdefault(step, []).append(ms)
        context.close()
    finally:
        server.stop()
    p95 = percentile(times, 95)
    print(f"\nLesson step change (Next/Previous) -> the step drawn and quiet, {len(times)} changes")
    print(
        f"  median {median(times):.0f} ms, p95 {p95:.0f} ms, max {max(times):.0f} ms  "
        f"target p95 < {TARGET_P95_MS:.0f} ms: {verdict(p95 < TARGET_P95_MS)}"
    )
    for step, ms in sorted(by_step.items()):
        print(f"  to step {step}: median {median(ms):.0f} ms, max {max(ms):.0f} ms ({len(ms)})")


if __name__ == "__main__":
    sys.exit(main())
