"""Numbers the app shows, as numpy: one traced forward pass, and how two passes differ.

`run_trace` runs the model once on one typed sequence and copies every site the views need into a
plain dataclass of float32 arrays (no tensors, no autograd), so the app can cache it and the plots
never touch a model. The other functions compare arrays: the cosine between what goes into W_o
(`concat`) and what comes out (`attn_out`), the check that the per-head terms add up to `attn_out`,
and how far a switched pass (W_o off, heads zeroed) drifts from the learned one.

Dimensions: L layers, H heads, T positions (BOS included when the task uses one), D = d_model.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tfviz import wo
from tfviz.evaluate import evaluate
from tfviz.metrics import metric
from tfviz.tasks import Task

ACCURACY_N = 256  # examples behind the "with and without the switch" accuracy
ACCURACY_SEED = 7_000_001  # fixed, so the two accuracies are measured on the same examples


@dataclass(frozen=True)
class TraceArrays:
    """One forward pass on one sequence, as float32 numpy arrays (batch dimension removed)."""

    text: str
    labels: list[str]  # one unique axis label per position, BOS first when the task uses one
    w_o_modes: list[str]  # per layer: "learned", "identity" or "zero"
    ablated: tuple[tuple[int, int], ...]  # (layer, head) pairs whose z was zeroed before W_o
    attn: np.ndarray  # (L, H, T, T) attention weights; a query's row sums to 1
    z: np.ndarray  # (L, H, T, d_k) each head's output
    concat: np.ndarray  # (L, T, D) heads side by side: the input of W_o
    attn_out: np.ndarray  # (L, T, D) the output of W_o: what attention adds to the residual
    resid_mid: np.ndarray  # (L, T, D) residual stream after the attention sublayer
    resid_out: np.ndarray  # (L, T, D) residual stream after the whole layer
    b_o: np.ndarray  # (L, D) the bias added (zero when W_o is switched off)
    prediction: list[str]  # the model's answer, one token per answer position
    answer: list[str]  # the right answer, same layout

    @property
    def n_layers(self) -> int:
        return self.attn.shape[0]

    @property
    def n_heads(self) -> int:
        return self.attn.shape[1]


def forward_switches(w_o: str = "learned", layer: int | None = None, ablate: Iterable = ()) -> dict:
    """Keyword arguments for the model's forward pass from the app's three controls.

    Args:
        w_o: "learned", "identity" (W_o off) or "zero".
        layer: None switches W_o in every layer, an int in that layer only.
        ablate: (layer, head) pairs whose output z is zeroed before W_o.
    Returns:
        {"w_o": mode or {layer: mode}, "ablate_heads": [(layer, head), ...]}.
    """
    wo.check_mode(w_o)
    return {
        "w_o": w_o if layer is None else {int(layer): w_o},
        "ablate_heads": [(int(lay), int(h)) for lay, h in ablate],
    }


def head_names(n_layers: int, n_heads: int) -> list[str]:
    """'L0H0', 'L0H1', ... for every head: the names the ablation picker offers."""
    return [f"L{lay}H{h}" for lay in range(n_layers) for h in range(n_heads)]


def parse_head_name(name: str) -> tuple[int, int]:
    """(layer, head) from 'L1H3'; ValueError for anything else."""
    try:
        layer, head = name.removeprefix("L").split("H")
        return int(layer), int(head)
    except (AttributeError, ValueError):
        raise ValueError(f"a head is named like 'L0H1', got {name!r}") from None


@torch.no_grad()
def run_trace(
    model, task: Task, text: str, w_o="learned", ablate_heads: Iterable = ()
) -> TraceArrays:
    """Run the model on one sequence with the given switches and copy out every traced site.

    Args:
        model: a tfviz Encoder (not changed: switches are forward arguments).
        task: the model's task; validates text (ValueError with the task's message if bad).
        w_o: "learned" | "identity" | "zero" or {layer: mode}, as in Encoder.forward.
        ablate_heads: (layer, head) pairs zeroed before W_o.
    Returns:
        TraceArrays with float32 arrays of the shapes listed there.
    """
    task.validate(text)
    ablate = tuple((int(lay), int(h)) for lay, h in ablate_heads)
    ids, pad_mask = task.encode_batch([text], device=model.device)
    out = model(ids, pad_mask, w_o=w_o, ablate_heads=ablate, trace=True)
    layers = out.trace.layers

    def stack(tensors) -> np.ndarray:
        return torch.stack(list(tensors)).to("cpu", torch.float32).numpy()

    return TraceArrays(
        text=text,
        labels=task.labels(text),
        w_o_modes=[lt.w_o_mode for lt in layers],
        ablated=ablate,
        attn=stack(lt.attn[0] for lt in layers),
        z=stack(lt.z[0] for lt in layers),
        concat=stack(lt.concat[0] for lt in layers),
        attn_out=stack(lt.attn_out[0] for lt in layers),
        resid_mid=stack(lt.resid_mid[0] for lt in layers),
        resid_out=stack(lt.resid_out[0] for lt in layers),
        b_o=stack(lt.b_o for lt in layers),
        prediction=task.answer_from_logits(out.logits[0], len(text)),
        answer=task.solve_tokens(text),
    )


def cosine_per_token(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of a and b along the last axis (..., T, D) -> (..., T).

    A token where either vector is zero (e.g. W_o in "zero" mode) gets 0: no shared direction.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"cannot compare shapes {a.shape} and {b.shape}")
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    dots = (a * b).sum(axis=-1)
    safe = np.where(norms > 1e-12, norms, 1.0)
    cos = np.where(norms > 1e-12, dots / safe, 0.0)
    return np.clip(cos, -1.0, 1.0).astype(np.float32)


def w_o_used(model, w_o_modes: Sequence[str]) -> np.ndarray:
    """(L, D, D) the map each layer applied, nn.Linear layout (out, in): the learned W_o, the
    identity (W_o off) or zeros. Kept out of TraceArrays: it is the same for every sequence."""
    mats = []
    for layer, mode in zip(model.layers, w_o_modes, strict=True):
        lin = layer.attn.W_o
        mats.append(wo.effective(lin.weight.detach(), lin.bias.detach(), mode)[0])
    return torch.stack(mats).to("cpu", torch.float32).numpy()


def head_contributions(z: np.ndarray, W_o: np.ndarray) -> np.ndarray:
    """z_h W_o^h for one layer: z (H, T, d_k) and W_o (D, D) -> (H, T, D).

    W_o^h is the block of rows of W_o^T that reads head h's slice of concat; the H terms plus
    b_o add up to attn_out.
    """
    return wo.head_contributions(z, W_o).astype(np.float32)


def decomposition_error(trace: TraceArrays, W_o: np.ndarray, layer: int | None = None) -> float:
    """max |sum_h z_h W_o^h + b_o - attn_out| over tokens and dims (one layer, or all layers).

    attn_out comes from the model's own W_o; the sum is rebuilt here from z alone, so this checks
    the decomposition, and is about 1e-6 (float32 rounding).
    """
    layers = range(trace.n_layers) if layer is None else [layer]
    err = 0.0
    for lay in layers:
        terms = head_contributions(trace.z[lay].astype(np.float64), W_o[lay].astype(np.float64))
        rebuilt = terms.sum(axis=0) + trace.b_o[lay]
        err = max(err, float(np.abs(rebuilt - trace.attn_out[lay]).max()))
    return err


def resid_cosine(base: TraceArrays, switched: TraceArrays) -> np.ndarray:
    """(L, T) cosine between the learned and the switched residual stream after each layer."""
    _same_input(base, switched)
    return cosine_per_token(base.resid_out, switched.resid_out)


def drift_per_layer(base: TraceArrays, switched: TraceArrays) -> np.ndarray:
    """(L,) cosine drift of the residual stream: 1 - mean over tokens of resid_cosine.

    0 means the switch changed nothing up to that layer; 1 means the directions became unrelated.
    """
    return (1.0 - resid_cosine(base, switched).mean(axis=-1)).astype(np.float32)


def changed_tokens(a: Sequence[str], b: Sequence[str]) -> list[int]:
    """Positions (0-based) where two answers of the same length differ."""
    if len(a) != len(b):
        raise ValueError(f"answers have {len(a)} and {len(b)} tokens; cannot compare them")
    return [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]


def later_layers(n_layers: int, w_o_layer: int | None, ablate: Iterable, switched: bool) -> list:
    """Layers whose attention a switch can change: those after the first switched layer.

    W_o and head ablation act after a layer's attention weights are computed, so the switched
    layer's own attention is unchanged; only the layers above it see a different input.
    """
    touched = [lay for lay, _ in ablate]
    if switched:
        touched.append(0 if w_o_layer is None else w_o_layer)
    if not touched:
        return []
    return list(range(min(touched) + 1, n_layers))


def prediction_table(
    rows: Sequence[tuple[str, Sequence[str]]], answer: Sequence[str], marked_row: int = -1
) -> str:
    """Rows of tokens in aligned columns, with '^' under each token of marked_row not in answer.

    Args:
        rows: (row name, tokens) pairs, e.g. [("input", ...), ("answer", ...), ("model", ...)].
        answer: the right tokens; the marked row is compared with it position by position.
        marked_row: index into rows of the row to mark (default: the last).
    Returns:
        Plain text for a monospace block; every token is shown literally.
    """
    rows = [(name, [str(t) for t in tokens]) for name, tokens in rows]
    n = max(len(tokens) for _, tokens in rows)
    widths = [max((len(t[i]) for _, t in rows if i < len(t)), default=1) for i in range(n)]
    name_width = max(len(name) for name, _ in rows)
    marked = rows[marked_row][1]
    wrong = set(changed_tokens(marked, answer)) if len(marked) == len(answer) else set(range(n))

    def line(name: str, cells: Sequence[str]) -> str:
        padded = [c.ljust(w) for c, w in zip(cells, widths, strict=False)]
        return f"{name.ljust(name_width)}  {' '.join(padded)}".rstrip()

    lines = [line(name, tokens) for name, tokens in rows]
    if wrong:
        marks = ["^" if i in wrong else "" for i in range(len(marked))]
        lines.append(line("", marks))
    return "\n".join(lines)


def headline_metric(task: Task, metrics: dict) -> tuple[str, str] | None:
    """(label, formatted value) of the task's main metric in an evaluate() dict, None if absent."""
    if task.metric not in metrics:
        return None
    m = metric(task.metric)
    return m.label, m.format(float(metrics[task.metric]))


