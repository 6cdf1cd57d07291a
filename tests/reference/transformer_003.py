"""003's own code (RobertCsordas/transformer_generalization @ 38f2734, imported as it is from
`<shared>/reference/transformer_generalization/`) beside the zoo's Transformers: their packages imported without
touching ours, their SCAN models built by their own `TransformerMixin.create_model` under their own `trafo_scan`
profile (main.py), and a converter from our parameters to theirs.

Their code imports tensorboard (framework/visualize/tensorboard.py), which this venv lacks and nothing here uses: a
stand-in `torch.utils.tensorboard` with a dummy `SummaryWriter` is put into sys.modules while their packages load,
and taken out again after.

Their model reads two vocabularies (framework/data_structures/vocabulary.py WordVocabulary: sorted words) and adds
three rows of its own: the encoder's <eos> (n_in) and <sos> (n_in + 1), and the decoder's one <sos>/<eos> row (n_out,
models/transformer_enc_dec.py). Ours reads one shared vocabulary and one embedding table (under the SCAN recipes),
or a source and a target dictionary with a table each (`dictionaries = "separate"`). The converter maps each of
their rows to ours of the same token, their encoder <eos> and the decoder's <sos>/<eos> to our `</s>`, their
encoder <sos> to our `<s>`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import torch
from reference_code import default_dtype

from benchbuild.zoo import build_model, load_entry
from benchbuild.zoo.catalogue import resolved_architecture

PACKAGES = ("framework", "layers", "models", "interfaces", "tasks", "dataset", "optimizer")

# our catalogue entry -> their `transformer.variant` (tasks/transformer_mixin.py) and our architecture overrides that
# make our model theirs: `transformer` keeps attention biases and no output bias under its scan recipe (its
# [fidelity.scan] says so); with 003's three keys it is their "opennmt" variant (TEU, Xavier embeddings).
VARIANTS = {
    "transformer_noscale": ("noscale", {}),
    "transformer_ped": ("scaledinit", {}),
    "universal_transformer": ("universal_scaledinit", {}),
    "relative_transformer": ("relative", {}),
    "relative_universal_transformer": ("relative_universal", {}),
    "transformer": ("opennmt", {"init": "003", "attention_bias": False, "output_bias": True}),
}

NO_DROPOUT = {"dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0, "input_dropout": 0.0}


def _tensorboard_stand_in() -> dict[str, types.ModuleType]:
    class SummaryWriter:  # never instantiated here
        pass

    board = types.ModuleType("torch.utils.tensorboard")
    writer = types.ModuleType("torch.utils.tensorboard.writer")
    board.SummaryWriter = writer.SummaryWriter = SummaryWriter
    board.writer = writer
    return {"torch.utils.tensorboard": board, "torch.utils.tensorboard.writer": writer}


def import_official(folder: Path) -> SimpleNamespace:
    """Their `main`, `tasks`, `models`, `layers`, `framework` and `interfaces`, imported with `folder` first on
    sys.path; afterwards sys.modules holds none of their top-level names (what was there before comes back), so
    nothing else that imports a `models` or `layers` finds theirs."""
    names = lambda: [name for name in sys.modules if name.split(".")[0] in PACKAGES]  # noqa: E731
    saved = {name: sys.modules.pop(name) for name in names()}
    stand_in = _tensorboard_stand_in()
    replaced = {name: sys.modules.get(name) for name in stand_in}
    sys.modules.update(stand_in)
    sys.path.insert(0, str(folder))
    try:
        spec = importlib.util.spec_from_file_location("reference_003_main", folder / "main.py")
        main = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(main)
        import framework
        import interfaces
        import layers
        import models
        import models.encoder_decoder
        import tasks
        official = SimpleNamespace(main=main, framework=framework, interfaces=interfaces, layers=layers,
                                   models=models, tasks=tasks, add_eos=models.encoder_decoder.add_eos)
    finally:
        sys.path.remove(str(folder))
        for name in names():
            del sys.modules[name]
        sys.modules.update(saved)
        for name, module in replaced.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return official


def official_args(official: SimpleNamespace, variant: str):
    """main.py's arguments under `-profile trafo_scan -transformer.variant VARIANT`, parsed by their own parser."""
    parser = official.framework.helpers.ArgumentParser()
    official.main.register_args(parser)
    parser.parser.parse_args = functools.partial(parser.parser.parse_args,
                                                 ["-profile", "trafo_scan", "-transformer.variant", variant])
    return parser.parse()


