"""One encoder-decoder Transformer whose paper variants are switches (000, 003, 004), not copies.

Switches (all in `TransformerConfig`):

- `position`: "absolute", "relative", "t5_bias", "fixed_span", "shaw" or "none": how positions enter, each
  explained with its paper's equation in `benchbuild.zoo.positions` (words with sinusoids, 000's T5 bias and fixed
  span, 003's relative attention, 001's Shaw terms). `max_relative_position` (M, "shaw" only): distances are clipped
  to ±(M - 1), 2M - 1 embeddings per layer.
- `embedding_scale`: "teu" (Glorot-initialised embeddings times √d plus positions), "none" (N(0, 1) embeddings
  plus positions), "ped" (Kaiming-normal embeddings, std √(2/d), plus positions / √d), "xavier" (Glorot-initialised
  embeddings, no scaling) — 003 App. D, as its official code initialises them (`benchbuild.zoo.initialisation`).
- `universal`: one encoder layer and one decoder layer, applied `encoder_layers` / `decoder_layers` times (003 §2.2);
  positions enter only before the first layer, as in every variant here.
- `encoder_self_attention_gate` / `decoder_self_attention_gate`: β₀ of the self-attention gate σ(β) (000 Alg. 1);
  None leaves the layer ungated.
- `mixer`: "attention" or "conv" (a depthwise 1-D convolution of kernel 2·span+1 and a pointwise projection in
  place of self-attention, causal in the decoder; 000 §3).
- `fuse_attention`: FUSION's fuse-attention (004 §2.2) between the attention and feed-forward sub-layers of every
  layer: position i of layer l attends over that position's outputs of the l layers below (embedding included).
- `pre_norm`: layer norm before each sub-layer (fairseq's `normalize_before`) instead of after it.
- `tie_output`: True (the output layer's weight is the decoder's embedding table, fairseq
  `--share-decoder-input-output-embed`) or False (an output projection of its own, d_model → vocabulary without bias:
  fairseq's default, `TransformerDecoder.build_output_projection`, drawn N(0, d^-1/2) under `init = "fairseq"`).
- `init`: "zoo", "fairseq" (as fairseq's Transformer, which 000 trained) or "003" (as 003's official code):
  `benchbuild.zoo.initialisation`.
- `attention_bias`: biases on the query, key, value and output projections of every attention (True: fairseq's and
  PyTorch's; False: 003's code, layers/transformer/multi_head_attention.py, `bias=False`).
- `output_bias`: a learned bias per output word, zero at the start, added to the logits (003's code:
  layers/tied_embedding.py L12, L15); False: the logits are the output layer's product alone (fairseq's).
- `t5_bias_init` ("zeros", or "normal": N(0, 1), issue #43's experiment 1), `head_width` ("split", or "model": each
  self-attention head d_model wide) and `attention_sublayer` ("transformer", or "prototype": residual and norm inside
  self-attention): the non-defaults are 000's 2020 prototype's form (`benchbuild.zoo.transformer_layers.Attention`).

Dropout: `dropout` on sub-layer outputs, `input_dropout` (default: `dropout`) on the embeddings entering each stack,
`attention_dropout` on attention weights, `activation_dropout` (default: `dropout`) inside the feed-forward block.
003's official relative variants have no input dropout (their identity positional encoding replaces the absolute
one, whose module applies the dropout).

Grouped training (every switch; `TransformerForSeq2Seq.grouped_logits`): a batch cut into length groups runs as one
forward pass, laid out by `benchbuild.zoo.attention.layouts`; the logits equal each group's own forward pass.
Attention goes through `benchbuild.zoo.attention.attend`, whose backend depends on the device and these switches.

Incremental decoding (every switch; `use_cache=True` by default): `generate()` hands the decoder a `transformers`
`EncoderDecoderCache`, of which each depth keeps a slot (`benchbuild.zoo.attention.memory.CacheSlot`); each step
then feeds only the new token, whose position is the cache's length.

The sub-layers (attention, convolution, gate, feed-forward) live in `benchbuild.zoo.transformer_layers`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

from benchbuild.errors import BenchbuildError
from benchbuild.zoo.attention import Backend, choose_backend, packed
from benchbuild.zoo.attention.layouts import Groups, GroupedBatch, Packed
from benchbuild.zoo.attention.memory import CacheSlot, Memory, decoding_cache
from benchbuild.zoo.dropout import Dropout
from benchbuild.zoo.initialisation import INITS, init_module, with_003_draw, with_role
from benchbuild.zoo.layer_norm import LayerNorm
from benchbuild.zoo.positions import DISTANCE_POSITIONS, POSITIONS, T5_BIAS_INITS, TokenEmbedding
from benchbuild.zoo.seq2seq import ZooConfig, ZooSeq2SeqModel, check_choice
from benchbuild.zoo.transformer_layers import Attention, Convolution, FeedForward, SelfAttentionGate

EMBEDDING_SCALES = ("teu", "none", "ped", "xavier")
MIXERS, HEAD_WIDTHS, ATTENTION_SUBLAYERS = ("attention", "conv"), ("split", "model"), ("transformer", "prototype")

class TransformerConfig(ZooConfig):
    """Sizes and switches of the zoo's Transformer; defaults are 003's SCAN model (Table 4)."""

    model_type = "benchbuild_transformer"
    kind = "transformer"
    caches_decoder_states = True

    def __init__(self, d_model: int = 128, num_heads: int = 8, d_ff: int = 256, encoder_layers: int = 3,
                 decoder_layers: int = 3, dropout: float = 0.1, attention_dropout: float = 0.1,
                 activation_dropout: float | None = None, input_dropout: float | None = None,
                 position: str = "absolute", embedding_scale: str = "teu", universal: bool = False,
                 encoder_self_attention_gate: float | None = None, decoder_self_attention_gate: float | None = None,
                 mixer: str = "attention", span: int = 4, fuse_attention: bool = False, pre_norm: bool = False,
                 max_relative_position: int = 16, init: str = "zoo", tie_output: bool = True, head_width: str = "split",
                 encoder_d_model: int | None = None, encoder_num_heads: int | None = None,
                 encoder_d_ff: int | None = None, t5_bias_init: str = "zeros", attention_bias: bool = True,
                 output_bias: bool = False, attention_sublayer: str = "transformer", **kwargs):
        check_choice("transformer", "position", position, POSITIONS)
        check_choice("transformer", "init", init, INITS)
        check_self_attention_form(t5_bias_init, head_width, attention_sublayer, position, mixer)
        if init == "fairseq" and embedding_scale != "teu":
            raise BenchbuildError(f"transformer: init = 'fairseq' needs embedding_scale = 'teu' (fairseq scales its "
                                  f"embeddings by √d), not {embedding_scale!r}")
        if max_relative_position < 1:
            raise BenchbuildError(f"transformer: max_relative_position = {max_relative_position} must be at least 1")
        check_choice("transformer", "embedding_scale", embedding_scale, EMBEDDING_SCALES)
        check_choice("transformer", "mixer", mixer, MIXERS)
        if mixer == "conv" and position in DISTANCE_POSITIONS:
            raise BenchbuildError(f"transformer: position = {position!r} acts on self-attention, which mixer = 'conv' "
                                  "replaces; use position = 'absolute' or 'none' with the convolution")
        self.d_model, self.num_heads, self.d_ff = d_model, num_heads, d_ff
        self.encoder_d_model, self.encoder_num_heads, self.encoder_d_ff = encoder_d_model, encoder_num_heads, encoder_d_ff
        for prefix, (width, heads, _) in (("", self.sizes(decoder=True)), ("encoder_", self.sizes(decoder=False))):
            if width % heads:
                raise BenchbuildError(f"transformer: {prefix}d_model = {width} is not divisible by "
                                      f"{prefix}num_heads = {heads}")
        self.encoder_layers, self.decoder_layers = encoder_layers, decoder_layers
        self.num_hidden_layers = decoder_layers
        self.dropout, self.attention_dropout = dropout, attention_dropout
        self.activation_dropout = dropout if activation_dropout is None else activation_dropout
        self.input_dropout = dropout if input_dropout is None else input_dropout
        self.position, self.embedding_scale, self.universal = position, embedding_scale, universal
        self.encoder_self_attention_gate = encoder_self_attention_gate
        self.decoder_self_attention_gate = decoder_self_attention_gate
        self.mixer, self.span, self.fuse_attention, self.pre_norm = mixer, span, fuse_attention, pre_norm
        self.max_relative_position, self.head_width = max_relative_position, head_width
        self.t5_bias_init, self.attention_sublayer = t5_bias_init, attention_sublayer
        for key, value in (("attention_bias", attention_bias), ("output_bias", output_bias)):
            if not isinstance(value, bool):
                raise BenchbuildError(f"transformer: {key} = {value!r} must be true or false")
        self.attention_bias, self.output_bias = attention_bias, output_bias
        self.init = init
        if not isinstance(tie_output, bool):
            raise BenchbuildError(f"transformer: tie_output = {tie_output!r} must be true or false")
        self.tie_output = tie_output
        super().__init__(**kwargs)

    def sizes(self, decoder: bool) -> tuple[int, int, int]:
        """(width, heads, feed-forward size) of the decoder (`d_model`, `num_heads`, `d_ff`) or of the encoder (its
        `encoder_*` keys where set, else the decoder's): 000 App. A.1 varies "the Encoder and Decoder parameters
        independently", as fairseq's `--encoder-embed-dim` / `--decoder-embed-dim` allow. Cross-attention reads the
        encoder's width as its key and value size; the output layer is the decoder's width."""
        if decoder:
            return self.d_model, self.num_heads, self.d_ff
        return tuple(own if own is not None else shared for own, shared in (
            (self.encoder_d_model, self.d_model), (self.encoder_num_heads, self.num_heads),
            (self.encoder_d_ff, self.d_ff)))


class TransformerForSeq2Seq(ZooSeq2SeqModel):
    """The zoo's Transformer: shared embeddings, tied output layer (unless `tie_output` is off), switches from
    `TransformerConfig`.

    `embedding` embeds decoder inputs and is the output layer's weight (`output_projection`, of its own, when the
    config unties them); it embeds the sources too, unless the config
    has separate dictionaries (`source_vocab_size`): then `source_embedding`, of the source vocabulary, does (fairseq
    `--share-decoder-input-output-embed` without `--share-all-embeddings`, as mswellhao/Dangle run_react.sh and
    yafuly/CoGnition scripts/train.sh train). Both combine words with positions alike (`TokenEmbedding`).
    """

    config_class = TransformerConfig
    accepts_length_groups = True

    def __init__(self, config: TransformerConfig):
        super().__init__(config)
        encoder_width = config.sizes(decoder=False)[0]
        if config.source_vocab_size is None and encoder_width != config.d_model:
            raise BenchbuildError(f"transformer: encoder_d_model = {encoder_width} and d_model = {config.d_model} "
                                  "differ, but encoder and decoder share one embedding table (one dictionary): "
                                  "train with --set dictionaries=separate")
        self.embedding = TokenEmbedding(config)
        self.source_embedding = (TokenEmbedding(config, config.source_vocab_size, encoder_width)
                                 if config.source_vocab_size is not None else None)
        self.embedding_dropout = Dropout(config.input_dropout)
        self.encoder_stack = Stack(config, decoder=False)
        self.decoder_stack = Stack(config, decoder=True)
        self.output_projection = output_projection(config)
        self.output_bias = (nn.Parameter(torch.zeros(config.vocab_size)) if getattr(config, "output_bias", False)
                            else None)
        self.post_init()

    @property
    def output_weight(self) -> torch.Tensor:
        """The output layer's weight (vocabulary × d_model): the decoder's embedding table, or the untied projection."""
        return self.embedding.weight if self.output_projection is None else self.output_projection.weight

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        if module is self and self.output_bias is not None:
            init.zeros_(self.output_bias)
        elif not init_module(module, getattr(self.config, "init", "zoo")) and isinstance(
                module, (TokenEmbedding, Attention, SelfAttentionGate)):
            module.reset_parameters()

    def get_input_embeddings(self) -> nn.Module:
        return self.embedding

    def encode(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor) -> BaseModelOutput:
        hidden = self.encoder_stack(self.embedding_dropout(self._source_words(input_ids)), attention_mask)
        return BaseModelOutput(last_hidden_state=hidden)

    def _source_words(self, ids: torch.LongTensor, layout: Groups | Packed | None = None) -> torch.Tensor:
        """Embeddings of source ids: by `source_embedding` with separate dictionaries, else the shared one."""
        embedding = self.embedding if self.source_embedding is None else self.source_embedding
        return embedding(ids, layout=layout)

    def decode(self, decoder_input_ids: torch.LongTensor, memory: torch.Tensor, memory_mask: torch.Tensor,
               memory_values: torch.Tensor | None = None, cache: EncoderDecoderCache | None = None) -> torch.Tensor:
        """Logits (B, T, vocab) for every prefix of `decoder_input_ids`; keys and values may come from two encodings.

        With a `cache`, `decoder_input_ids` continue the positions it holds and the logits are theirs only.
        """
        start = cache.get_seq_length() if cache is not None else 0
        hidden = self.decoder_stack(self.embedding_dropout(self.embedding(decoder_input_ids, start)), None,
                                    cache=cache, memory=Memory(memory, memory_mask, memory_values))
        return F.linear(hidden, self.output_weight, self.output_bias)

    def grouped_logits(self, length_groups: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        """Teacher-forced logits of the real target positions of a batch given as length groups, each a dict of its
        rows' `input_ids`, `attention_mask`, `decoder_input_ids` and (optional, default all ones)
        `decoder_attention_mask`, right-padded to the group's own longest row: (real target positions, vocab),
        group after group, row-major within a group — the order of the groups' labels other than -100. The same
        function as `forward` on each group, in one pass (`benchbuild.zoo.attention.layouts`).
        """
        batch = GroupedBatch.lay_out(length_groups, self.config.pad_token_id, packed=self._packs(length_groups))
        memory = self.encoder_stack(self.embedding_dropout(self._source_words(batch.source_ids, batch.sources)),
                                    None, layout=batch.sources)
        hidden = self.decoder_stack(self.embedding_dropout(self.embedding(batch.target_ids, layout=batch.targets)),
                                    None, memory=Memory(memory, layout=batch.memory), layout=batch.targets)
        if batch.real_targets is not None:
            hidden = hidden[batch.real_targets]
        return F.linear(hidden, self.output_weight, self.output_bias)

    def _packs(self, length_groups: list[dict[str, torch.Tensor]]) -> bool:
        """Whether every attention of this model runs in the packed kernel for this batch (no convolution, no
        distance terms)."""
        config, weight = self.config, self.embedding.weight
        sides = [config.sizes(decoder) for decoder in (False, True)]
        if config.mixer != "attention" or any(choose_backend(
                weight.device, weight.dtype, head_dim=head_dim, packable=True,
                distance_terms=config.position in DISTANCE_POSITIONS) is not Backend.PACKED
                for head_dim in head_dims(config)):
            return False
        tokens = sum(group["decoder_input_ids"].numel() + group["input_ids"].numel() for group in length_groups)
        longest = max(max(group["decoder_input_ids"].size(1), group["input_ids"].size(1)) for group in length_groups)
        return all(packed.fits(tokens, heads, longest) for _, heads, _ in sides)

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                decoder_input_ids: torch.LongTensor | None = None, labels: torch.LongTensor | None = None,
                encoder_outputs=None, past_key_values: Cache | None = None, use_cache: bool | None = None,
                length_groups: list[dict[str, torch.Tensor]] | None = None, cache: Cache | None = None,
                **kwargs) -> Seq2SeqLMOutput:
        """The usual seq2seq forward; given `length_groups` instead (training), the logits of `grouped_logits`.
        The decoding cache comes as `past_key_values` or (transformers >= 5.24's name) `cache`."""
        if length_groups is not None:
            return Seq2SeqLMOutput(logits=self.grouped_logits(length_groups))
        decoder_input_ids, attention_mask, encoder_outputs = self.seq2seq_inputs(
            input_ids, attention_mask, decoder_input_ids, labels, encoder_outputs)
        cache = decoding_cache(cache if cache is not None else past_key_values, use_cache, self.config)
        logits = self.decode(decoder_input_ids, encoder_outputs.last_hidden_state, attention_mask, cache=cache)
        return self.seq2seq_output(logits, labels, encoder_outputs, past_key_values=cache)


class Stack(nn.Module):
    """`count` layers (or one layer applied `count` times when universal), with a final norm when pre-norm."""

    def __init__(self, config: TransformerConfig, decoder: bool, count: int | None = None, final_norm: bool = True):
        super().__init__()
        self.count = count if count is not None else config.decoder_layers if decoder else config.encoder_layers
        self.universal = config.universal
        self.layers = nn.ModuleList(Layer(config, decoder) for _ in range(1 if config.universal else self.count))
        self.final_norm = LayerNorm(config.sizes(decoder)[0]) if config.pre_norm and final_norm else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, cache: EncoderDecoderCache | None = None,
                memory: Memory | None = None, layout: Groups | Packed | None = None) -> torch.Tensor:
        outputs = [x]
        for depth in range(self.count):
            layer = self.layers[0 if self.universal else depth]
            slot = CacheSlot(cache, depth) if cache is not None else None
            x = layer(x, mask, outputs, memory=memory, cache=slot, layout=layout)
            outputs.append(x)
        return self.final_norm(x) if self.final_norm is not None else x


