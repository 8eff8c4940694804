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
TFVIZ_FLOOR_VIEW=neuron, freedom, lens, shares: issue 46's four parts, for bench/ui_latency.py
--floor --parts: the same box and input, then plain plotly charts (go.Heatmap, go.Bar, plotly's
defaults) of the numbers the app's part shows for the typed text: the attention and one head's q,
k, q x k, scores and softmax (the Attention tab with "Inside one head" on); W_o's freedom (OV
spectra, a change of basis, write-space angles, composition, linear undo); the logit lens and the
direct contributions; Before/after W_o with the heads' shares. Computed on every edit with the
tfviz.analysis functions the app calls; what the weights alone decide, once per model.

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


def typed(name: str):
    """The box the app's text is typed in and the typed input as the app shows it; returns
    (model, task, the trace of the typed text), the model run on every edit, as in the app."""
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
    return model, task, tr


def attention_heatmap(tr) -> None:
    z = attention_cells(tr)
    height = min(2000, max(400, 4 * len(z)))  # about the app's: its blocks are 3 to 8 px a row
    st.plotly_chart(go.Figure(go.Heatmap(z=z), layout=dict(height=height)), key="floor")


def attention(name: str) -> None:
    attention_heatmap(typed(name)[2])


# ---- the four parts of issue 46, each beside its floor (bench/ui_latency.py --parts) -----------
# Each draws what the app's part draws, as plain plotly charts with plotly's defaults, under the
# box and the input shown. What depends on the typed text is computed on every edit with the
# library functions the app calls; what the weights alone decide is computed once per model, as
# the app caches it, so the floor is a page that does no more work than it must.

HEAD = 0  # the app's default head (its pickers start at L0, H0)


def plain(trace, key: str) -> None:
    st.plotly_chart(go.Figure(trace), key=key)


def bundled(name: str) -> bool:
    return not (name == "minilm" or name.startswith("folder:"))


def neuron(name: str) -> None:
    """The Attention tab with "Inside one head" on: its attention, then one head's q over every
    k, q x k, and the dot products, scores and softmax for the last query (the app's default)."""
    from tfviz.analysis import neuron_view_of_trace

    model, task, tr = typed(name)
    attention_heatmap(tr)
    nv = neuron_view_of_trace(model, task, tr, LAYER, HEAD, len(tr.labels) - 1)
    plain(go.Heatmap(z=np.vstack([nv.q[None], nv.k])), "floor_qk")
    plain(go.Heatmap(z=nv.product), "floor_product")
    scores = np.where(nv.masked, np.nan, nv.scores)  # -inf has no JSON; the app leaves it out too
    figure = go.Figure([go.Bar(y=nv.dots), go.Bar(y=scores), go.Bar(y=nv.weights)])
    st.plotly_chart(figure, key="floor_scores")


@st.cache_resource(show_spinner=False)
def weight_numbers(name: str, _model, _task) -> dict:
    """What "W_o's freedom" draws from the weights alone: every head's OV spectrum, a change of
    basis of (L0, H0) (where the app allows one), the write spaces' angles, composition scores,
    and, for a toy task, the linear undo on its fresh examples."""
    from tfviz import analysis
    from tfviz.ui.compute import UNDO_EXAMPLES, sandbox_allowed

    numbers = {"spectra": analysis.ov_spectra(_model, "learned").singular_values}
    numbers["change"] = None
    if sandbox_allowed(_model):
        numbers["change"] = analysis.change_basis(_model, LAYER, HEAD, "random", 0)
    for mode in ("learned", "identity"):
        numbers[f"angles_{mode}"] = analysis.write_spaces(_model, mode).smallest[LAYER]
        numbers[f"composition_{mode}"] = analysis.composition_scores(_model, mode)
    if bundled(name):
        rng = np.random.default_rng(analysis.ANALYSIS_SEED)
        batch = _task.sample(UNDO_EXAMPLES, rng, None, None)
        numbers["undo"] = analysis.undo_by_linear_map(_model, batch.ids, LAYER, batch.pad_mask)
    return numbers


