"""Shared fixtures: small models built from a fixed seed, and the repository root."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tfviz import ModelConfig
from tfviz.model import Encoder

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"


def make_model(seed: int = 0, **sizes) -> Encoder:
    """A randomly initialised encoder in eval mode (no dropout), deterministic for a seed."""
    cfg = dict(
        vocab_size=12, n_out=5, d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=10, dropout=0.0
    )
    cfg.update(sizes)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Encoder(ModelConfig(**cfg))
        # Non-zero biases everywhere, so tests notice a dropped or misplaced bias.
        for p in model.parameters():
            if p.dim() == 1:
                p.data.normal_(0, 0.1)
    return model.eval()


@pytest.fixture
def model() -> Encoder:
    return make_model()


@pytest.fixture
def ids() -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 11, (3, 7), generator=g)
