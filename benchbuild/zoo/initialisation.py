"""How the zoo's Transformer draws its initial weights: the `init` switch and, for embeddings, `embedding_scale`.

- `init = "zoo"`: every linear layer (and convolution) Glorot-uniform with zero bias, layer norms at (1, 0), the
  embeddings as `embedding_scale` says (`init_embedding`: 003 App. D as its official code draws them).
- `init = "fairseq"`: as fairseq's Transformer, which 000 trained: embeddings N(0, d^-1/2) with the padding row zero
  (`Embedding` in fairseq/models/transformer.py), query/key/value projections Glorot-uniform with gain 1/√2 and
  PyTorch's default bias, attention output projection Glorot-uniform with zero bias
  (`MultiheadAttention.reset_parameters`), feed-forward layers PyTorch's default `nn.Linear` init
  (`build_fc1`/`build_fc2` of fairseq 0.10 and later, and `nn.Linear` in 000's July-2020 prototype,
  ctronn_encoder.py / ctronn_decoder.py; fairseq 0.9.0 drew them Xavier with zero bias), the untied output
  projection N(0, d^-1/2) (`build_output_projection`). Needs
  `embedding_scale = "teu"` (fairseq scales the embeddings by √d); fairseq's sinusoids are
  `benchbuild.zoo.positions.fairseq_sinusoid`.

- `init = "003"`: as 003's official code (RobertCsordas/transformer_generalization) draws its Transformers:
  attention projections Glorot-uniform (layers/transformer/multi_head_attention.py, `MultiHeadAttention.
  reset_parameters`) but those of relative self-attention PyTorch's own `nn.Linear` draw, U(±1/√fan_in), since
  `FixedRelativeMultiheadAttention.__init__` never calls its `reset_parameters`
  (layers/transformer/multi_head_relative_pos_attention.py L51-67 against L109-121); the first feed-forward layer
  Glorot-uniform with the ReLU gain √2, the second with gain 1, their biases PyTorch's default
  (layers/transformer/transformer.py and relative_transformer.py, `reset_parameters`); the embeddings as
  `embedding_scale` says. Its attention has no biases and its tied output layer a learned bias, zero at the start:
  the architecture keys `attention_bias = false` and `output_bias = true`, which 003's recipes set beside it.

A layer says how fairseq draws it by its role (`with_role`) and how 003's code draws it by `with_003_draw`;
`init_module` is what the model's `_init_weights` runs on every module.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers import initialization as init

INITS = ("zoo", "fairseq", "003")


def with_role(linear: nn.Linear, role: str) -> nn.Linear:
    """`linear` marked with how `init = "fairseq"` draws it (`fairseq_linear`)."""
    linear.fairseq_role = role
    return linear


def with_003_draw(linear: nn.Linear, draw: str) -> nn.Linear:
    """`linear` marked with how `init = "003"` draws it: "xavier", "xavier_relu" (gain √2) or "pytorch"."""
    linear.draw_003 = draw
    return linear


def init_module(module: nn.Module, scheme: str) -> bool:
    """Draw `module`'s own weights under `scheme` ("zoo", "fairseq" or "003"); False when it has none this function
    knows (the model then lets the module reset itself)."""
    role = getattr(module, "fairseq_role", None)
    if role is not None and scheme == "fairseq":
        fairseq_linear(module, role)
    elif getattr(module, "draw_003", None) is not None and scheme == "003":
        linear_003(module, module.draw_003)
    elif isinstance(module, (nn.Linear, nn.Conv1d)):
        init.xavier_uniform_(module.weight)
        if module.bias is not None:
            init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        init.ones_(module.weight)
        init.zeros_(module.bias)
    else:
        return False
    return True


def fairseq_linear(linear: nn.Linear, role: str) -> None:
    """fairseq's initialisation of a linear layer by its role: an attention "projection" (query, key, value:
    Glorot-uniform, gain 1/√2; "projection_unequal" where keys and values come from another width, fairseq's
    `qkv_same_dim` False: gain 1, `MultiheadAttention.reset_parameters`), an attention "output" (Glorot-uniform,
    zero bias), a "feed_forward" layer
    (PyTorch's own `nn.Linear` init: Kaiming-uniform with a = √5, i.e. U(±1/√fan_in)), or the untied
    "output_embedding" (N(0, d^-1/2), `build_output_projection`). Biases fairseq does not redraw keep PyTorch's
    U(±1/√fan_in)."""
    if role == "output_embedding":
        init.normal_(linear.weight, mean=0.0, std=linear.in_features ** -0.5)
    elif role == "projection":
        init.xavier_uniform_(linear.weight, gain=1 / math.sqrt(2))
    elif role in ("output", "projection_unequal"):
        init.xavier_uniform_(linear.weight)
    else:
        init.kaiming_uniform_(linear.weight, a=math.sqrt(5))
    if role == "output":
        init.zeros_(linear.bias)
    elif linear.bias is not None:
        bound = 1 / math.sqrt(linear.in_features)
        init.uniform_(linear.bias, -bound, bound)


def linear_003(linear: nn.Linear, draw: str) -> None:
    """003's official draw of a linear layer: "xavier" (Glorot-uniform), "xavier_relu" (Glorot-uniform, gain √2: the
    first feed-forward layer) or "pytorch" (`nn.Linear`'s own Kaiming-uniform with a = √5, i.e. U(±1/√fan_in): the
    projections of relative self-attention, which are never reset); every bias keeps PyTorch's U(±1/√fan_in)."""
    if draw == "pytorch":
        init.kaiming_uniform_(linear.weight, a=math.sqrt(5))
    else:
        init.xavier_uniform_(linear.weight, gain=math.sqrt(2) if draw == "xavier_relu" else 1.0)
    if linear.bias is not None:
        bound = 1 / math.sqrt(linear.in_features)
        init.uniform_(linear.bias, -bound, bound)


def init_embedding(weight: torch.Tensor, scale: str, fairseq: bool, padding_index: int | None) -> None:
    """An embedding table (vocabulary × d) drawn as 003 App. D's `embedding_scale` says, as its official code
    (RobertCsordas/transformer_generalization, models/transformer_enc_dec.py) draws it: "teu" and "xavier"
    Glorot-uniform (`xavier_uniform_`), "none" N(0, 1), "ped" `kaiming_normal_` of a (vocab, d) weight, std √(2/d)
    (fan_in d, ReLU gain √2; the paper's text says N(0, 1/√d)); under fairseq's scheme N(0, d^-1/2) with the padding
    row zero. A loaded checkpoint's weight is flagged initialised: neither it nor its padding row is drawn again."""
    d_model = weight.size(1)
    if fairseq:
        if not getattr(weight, "_is_hf_initialized", False):
            init.normal_(weight, mean=0.0, std=d_model ** -0.5)
            if padding_index is not None:
                init.zeros_(weight[padding_index])
    elif scale in ("teu", "xavier"):
        init.xavier_uniform_(weight)
    elif scale == "none":
        init.normal_(weight, mean=0.0, std=1.0)
    else:
        init.normal_(weight, mean=0.0, std=math.sqrt(2.0 / d_model))