def official_vocabularies(official: SimpleNamespace, lines: list[str]):
    """Their in and out WordVocabulary over SCAN lines (dataset/text/text_dataset.py builds them so)."""
    pairs = [split_line(line) for line in lines]
    vocabulary = official.framework.data_structures.WordVocabulary
    return vocabulary([source for source, _ in pairs]), vocabulary([target for _, target in pairs])


def official_model(official: SimpleNamespace, variant: str, in_vocabulary, out_vocabulary,
                   dropout: bool = False, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """Their SCAN model as their `TransformerMixin.create_model` builds it (drawn from the current torch seed), in
    `dtype`; with `dropout` False every Dropout module's p is set to 0 (create_model passes no dropout: the layers'
    0.1 applies). Built under `dtype` as the default, so that their positional tables (sinusoids times 1/√d under
    PED, framework/layers/positional_encoding.py) are computed in it, not rounded to float32 first."""
    task = SimpleNamespace(helper=SimpleNamespace(args=official_args(official, variant)),
                           train_set=SimpleNamespace(in_vocabulary=in_vocabulary, out_vocabulary=out_vocabulary))
    with default_dtype(dtype):
        model = official.tasks.transformer_mixin.TransformerMixin.create_model(task).to(dtype)
    if not dropout:
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
    return model


def split_line(line: str) -> tuple[str, str]:
    source, target = line[len("IN: "):].split(" OUT: ")
    return source.strip(), target.strip()


def ours(name: str, tokenizer, overrides: dict | None = None):
    """Our `name` under 003's scan recipe (with VARIANTS' overrides), over `tokenizer`'s shared vocabulary."""
    entry = load_entry(name)
    architecture = {**resolved_architecture(entry, "scan"), **VARIANTS[name][1], **(overrides or {})}
    return build_model(dataclasses.replace(entry, architecture=architecture), vocab_size=len(tokenizer),
                       pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                       eos_token_id=tokenizer.eos_token_id)


@dataclasses.dataclass
class RowMaps:
    """For each of their rows, the row of ours: `source` for their input embedding (n_in + 2 rows), `target` for
    their output embedding and output layer (n_out + 1 rows)."""

    source: torch.Tensor
    target: torch.Tensor

    @classmethod
    def of(cls, source_tokenizer, target_tokenizer, in_vocabulary, out_vocabulary) -> "RowMaps":
        """Rows of our source and target dictionaries (the same tokenizer twice for our one vocabulary)."""
        source = [source_tokenizer.convert_tokens_to_ids(in_vocabulary.inv_words[index])
                  for index in range(len(in_vocabulary))]
        target = [target_tokenizer.convert_tokens_to_ids(out_vocabulary.inv_words[index])
                  for index in range(len(out_vocabulary))]
        assert source_tokenizer.unk_token_id not in source and target_tokenizer.unk_token_id not in target
        return cls(torch.tensor(source + [source_tokenizer.eos_token_id, source_tokenizer.bos_token_id]),
                   torch.tensor(target + [target_tokenizer.eos_token_id]))


def interleave_key_value(key: torch.Tensor, value: torch.Tensor, heads: int) -> torch.Tensor:
    """Their data_to_kv weight from our key and value weights: its output channels run head by head, each head's
    keys then its values (multi_head_attention.py transform_data: view(..., n_heads, 2, projection_size))."""
    d = key.size(1)
    return torch.stack([key.view(heads, -1, d), value.view(heads, -1, d)], dim=1).reshape(-1, d)


def sine_sign(d_model: int) -> torch.Tensor:
    """-1 at the sine channels (even) of a sinusoid, +1 at the cosine ones (odd): P_{-n} = P_n * sine_sign.

    Their relative attention reads the sinusoid of j - i for query i and key j (multi_head_relative_pos_attention.py
    `_shift` over positions -(L - 1) .. L - 1), ours of i - j (003 App. C, Transformer-XL's R_{i-j}). sin is odd and cos
    even, so W P_{j-i} = (W diag(sine_sign)) P_{i-j}: their pos_to_pq is our position key with its sine columns
    negated, the same function and (U(±1/√fan_in) being symmetric) the same draw."""
    sign = torch.ones(d_model)
    sign[0::2] = -1.0
    return sign


def attention_state(prefix: str, attention, heads: int, of) -> dict[str, torch.Tensor]:
    state = {f"{prefix}.data_to_q.weight": of(attention.query.weight),
             f"{prefix}.data_to_kv.weight": interleave_key_value(of(attention.key.weight), of(attention.value.weight),
                                                                 heads),
             f"{prefix}.multi_head_merge.weight": of(attention.out.weight)}
    if attention.position == "relative":
        position_key = of(attention.position_key.weight)
        state.update({f"{prefix}.pos_to_pq.weight": position_key * sine_sign(position_key.size(1)).to(position_key),
                      f"{prefix}.global_content_bias": of(attention.content_bias),
                      f"{prefix}.global_pos_bias": of(attention.position_bias)})
    return state


def layer_state(prefix: str, layer, heads: int, decoder: bool, of) -> dict[str, torch.Tensor]:
    first, _, _, second = layer.feed_forward
    norms = ("norm1", layer.mixer_norm), *((("norm2", layer.cross_norm), ("norm3", layer.feed_forward_norm))
                                          if decoder else (("norm2", layer.feed_forward_norm),))
    state = {**attention_state(f"{prefix}.self_attn", layer.mixer, heads, of),
             f"{prefix}.linear1.weight": of(first.weight), f"{prefix}.linear1.bias": of(first.bias),
             f"{prefix}.linear2.weight": of(second.weight), f"{prefix}.linear2.bias": of(second.bias)}
    for name, norm in norms:
        state.update({f"{prefix}.{name}.weight": of(norm.weight), f"{prefix}.{name}.bias": of(norm.bias)})
    if decoder:
        state.update(attention_state(f"{prefix}.multihead_attn", layer.cross_attention, heads, of))
    return state


def official_state_dict(model, maps: RowMaps, of=lambda parameter: parameter) -> dict[str, torch.Tensor]:
    """Our parameters under their names and shapes (their parameters only, no buffers): the converter. `of` reads
    each of our parameters (`lambda p: p.grad`: our gradients under their names; every map here is linear). Their
    input embedding comes from our source embedding where ours has separate dictionaries, else from our one table."""
    config = model.config
    for key, value in (("attention_bias", False), ("output_bias", True), ("tie_output", True),
                       ("pre_norm", False), ("mixer", "attention"), ("fuse_attention", False)):
        assert getattr(config, key) == value, f"their model has no counterpart of {key} = {getattr(config, key)!r}"
    assert config.encoder_self_attention_gate is None and config.decoder_self_attention_gate is None
    heads = config.num_heads
    embedding = of(model.embedding.weight)
    source = embedding if model.source_embedding is None else of(model.source_embedding.weight)
    state = {"input_embedding.weight": source[maps.source], "output_embedding.weight": embedding[maps.target],
             "output_map.bias": of(model.output_bias)[maps.target]}
    for side, stack, decoder in (("encoder", model.encoder_stack, False), ("decoder", model.decoder_stack, True)):
        if config.universal:
            state.update(layer_state(f"trafo.{side}.layer", stack.layers[0], heads, decoder, of))
        else:
            for index, layer in enumerate(stack.layers):
                state.update(layer_state(f"trafo.{side}.layers.{index}", layer, heads, decoder, of))
    return {name: tensor.detach().clone() for name, tensor in state.items()}


def load_into(theirs: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """`state` into their model: exactly their parameters (their buffers: positional tables, kept)."""
    assert set(state) == {name for name, _ in theirs.named_parameters()}
    missing, unexpected = theirs.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) == {name for name, _ in theirs.named_buffers()}