def freedom(name: str) -> None:
    """Take W_o apart, "W_o's freedom", at L0 H0 with the app's default change of basis."""
    from tfviz import analysis

    model, task, tr = typed(name)
    numbers = weight_numbers(name, model, task)
    spectra = numbers["spectra"]
    plain(go.Heatmap(z=spectra.reshape(-1, spectra.shape[-1])), "floor_spectrum")
    change = numbers["change"]
    if change is not None:
        ids, pad_mask = task.encode_batch([tr.text], device=model.device)
        for mode in ("learned", "identity"):
            gap = analysis.output_difference(model, change.model, ids, pad_mask, w_o=mode)
            st.metric(mode, f"{gap:.1e}")
        both = (model, change.model)
        pairs = {
            "w_v": [analysis.value_block(m, LAYER, change.kv_head)[0].T for m in both],
            "w_o": [analysis.output_block(m, LAYER, HEAD) for m in both],
        }
        for what, (before, after) in pairs.items():
            plain(go.Heatmap(z=np.hstack([before, after])), f"floor_{what}")
    for mode in ("learned", "identity"):
        plain(go.Heatmap(z=numbers[f"angles_{mode}"]), f"floor_angles_{mode}")
    if model.config.n_layers > 1:
        rows = [
            {x: float(getattr(numbers[f"composition_{mode}"], x).mean()) for x in "qkv"}
            for mode in ("learned", "identity")
        ]
        st.table(rows)
    undo = numbers.get("undo")
    if undo is None:  # a text's own tokens, as the app fits them for a model without examples
        ids, pad_mask = task.encode_batch([tr.text])
        undo = analysis.undo_by_linear_map(model, ids, LAYER, pad_mask)
    for site in ("attn_out", "resid_mid", "resid_out"):
        st.metric(site, f"{getattr(undo, site):.1e}")


def lens(name: str) -> None:
    """Analysis, "Logit lens": the top token and its probability per layer at the text's last
    positions, then each head's direct contribution to the likeliest next token's logit and the
    largest components."""
    from tfviz import analysis
    from tfviz.analysis.lens import compare_contributions
    from tfviz.ui.compute import LENS_MAX_POSITIONS

    model, task, tr = typed(name)
    T = len(tr.labels)
    positions = tuple(range(max(0, T - LENS_MAX_POSITIONS), T))
    try:
        one = analysis.compare_lens(model, task, tr.text, positions=positions).learned
    except analysis.LensRefused as refused:
        st.info(str(refused))
        return
    x = [one.labels[p] for p in one.positions]
    text = one.tokens[:, :, 0]
    heatmap = go.Heatmap(z=one.probs[:, :, 0], x=x, y=one.rows, text=text, texttemplate="%{text}")
    plain(heatmap, "floor_lens")
    c = compare_contributions(model, task, tr.text).learned
    plain(go.Heatmap(z=np.nan_to_num(c.heads)), "floor_contributions")
    st.table([{"component": part, "contribution": value} for part, value in c.ranked[:12]])


@st.cache_resource(show_spinner=False)
def learned_w_o(name: str, _model) -> np.ndarray:
    """W_o as the learned model applies it, (L, D, D): the weights alone decide it."""
    return w_o_used(_model, ["learned"] * _model.config.n_layers)


def shares(name: str) -> None:
    """Before/after W_o at L0 and the first token (the app's defaults), then each head's share of
    attn_out: averaged over the tokens in every layer, and per token in L0."""
    from tfviz.analysis import output_shares_of_trace

    model, _, tr = typed(name)
    W_o = learned_w_o(name, model)[LAYER]
    plain(go.Heatmap(z=tr.concat[LAYER]), "floor_concat")
    plain(go.Heatmap(z=tr.attn_out[LAYER]), "floor_attn_out")
    plain(go.Bar(y=cosine_per_token(tr.concat[LAYER], tr.attn_out[LAYER])), "floor_cosine")
    plain(go.Heatmap(z=W_o), "floor_w_o")
    terms = wo.head_contributions(tr.z[LAYER], W_o)[:, TOKEN]
    plain(go.Heatmap(z=terms), "floor_terms")
    share = output_shares_of_trace(model, tr).norm_share
    plain(go.Heatmap(z=share.mean(axis=-1)), "floor_share_flow")
    plain(go.Heatmap(z=share[LAYER]), "floor_share_tokens")


@st.cache_resource(show_spinner=False)
def one_thread() -> None:
    """torch on one thread, as the app runs it (tfviz.serve.jobs.limit_torch_threads): the
    model's forward pass then costs the same on both pages, and only the pages are compared."""
    import torch

    torch.set_num_threads(1)


one_thread()
VIEWS = {
    "before_after": before_after,
    "parts": parts,
    "timeline": timeline,
    "attention": attention,
    "neuron": neuron,
    "freedom": freedom,
    "lens": lens,
    "shares": shares,
}
VIEWS[os.environ.get("TFVIZ_FLOOR_VIEW", "before_after")](
    os.environ.get("TFVIZ_FLOOR_MODEL", "max_position")
)