class Layer(nn.Module):
    """An encoder layer, or a decoder layer (causal mixer, cross-attention), with the configured switches."""

    def __init__(self, config: TransformerConfig, decoder: bool):
        super().__init__()
        d, heads, d_ff = config.sizes(decoder)
        bias = getattr(config, "attention_bias", True)
        self.pre_norm = config.pre_norm
        self.decoder = decoder
        if config.mixer == "conv":
            self.mixer = Convolution(d, config.span, causal=decoder)
        else:
            self.mixer = Attention(d, heads, config.attention_dropout, config.position, config.span, causal=decoder,
                                   max_relative_position=config.max_relative_position, bias=bias,
                                   **self_attention_form(config))
        beta0 = config.decoder_self_attention_gate if decoder else config.encoder_self_attention_gate
        self.gate = SelfAttentionGate(beta0) if beta0 is not None else None
        self.mixer_norm = LayerNorm(d)
        if decoder:
            self.cross_attention = Attention(d, heads, config.attention_dropout,
                                             key_dim=config.sizes(decoder=False)[0], bias=bias)
            self.cross_norm = LayerNorm(d)
        if config.fuse_attention:
            self.fuse_attention = Attention(d, heads, config.attention_dropout, bias=bias)
            self.fuse_norm = LayerNorm(d)
        self.feed_forward = FeedForward(d, d_ff, config.activation_dropout)
        self.feed_forward_norm = LayerNorm(d)
        self.dropout = Dropout(config.dropout)

    def _sublayer(self, x: torch.Tensor, norm: nn.LayerNorm, compute) -> torch.Tensor:
        if self.pre_norm:
            return self.dropout.add_to(x, compute(norm(x)))
        return norm(self.dropout.add_to(x, compute(x)))

    def _mix(self, x: torch.Tensor, mask: torch.Tensor | None, cache: CacheSlot | None = None,
             layout: Groups | Packed | None = None) -> torch.Tensor:
        mixed = self.mixer(x, mask, cache=cache, layout=layout)
        return self.gate(mixed) if self.gate is not None else mixed

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, below: list[torch.Tensor],
                memory: Memory | None = None, cache: CacheSlot | None = None,
                layout: Groups | Packed | None = None) -> torch.Tensor:
        """`mask` (encoder): the real positions of `x`; `below`: the outputs of the layers below (for
        fuse-attention); `memory` (decoder): what cross-attention reads; `cache` (decoding): this application's
        slot; `layout` (grouped training): how `x`, a flat tensor, is laid out."""
        x = self._sublayer(x, self.mixer_norm, lambda h: self._mix(h, None if self.decoder else mask, cache, layout))
        if self.decoder:
            x = self._sublayer(x, self.cross_norm, lambda h: self.cross_attention(h, memory=memory, cache=cache,
                                                                                   layout=layout))
        if hasattr(self, "fuse_attention"):
            x = self._sublayer(x, self.fuse_norm, lambda h: self._fuse(h, below))
        return self._sublayer(x, self.feed_forward_norm, self.feed_forward)

    def _fuse(self, x: torch.Tensor, below: list[torch.Tensor]) -> torch.Tensor:
        """Each position attends over its own representations in the layers below (004 Eq. 9-10)."""
        d = x.size(-1)
        stacked = torch.stack(below, dim=-2).reshape(-1, len(below), d)
        return self.fuse_attention(x.reshape(-1, 1, d), memory=Memory(stacked)).reshape(x.shape)


