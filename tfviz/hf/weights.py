"""Checkpoint tensors into a tfviz Transformer: every shape and value checked, nothing guessed.

Shared by every family and by tfviz.hf.pretrained's bundled MiniLM: a key map (tfviz parameter ->
checkpoint name, tfviz.hf.families) and the tensors go in, a Transformer in eval mode with gradients
off comes out, or a WeightsError saying which tensor is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from tfviz.core.config import ModelConfig
from tfviz.core.model import Transformer, parameter_shapes
from tfviz.hf.errors import WeightsError

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # read, then computed in float32


def expected_shapes(config: ModelConfig, positions_in_file: int | None = None) -> dict:
    """tfviz parameter -> the shape its checkpoint tensor must have, from the config alone
    (nothing allocated): the model's own (tfviz.core.model.parameter_shapes), but "pos", which
    is the checkpoint's 2-d position table, positions_in_file rows."""
    shapes = parameter_shapes(config)
    if "pos" in shapes:
        shapes["pos"] = (positions_in_file or config.max_len, config.d_model)
    return shapes


def checked(
    name: str, t: Tensor, shape: tuple, dtypes=FLOAT_DTYPES, keep_dtype: bool = False
) -> Tensor:
    """t as float32 (or in its own float dtype, keep_dtype) if it has this shape, a float dtype
    and only finite values, else WeightsError."""
    if tuple(t.shape) != tuple(shape) or t.dtype not in dtypes:
        allowed = "/".join(str(d).removeprefix("torch.") for d in dtypes)
        dtype = str(t.dtype).removeprefix("torch.")
        raise WeightsError(
            "wrong_tensor", tensor=name, dtype=dtype, found=tuple(t.shape), allowed=allowed,
            shape=tuple(shape),
        )  # fmt: skip
    if not keep_dtype:
        t = t.float()
    # One sum per tensor: NaN or inf anywhere makes it non-finite (weights are far too small to
    # overflow float32), and it costs a fraction of isfinite(t).all(); summed in float32 without
    # a float32 copy of a tensor kept in its own dtype.
    if not torch.isfinite(t.sum(dtype=torch.float32)):
        raise WeightsError("not_finite", tensor=name)
    return t


def encoder_from_tensors(
    config: ModelConfig,
    names: Mapping[str, str],
    tensors: Mapping[str, Tensor],
    position_offset: int = 0,
    positions_in_file: int | None = None,
    dtypes=FLOAT_DTYPES,
) -> Transformer:
    """A Transformer (CPU, eval mode, no gradients) holding the named checkpoint tensors.

    names: tfviz parameter -> checkpoint name, covering every parameter. tensors: checkpoint
    name -> tensor (read lazily if it is a lazy mapping). The position table keeps its rows from
    position_offset on (RoBERTa's first real token reads row pad_token_id + 1).
    """
    shapes = expected_shapes(config, positions_in_file)
    if set(names) != set(shapes):
        raise WeightsError("unnamed_parameters", names=repr(sorted(set(shapes) - set(names))[:3]))
    state = {}
    for ours, theirs in names.items():
        if theirs not in tensors:
            raise WeightsError("no_tensor", tensor=theirs)
        t = checked(theirs, tensors[theirs], shapes[ours], dtypes)
        if ours == "pos":
            # (positions, D) -> (1, max_len, D): the rows real tokens read, in order.
            t = t[position_offset : position_offset + config.max_len].unsqueeze(0).contiguous()
        state[ours] = t
    # Built on the CPU and its random weights then replaced (assign=True: no copy). Building on
    # the meta device would skip the random init but costs more: its first use imports
    # torch._dynamo (seconds, and memory).
    model = Transformer(config)
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval().requires_grad_(False)
