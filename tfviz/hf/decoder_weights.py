"""A decoder folder's weights into tfviz's Transformer run causally: every name, shape and the size
checked from the safetensors headers against config.json before a tensor is read, then each
tensor read, split or transposed where the family stores it so (tfviz.hf.decoders.Source).

The encoders' loader (tfviz.hf.shards) maps one checkpoint tensor to one parameter; a decoder's
may be a third of a fused matrix, or stored transposed, so it has this reader of its own, on the
same files, limits and refusals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from tfviz.core.config import ModelConfig
from tfviz.core.model import Transformer, parameter_shapes
from tfviz.hf.decoders import DecoderArchitecture, Source
from tfviz.hf.errors import TooLargeError, WeightsError
from tfviz.hf.family import Family
from tfviz.hf.shards import WeightFiles, check_names, open_weights, refused_config
from tfviz.hf.weights import checked

# Decoders are larger than the encoders a class opens: Qwen2-0.5B has 494 M parameters (2 GB in
# float32), SmolLM-360M 362 M. tfviz.core.config.LIMITS bounds each size before this is reached.
MAX_DECODER_PARAMS = 600_000_000


def decoder_config(arch: DecoderArchitecture, max_params: int) -> ModelConfig:
    """tfviz's config for the architecture; TooLargeError or ConfigError before allocation."""
    try:
        config = ModelConfig(
            **arch.fields,
            n_out=arch.fields["vocab_size"],  # the head reads out the next token
            dropout=0.0,
            pool="none",
            embed="token",
        )
    except ValueError as e:
        raise refused_config(e) from None
    if config.n_params > max_params:
        raise TooLargeError("too_many_params", n=config.n_params, most=max_params)
    return config


def file_shape(source: Source, ours: tuple[int, ...], positions_in_file: int) -> tuple:
    """The shape the checkpoint tensor behind `source` must have for a parameter of shape ours."""
    if len(ours) == 3:  # the position table: (1, max_len, D) here, (positions, D) in the file
        return (positions_in_file, ours[-1])
    shape = tuple(reversed(ours)) if source.transpose else ours
    return shape[:-1] + (shape[-1] * source.parts,)


@dataclass(frozen=True)
class DecoderPlan:
    """What the weights hold, checked from the headers: nothing read, nothing allocated."""

    config: ModelConfig
    sources: dict[str, Source]  # Transformer parameter -> where it comes from
    ignored: tuple[tuple[str, str], ...]  # (tensor name, why it is not used)

    @property
    def n_stored(self) -> int:
        """The checkpoint's own parameters, as transformers counts them: every parameter read
        from the file (a tied head once), not the zero biases tfviz adds where the family has
        none (config.n_params counts those too)."""
        shapes = parameter_shapes(self.config)
        read = [ours for ours, src in self.sources.items() if src.name is not None]
        return sum(math.prod(shapes[ours]) for ours in read if ours != "pos") + (
            self.config.max_len * self.config.d_model if "pos" in read else 0
        )

    @property
    def biases_dropped(self) -> tuple[str, ...]:
        """The biases the family does not have (no tensor in the file) on the maps other than
        W_o: the loaded model has none there (None), so each such map is a bare product, as in
        the family's own model, not a product added to a copy of zeros (2-3% of a Llama-sized
        traced pass, bench/README.md). W_o keeps its zero bias: b_o is part of every view of
        W_o (the head terms add up to attn_out only with it)."""
        return tuple(
            ours for ours, src in self.sources.items()
            if src.name is None and ours.endswith(".bias")
            and ours.removesuffix(".bias").rsplit(".", 1)[-1] in BARE_MAPS
        )  # fmt: skip


# The linear maps whose absent bias is left out (DecoderPlan.biases_dropped): all but W_o.
BARE_MAPS = ("W_q", "W_k", "W_v", "fc1", "up", "fc2", "head")


def _prefix(family: Family, names) -> str:
    return family.prefix if family.prefix + family.embedding in names else ""