def output_projection(config: TransformerConfig) -> nn.Linear | None:
    """The untied output layer (`tie_output = False`): d_model → vocabulary, no bias (fairseq
    `TransformerDecoder.build_output_projection` without `--share-decoder-input-output-embed`); None when tied."""
    if config.tie_output:
        return None
    return with_003_draw(with_role(nn.Linear(config.d_model, config.vocab_size, bias=False), "output_embedding"),
                         "xavier")


def check_self_attention_form(t5_bias_init: str, head_width: str, attention_sublayer: str, position: str,
                              mixer: str) -> None:
    """Refuse a value of the keys that give self-attention the prototype's form (`self_attention_form`) that is not
    one of theirs, or that the position or mixer leaves without meaning."""
    check_choice("transformer", "t5_bias_init", t5_bias_init, T5_BIAS_INITS)
    check_choice("transformer", "head_width", head_width, HEAD_WIDTHS)
    check_choice("transformer", "attention_sublayer", attention_sublayer, ATTENTION_SUBLAYERS)
    if head_width == "model" and position == "relative":
        raise BenchbuildError("transformer: head_width = 'model' needs another position than 'relative' (003's "
                              "position key projection is d_model wide, split among the heads)")
    for key, value, default in (("head_width", head_width, "split"),
                                ("attention_sublayer", attention_sublayer, "transformer")):
        if mixer == "conv" and value != default:
            raise BenchbuildError(f"transformer: {key} = {value!r} acts on self-attention, which mixer = 'conv' "
                                  "replaces")


