"""The floor under bench/mode_switch.py's interactions: a bare Streamlit page that redraws what
one interaction changes in the app, and nothing else.

TFVIZ_FLOOR_VIEW=before_after (the default): a sidebar radio of the same W_o modes and the five
charts of "Before/after W_o" for the same model and sequence (concat, attn_out, their cosine per
token, W_o as applied, each head's term at the first token).
TFVIZ_FLOOR_VIEW=parts: a picker of the same layer scopes and the two charts of "Take W_o apart"
(the task's accuracy under each W_o mode, W_o's singular values), measured once at start.
TFVIZ_FLOOR_VIEW=timeline: a step slider and the training timeline's two charts (every head's
attention, the head importance map), for bench/timeline_slider.py.
TFVIZ_FLOOR_VIEW=attention: the box the app's sequence is typed in, the typed input as the app
shows it (a code block), and ONE plain go.Heatmap of the attention the app's Attention view
draws for it (every head and mean of every layer for a toy model; MiniLM's layer 0), one block
under the other, with plotly's defaults: issue 18's floor for a keystroke and for opening the page,
for bench/ui_latency.py --floor. The model runs on every edit, as in the app.

Both draw with the app's own tfviz.ui.widgets.chart and tfviz.plots, and have no header, sequence
box, prediction, tabs, link, or other widgets. The time from a click to these charts painted is
what Streamlit and plotly.js alone take on the machine at hand; the app's time minus this is
what the app's page adds. Served by bench/mode_switch.py and bench/timeline_slider.py; not part
of the app.

TFVIZ_FLOOR_MODEL: the bundled model's name (default max_position), "minilm", or "folder:PATH" (a
model folder the app reads: a decoder's or a masked-LM encoder's; attention only).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from tfviz import plots
from tfviz.core import dissect, wo
from tfviz.core.interventions import switches
from tfviz.core.tasks import get_task
from tfviz.core.trace import cosine_per_token, run_trace, w_o_used
from tfviz.training.checkpoint import load_checkpoint
from tfviz.training.evaluate import evaluate
from tfviz.ui.compute import ACCURACY_N, ACCURACY_SEED
from tfviz.ui.heads import many_heads
from tfviz.ui.widgets import chart

MODELS = Path(__file__).resolve().parent.parent / "models"
MODES = ("learned", wo.BLOCK_DIAGONAL, "identity", "zero", "rank:16")  # "rank k": the app's k
LAYER, TOKEN = 0, 0  # the app's defaults: layer 0, the first token
ALL = "all layers"


@st.cache_resource(show_spinner=False)
def model_and_task(name: str):
    model, meta = load_checkpoint(MODELS / f"{name}.safetensors")
    return model, get_task(meta.task)


@st.cache_resource(show_spinner=False)
def traces(name: str) -> dict:
    """mode -> (trace, W_o applied) of the task's first example, computed once."""
    model, task = model_and_task(name)
    out = {}
    for mode in MODES:
        iv = switches(mode, None, [])
        modes = iv.w_o_modes(model.config.n_layers)
        out[mode] = run_trace(model, task, task.examples[0], iv), w_o_used(model, modes)
    return out


@st.cache_resource(show_spinner=False)
def sweeps(name: str) -> dict:
    """scope -> the mode sweep the app shows for it (its k box at d_k), measured once."""
    model, task = model_and_task(name)
    cfg = model.config

    def accuracy(iv) -> float:
        return evaluate(model, task, ACCURACY_N, ACCURACY_SEED, interventions=iv)[task.metric]

    ranks = dissect.rank_grid(cfg.d_model, extra=[cfg.d_k])
    sweep = dissect.sweep_modes
    by_scope = {ALL: sweep(accuracy, cfg.d_model, None, ranks)}
    for layer in range(cfg.n_layers):
        by_scope[f"L{layer}"] = sweep(accuracy, cfg.d_model, layer, ranks)
    return by_scope


def before_after(name: str) -> None:
    by_mode = traces(name)
    mode = st.sidebar.radio("W_o", MODES, key="floor_mode")
    tr, W_o = by_mode[mode]
    H = tr.n_heads
    before, after = st.columns(2)
    with before:
        concat = plots.activation_map(tr.concat[LAYER], tr.labels, n_heads=H, title="concat")
        chart(concat, "concat")
    with after:
        chart(plots.activation_map(tr.attn_out[LAYER], tr.labels, title="attn_out"), "attn_out")
    cosine = cosine_per_token(tr.concat[LAYER], tr.attn_out[LAYER])
    chart(plots.cosine_bars(cosine, tr.labels, title="cosine"), "cosine")
    left, right = st.columns(2)
    with left:
        chart(plots.w_o_matrix(W_o[LAYER], H, title=f"W_o of layer {LAYER}"), "w_o")
    with right:
        terms = wo.head_contributions(tr.z[LAYER], W_o[LAYER])[:, TOKEN]
        chart(plots.head_contributions(terms, tr.labels[TOKEN], title="terms"), "terms")