def plan_decoder(
    weights: WeightFiles, family: Family, arch: DecoderArchitecture, max_params: int
) -> DecoderPlan:
    """Every check that needs no tensor data, each before anything larger is read: the config
    against the limits, the files' size against the config, the names in the headers against
    the family's, each tensor's shape against the config."""
    config = decoder_config(arch, max_params)
    V, D = config.vocab_size, config.d_model
    # Largest honest file: every parameter and an untied head in float32, plus the header.
    honest = 4 * (config.n_params + V * D + (arch.positions_in_file + 64) * D) + (4 << 20)
    if weights.size > honest:
        raise TooLargeError(
            "shards_too_large" if weights.where else "weights_too_large",
            file=weights.name, size=weights.size, most=honest,
        )  # fmt: skip
    shapes = parameter_shapes(config)
    with open_weights(weights) as f:
        names = set(f.keys())
        prefix = _prefix(family, names)
        sources = family.sources(config, arch, prefix)
        if set(sources) != set(shapes):
            missing = sorted(set(shapes) - set(sources))[:3]
            raise WeightsError("unnamed_parameters", names=repr(missing))
        used = {s.name for s in sources.values() if s.name is not None}
        ignored = check_names(family, prefix, names, used, weights.name)
        for ours, source in sources.items():
            if source.name is None:
                continue
            want = file_shape(source, shapes[ours], arch.positions_in_file)
            found = tuple(f.get_slice(source.name).get_shape())
            if found != want:
                raise WeightsError("wrong_shape", tensor=source.name, found=found, shape=want)
    return DecoderPlan(config, sources, ignored)


def _read(f, source: Source, shape: tuple, max_len: int) -> Tensor:
    """The parameter of this shape from the file: a part of the tensor's last axis, transposed,
    or the first max_len rows of a position table; dtype and values checked."""
    if len(shape) == 3:  # the position table: the rows real tokens read
        rows = f.get_slice(source.name)[:max_len]
        return checked(source.name, rows, (max_len, shape[-1])).unsqueeze(0).contiguous()
    if source.parts > 1:
        n = (shape[0] if source.transpose else shape[-1]) if len(shape) == 2 else shape[0]
        lo, hi = source.part * n, (source.part + 1) * n
        piece = f.get_slice(source.name)
        t = piece[:, lo:hi] if len(shape) == 2 else piece[lo:hi]
    else:
        t = f.get_tensor(source.name)
    want = tuple(reversed(shape)) if source.transpose else shape
    t = checked(source.name, t, want)
    return t.T.contiguous() if source.transpose else t


def load_decoder(
    weights: WeightFiles, family: Family, arch: DecoderArchitecture, max_params: int
) -> tuple[Transformer, DecoderPlan]:
    """The decoder (CPU, eval mode, no gradients) and its plan (the tensors left out, the
    parameters the checkpoint holds), after plan_decoder's checks."""
    plan = plan_decoder(weights, family, arch, max_params)
    config = plan.config
    shapes = parameter_shapes(config)
    state: dict[str, Tensor] = {}
    with open_weights(weights) as f:
        for ours, source in plan.sources.items():
            if source.name is None:
                continue
            if ours == "embed.weight" and not config.tie_head:
                # Only indexed, never multiplied: kept as stored (bfloat16 or float16 halves
                # the largest table of an untied model); its rows are made float32 as read.
                t = f.get_tensor(source.name)
                state[ours] = checked(source.name, t, shapes[ours], keep_dtype=True)
                continue
            state[ours] = _read(f, source, shapes[ours], config.max_len)
    dropped = plan.biases_dropped
    for ours, source in plan.sources.items():
        if source.name is None and ours not in dropped:
            # A tied head reads out with the token embedding (the very tensor); any other
            # absent tensor is a bias kept as zero (W_o's: b_o is in every view): it adds nothing.
            tied = ours == "head.weight"
            state[ours] = state["embed.weight"] if tied else torch.zeros(shapes[ours])
    # Built on the meta device (no memory, no random draw), then given the checkpoint's tensors
    # (assign=True: no copy). Drawing random weights first took most of Qwen2-0.5B's open
    # (bench/README.md); the meta device's first use costs time once per process
    # (it imports torch._dynamo), which the small encoders' loader does not pay.
    with torch.device("meta"):
        model = Transformer(config)
    for name in dropped:
        model.get_submodule(name.removesuffix(".bias")).bias = None
    model.load_state_dict(state, strict=True, assign=True)
    if any(p.is_meta for p in model.parameters()):
        raise WeightsError("unnamed_parameters", names=repr([n for n, p in
                           model.named_parameters() if p.is_meta][:3]))  # fmt: skip
    if config.tie_head:
        model.head.weight = model.embed.weight  # one Parameter, as transformers ties them
    else:
        # load_state_dict casts to the module's dtype; the untied table keeps its own
        model.embed.weight = torch.nn.Parameter(state["embed.weight"], requires_grad=False)
    return model.eval().requires_grad_(False), plan