def self_attention_form(config: TransformerConfig) -> dict:
    """`Attention`'s keyword arguments for the form of self-attention: the T5 bias's initial draw, the head width and
    the sub-layer (a config saved before a key existed reads its default).

    The non-defaults are the form of 000's July-2020 prototype (robertodessi/fairseq, branch dev,
    fairseq/models/ctronn_attention.py L55-113 (MultiheadRelativeAttention)): its T5 table keeps `nn.Embedding(2s + 1,
    heads)`'s N(0, 1) draw (its L30), each head is d_model wide (its L69-74) and the attention returns LayerNorm(x +
    dropout(fc(heads))) with `attention_dropout` on that output, not on the weights (its L82 and L111-112). The layer
    adds its own residual and norm around it, as the prototype's `CtronnEncoderLayer.forward` and
    `CtronnDecoderLayer.forward` do; cross-attention keeps split heads and the Transformer's sub-layer (fairseq's
    `MultiheadAttention` there)."""
    return dict(bias_init=getattr(config, "t5_bias_init", "zeros"), head_width=getattr(config, "head_width", "split"),
                sublayer=getattr(config, "attention_sublayer", "transformer"))


def head_dims(config: TransformerConfig) -> list[int]:
    """The head sizes of the model's attentions: per side, self-attention's (d_model under `head_width = "model"`)
    and cross-attention's (d_model / num_heads)."""
    dims = []
    for decoder in (False, True):
        width, heads, _ = config.sizes(decoder)
        dims += [width if getattr(config, "head_width", "split") == "model" else width // heads, width // heads]
    return dims