def parts(name: str) -> None:
    by_scope = sweeps(name)
    model, task = model_and_task(name)
    k = model.config.d_k
    scope = st.selectbox("Switch W_o in", list(by_scope), key="floor_scope", width=220)
    sweep = by_scope[scope]
    names = {mode: mode for mode in dissect.WHOLE_MODES} | {"rank": "rank-k W_o"}
    left, right = st.columns([3, 2])
    with left:
        figure = plots.mode_sweep_plot(
            sweep.ranks, sweep.rank_values, sweep.whole, names, chosen_k=k, title=f"modes, {scope}"
        )
        chart(figure, "parts_sweep")
    with right:
        sv = dissect.singular_values(model)
        shown = list(range(model.config.n_layers)) if scope == ALL else [int(scope[1:])]
        figure = plots.w_o_spectrum_plot(
            sv[shown], title="Singular values of W_o", layer_ids=shown, chosen_k=k
        )
        chart(figure, "parts_spectrum")


def timeline(name: str) -> None:
    """A slider over 13 steps and the timeline's two charts: every head's attention and the head
    importance map, with data of the same shapes as a trained model's (not measured: made up
    per step from the model's attention, since only the drawing is timed)."""
    tr, _ = traces(name)["learned"]
    steps = list(range(0, 481, 40))  # bench/timeline_slider.py's model keeps 13 steps of 480
    step = st.select_slider("Step", options=steps, value=steps[-1], key="floor_step")
    i = steps.index(step)
    attn = tr.attn ** ((i + 1) / len(steps))  # from flat to the trained pattern
    attn = attn / attn.sum(-1, keepdims=True)
    importance = np.random.default_rng(i).random(attn.shape[:2])
    st.caption(f"step {step}")
    for col, layer in zip(st.columns(tr.n_layers), range(tr.n_layers), strict=True):
        col.metric(f"mixing L{layer}", f"{importance[layer].mean():.3f}")
    chart(plots.attention_grid(attn, tr.labels, title=f"attention, step {step}"), "attention")
    chart(plots.head_score_map(importance, title=f"importance, step {step}"), "importance")


@st.cache_resource(show_spinner=False)
def sentence_model():
    from tfviz.hf.pretrained import SentenceTask, load_minilm

    model, tokenizer = load_minilm()
    return model, SentenceTask(tokenizer)


def attention_cells(tr) -> np.ndarray:
    """The attention the app's Attention view draws for this trace, as one (rows, T) array:
    each shown head's (T, T) block and its layer's mean, one under the other (every layer of a
    toy model; MiniLM's layer 0, which the view opens on). Computed with numpy alone, as a bare
    page would: no tfviz figure is built."""
    layers = [0] if many_heads(tr.n_layers, tr.n_heads) else range(tr.n_layers)
    blocks = [np.concatenate([tr.attn[i], tr.attn[i].mean(0, keepdims=True)]) for i in layers]
    return np.concatenate(blocks).reshape(-1, tr.attn.shape[-1])


@st.cache_resource(show_spinner=False)
def folder_model(path: str):
    """A model folder as the app reads it: a decoder with its next-token task, or an encoder
    with its masked-LM head's."""
    from tfviz import hf
    from tfviz.hf.pretrained import SentenceTask

    loaded = hf.open_folder(path)
    if loaded.model.config.causal:
        return loaded.model, hf.NextTokenTask(loaded.tokenizer)
    return loaded.model, SentenceTask(loaded.tokenizer, head=loaded.head)


NEXT_ROWS = 16  # the app's next-token table lists the last 16 positions (tfviz.ui.next_token)


def attention(name: str) -> None:
    decoder = False
    if name == "minilm" or name.startswith("folder:"):
        if name == "minilm":
            model, task = sentence_model()
        else:
            model, task = folder_model(name.removeprefix("folder:"))
        decoder = model.config.causal
        label = "Text" if decoder else "Sentence A (traced)"
        text = st.text_input(label, task.examples[0], key="floor_text")
    else:
        model, task = model_and_task(name)
        text = st.text_input("Sequence", task.examples[0], key="floor_text")
    tr = run_trace(model, task, text)
    if decoder:  # the input as the app's table shows it: a position and its token a row
        rows = ["position  token"] + [
            f"{i}  {label}" for i, label in enumerate(tr.labels) if i >= len(tr.labels) - NEXT_ROWS
        ]
        st.container(key="prediction").code("\n".join(rows), language=None)
    elif name == "minilm" or name.startswith("folder:"):
        st.container(key="pieces").code(" ".join(task.pieces(text).pieces), language=None)
    else:
        st.container(key="prediction").code(f"input   {text}", language=None)
    z = attention_cells(tr)
    height = min(2000, max(400, 4 * len(z)))  # about the app's: its blocks are 3 to 8 px a row
    st.plotly_chart(go.Figure(go.Heatmap(z=z), layout=dict(height=height)), key="floor")


@st.cache_resource(show_spinner=False)
def one_thread() -> None:
    """torch on one thread, as the app runs it (tfviz.serve.jobs.limit_torch_threads): the
    model's forward pass then costs the same on both pages, and only the pages are compared."""
    import torch

    torch.set_num_threads(1)


one_thread()
VIEWS = {"before_after": before_after, "parts": parts, "timeline": timeline, "attention": attention}
VIEWS[os.environ.get("TFVIZ_FLOOR_VIEW", "before_after")](
    os.environ.get("TFVIZ_FLOOR_MODEL", "max_position")
)
