"""Plain helpers shared by several test files (fixtures live in tests/conftest.py)."""

from __future__ import annotations

import ast
import base64
import json
import re
import threading
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import torch

from tests.conftest import ROOT, page_figures
from tfviz.core.model import Encoder


def unescape(text: str) -> str:
    """Markdown text without the backslashes md_escape puts before markdown characters."""
    return text.replace("\\", "")


def charts(at) -> list[dict]:
    """Every chart of an AppTest page, plotly's and the canvas charts', in page order."""
    return page_figures(at)


def plotly_charts(at) -> list[dict]:
    """Only the plotly charts of an AppTest page (st.plotly_chart), as plotly JSON, in order."""
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def array(value) -> np.ndarray:
    """A plotly data array from figure JSON, as floats: a list (None read as nan), or a
    {dtype, bdata[, shape]} typed array."""
    if isinstance(value, dict):
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        return flat.reshape([int(d) for d in str(shape).split(",")]) if shape else flat
    return np.asarray(value, dtype=np.float64)


def attn(L=2, H=3, T=4, seed=0) -> np.ndarray:
    """Random attention weights (layers, heads, T, T), each row summing to 1."""
    rng = np.random.default_rng(seed)
    w = rng.random((L, H, T, T))
    return w / w.sum(-1, keepdims=True)


def stop_all(m) -> None:
    """Stop whatever a failed test left running on JobManager m, so no thread outlives it (a
    stand-in work with an `open` event, such as test_jobs.Gate, is let through first)."""
    for job in m.jobs():
        gate = getattr(job.work, "open", None)
        if isinstance(gate, threading.Event):
            gate.set()
        job.cancel()
        job.wait(30)


def plain(text: str) -> str:
    """A markdown-escaped message as the reader sees it: md_escape's backslashes gone."""
    return re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)


def en(key: str, **values) -> str:
    """The English text of an i18n key."""
    from tfviz.ui.i18n import translate

    return translate("en", key, **values)


def link(server: str, **params) -> str:
    """The app's address on server with params as its query."""
    return f"{server}/?{urlencode(params)}"


MAIN = '[data-testid="stMain"]'  # the page's main area


def shows(text: str) -> str:
    """A JS predicate (for page.wait_for_function): the main area shows text."""
    return f"""() => {{
        const main = document.querySelector('{MAIN}');
        return main !== null && main.innerText.includes({json.dumps(text)});
    }}"""


def python_tree(path: Path) -> ast.Module:
    """The ast of a Python file."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def tfviz_files(root: Path = ROOT) -> list[Path]:
    """Every Python file of the tfviz package under root, sorted."""
    return sorted((root / "tfviz").rglob("*.py"))


def called(node: ast.Call) -> str:
    """The name a call is made through: ConfigError(...) -> "ConfigError", x.run(...) -> "run",
    type(e)(...) -> ""."""
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def random_encoder(task, seed: int = 0) -> Encoder:
    """A random encoder for task (d_model 16, 4 heads, 2 layers), in eval mode and without
    gradients, with non-zero biases, so a dropped or misplaced bias shows."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Encoder(task.model_config(d_model=16, n_heads=4, d_ff=32, n_layers=2, dropout=0.0))
        for p in model.parameters():
            if p.dim() == 1:
                p.data.normal_(0, 0.1)
    return model.eval().requires_grad_(False)


def decoder_folders(tmp_path_factory, name: str, kinds) -> Path:
    """A models folder (a temporary one, named after name) holding one tiny decoder folder per
    kind ("gpt2", "llama", "qwen2"), built by tests/hf/test_hf_decoders.py's builder (which
    skips the test without transformers)."""
    from tests.hf.test_hf_decoders import build

    root = tmp_path_factory.mktemp(name)
    for kind in kinds:
        build(kind, root / kind)
    return root
