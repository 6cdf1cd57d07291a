"""000's July-2020 prototype (robertodessi/fairseq, branch dev @ f85f0b88, `<shared>/reference/prototype_000/`)
imported as it is beside the zoo's Transformer, and a converter from its attention weights to ours.

Its `fairseq/models/ctronn_attention.py` and `ctronn_encoder.py` are loaded as the modules of a package of our own
name (their relative `from .ctronn_attention import *` finds the sibling file). What they import that is not here is
stood in for while they load, and taken out of sys.modules after:

- `fairseq`: their attention and encoder layer use `fairseq.modules.LayerNorm` and `ConvTBC`, which are loaded from
  the fairseq fork beside them (`<shared>/reference/dangle/fairseq/fairseq/modules/layer_norm.py`, `conv_tbc.py`,
  both plain torch); `utils`, `with_incremental_state` and `MultiheadAttention` (cross-attention of their decoder
  layer, which these tests do not build) are imported but not used by what the tests run. The whole fork imports too,
  but takes seconds and needs numpy's removed `np.float`.
- `einops`, when it is not installed (it is not a dependency of ours): `rearrange` for the patterns their files use.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import math
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import torch

PACKAGE = "prototype_000_models"  # our name for their fairseq/models folder


def _groups(side: str) -> list[list[str]]:
    """einops axes of one side of a pattern: "h () t l" -> [["h"], [], ["t"], ["l"]]."""
    groups, current = [], None
    for token in side.replace("(", " ( ").replace(")", " ) ").split():
        if token == "(":
            current = []
        elif token == ")":
            groups.append(current)
            current = None
        elif current is not None:
            current.append(token)
        else:
            groups.append([token])
    return groups


def rearrange(tensor: torch.Tensor, pattern: str, **sizes: int) -> torch.Tensor:
    """einops' `rearrange` for patterns of named axes, parenthesised groups and `()`, at most one unknown size a
    group: split the groups, permute the axes, merge the new groups."""
    left, right = (_groups(side) for side in pattern.split("->"))
    sizes = dict(sizes)
    for group, length in zip(left, tensor.shape, strict=True):
        unknown = [axis for axis in group if axis not in sizes]
        if unknown:
            sizes[unknown[0]] = length // math.prod(sizes[axis] for axis in group if axis in sizes)
    axes = [axis for group in left for axis in group]
    order = [axis for group in right for axis in group]
    split = tensor.reshape([sizes[axis] for axis in axes])
    return split.permute([axes.index(axis) for axis in order]).reshape(
        [math.prod(sizes[axis] for axis in group) for group in right])


def _not_stood_in(name: str):
    def refuse(*args, **kwargs):
        raise NotImplementedError(f"{name} is not part of the prototype_000 shim (tests/reference/prototype_000.py)")
    return refuse


def _load_file(path: Path, alias: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(alias, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stand_ins(fork_modules: Path) -> dict[str, types.ModuleType]:
    fairseq, modules = types.ModuleType("fairseq"), types.ModuleType("fairseq.modules")
    modules.LayerNorm = _load_file(fork_modules / "layer_norm.py", "prototype_000_layer_norm").LayerNorm
    modules.ConvTBC = _load_file(fork_modules / "conv_tbc.py", "prototype_000_conv_tbc").ConvTBC
    modules.MultiheadAttention = _not_stood_in("fairseq.modules.MultiheadAttention")
    utils = types.ModuleType("fairseq.utils")
    incremental = types.ModuleType("fairseq.incremental_decoding_utils")
    incremental.with_incremental_state = lambda cls: cls
    fairseq.modules, fairseq.utils, fairseq.incremental_decoding_utils = modules, utils, incremental
    stand_ins = {"fairseq": fairseq, "fairseq.modules": modules, "fairseq.utils": utils,
                 "fairseq.incremental_decoding_utils": incremental}
    if importlib.util.find_spec("einops") is None:
        einops = types.ModuleType("einops")
        einops.rearrange = rearrange
        for name in ("reduce", "asnumpy", "parse_shape"):
            setattr(einops, name, _not_stood_in(f"einops.{name}"))
        stand_ins["einops"] = einops
    return stand_ins


@contextlib.contextmanager
def _standing_in(stand_ins: dict[str, types.ModuleType]):
    saved = {name: sys.modules.get(name) for name in stand_ins}
    sys.modules.update(stand_ins)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def import_prototype(folder: Path, fork: Path) -> SimpleNamespace:
    """Their `ctronn_attention` and `ctronn_encoder` modules (`folder`: `<shared>/reference/prototype_000`; `fork`:
    `<shared>/reference/dangle/fairseq`, for LayerNorm and ConvTBC), and `standing_in()`, a context in which the
    stand-ins are back in sys.modules (their `ConvTBC` helper imports `fairseq.modules` when called)."""
    if PACKAGE not in sys.modules:
        package = types.ModuleType(PACKAGE)
        package.__path__ = [str(folder / "fairseq" / "models")]
        package.stand_ins = _stand_ins(fork / "fairseq" / "modules")
        with _standing_in(package.stand_ins):
            sys.modules[PACKAGE] = package
            try:
                for name in ("ctronn_attention", "ctronn_encoder"):
                    importlib.import_module(f"{PACKAGE}.{name}")
            except BaseException:
                for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
                    del sys.modules[name]
                raise
    return SimpleNamespace(attention=sys.modules[f"{PACKAGE}.ctronn_attention"],
                           encoder=sys.modules[f"{PACKAGE}.ctronn_encoder"],
                           standing_in=lambda: _standing_in(sys.modules[PACKAGE].stand_ins))


def our_t5_table(their_embedding: torch.Tensor) -> torch.Tensor:
    """Our T5 table (heads × 2s + 1) from their `RelativeBias.embedding.weight` (2s + 1 × heads): their bucket of
    the distance j - i (key minus query, ctronn_attention.py L36-39) is ours of i - j, so the buckets are mirrored."""
    return their_embedding.detach().flip(0).T.contiguous()


@torch.no_grad()
def load_prototype_attention(ours, theirs) -> None:
    """Their `MultiheadRelativeAttention` / `CnnMaskingAttention` weights into our self-attention built with
    `head_width = "model"` and `sublayer = "prototype"`: w_qs, w_ks, w_vs, fc, the inner layer norm, the T5 table."""
    pairs = ((ours.query, theirs.w_qs), (ours.key, theirs.w_ks), (ours.value, theirs.w_vs), (ours.out, theirs.fc),
             (ours.norm, theirs.layer_norm))
    for mine, their in pairs:
        mine.weight.copy_(their.weight)
        mine.bias.copy_(their.bias)
    if hasattr(theirs, "relative_attention"):
        ours.relative_bias.copy_(our_t5_table(theirs.relative_attention.embedding.weight))