@torch.no_grad()
def accuracy_with_switch(
    model, task: Task, n: int = ACCURACY_N, seed: int = ACCURACY_SEED, **switches
) -> dict[str, float]:
    """evaluate() on n random examples drawn from a fixed seed, with forward switches applied."""
    return evaluate(model, task, n=n, seed=seed, **switches)


def attention_csv(attn: np.ndarray, labels: Sequence[str]) -> str:
    """Attention weights (L, H, T, T) as CSV with columns layer, head, query, key, weight."""
    attn = np.asarray(attn)
    if attn.ndim != 4 or attn.shape[2] != attn.shape[3]:
        raise ValueError(f"attention must have shape (layers, heads, T, T), got {attn.shape}")
    if attn.shape[-1] != len(labels):
        raise ValueError(f"attention has {attn.shape[-1]} keys but {len(labels)} tokens were given")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["layer", "head", "query", "key", "weight"])
    L, H, T, _ = attn.shape
    for lay in range(L):
        for h in range(H):
            for q in range(T):
                for k in range(T):
                    writer.writerow([lay, h, labels[q], labels[k], f"{attn[lay, h, q, k]:.6g}"])
    return buf.getvalue()


def _same_input(a: TraceArrays, b: TraceArrays) -> None:
    if a.text != b.text or a.resid_out.shape != b.resid_out.shape:
        raise ValueError("the two traces must come from the same model and the same sequence")


def random_example(task: Task, rng: np.random.Generator) -> str:
    """A random sequence the task accepts, drawn as its training data are."""
    batch = task.sample(1, rng)
    return task.decode(batch.ids[0].tolist())
