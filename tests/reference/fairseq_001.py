"""001's fairseq fork (mswellhao/Dangle @ 27223eb, `<shared>/reference/dangle/fairseq`, imported as it is) beside the
zoo's `transformer` (its MT recipes) and `dangle` / `rdangle_shr` / `rdangle_sep`: their package imported with their
own option parser building their models from run_react.sh's flags, their batches made by their own collate, and a
converter from our parameters to theirs.

Their code runs here unchanged but for one stand-in: fairseq/data/indexed_dataset.py reads `np.float` (and its
siblings) when it is imported, aliases NumPy 1.24 removed; they are put on numpy while the package loads and taken
off again after. Nothing compiled of theirs (data_utils_fast, libbleu, libnat) is needed by what the tests call.

Our models are built over their dictionaries' own ids (fairseq's `<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, then the
dictionary's words), so the converter maps rows one to one; what our tokenizer makes of the text is not compared here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from benchbuild.training.batching import EncodedSplit, collate
from benchbuild.zoo import build_model, load_entry
from benchbuild.zoo.catalogue import resolved_architecture

NUMPY_ALIASES = {"float": float, "int": int, "bool": bool, "long": int, "object": object}
NO_DROPOUT = ["--dropout", "0", "--attention-dropout", "0", "--activation-dropout", "0"]
OUR_NO_DROPOUT = {"dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0, "input_dropout": 0.0}

# run_react.sh's flags, key by key, for the three models it trains (their sizes then made tiny by SIZES).
COMMON = ["--source-lang", "de", "--target-lang", "en", "--share-decoder-input-output-embed", "--optimizer", "adam",
          "--adam-betas", "(0.9, 0.98)", "--lr", "5e-4", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "4000",
          "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--clip-norm", "2.0",
          "--weight-decay", "0.0001", "--max-relative-position", "16", "--decoder-normalize-before",
          "--encoder-normalize-before"]
FLAGS = {
    "transformer": ["--arch", "transformer_iwslt_de_en_rel_pos"],
    "dangle": ["--arch", "transformer_rdangle_kv_shared", "--shared-encoder-layers", "0", "--chunk-size", "1"],
    "rdangle_shr": ["--arch", "transformer_rdangle_kv_shared", "--shared-encoder-layers", "0", "--chunk-size", "2"],
    "rdangle_sep": ["--arch", "transformer_rdangle_kv_sep", "--key-enc-scale", "1", "--value-enc-scale", "1",
                    "--chunk-size", "1"],
}
WIDTH, FEED_FORWARD = 32, 64
SIZES = {
    "transformer": (["--encoder-layers", "2", "--decoder-layers", "2"], {"encoder_layers": 2, "decoder_layers": 2}),
    "dangle": (["--dis-encoder-layers", "2", "--encoder-layers", "1", "--decoder-layers", "2"],
               {"adaptive_layers": 2, "source_layers": 1, "decoder_layers": 2}),
    "rdangle_shr": (["--dis-encoder-layers", "2", "--encoder-layers", "1", "--decoder-layers", "2"],
                    {"adaptive_layers": 2, "source_layers": 1, "decoder_layers": 2}),
    "rdangle_sep": (["--encoder-layers", "0", "--dis-encoder-layers", "2", "--kv-encoder-layers", "1",
                     "--decoder-layers", "2"], {"adaptive_layers": 2, "value_layers": 2, "source_layers": 1,
                                                "decoder_layers": 2}),
}
# our entry -> its recipe family for 001's MT runs
RECIPES = {"transformer": "mt_001", "dangle": "mt", "rdangle_shr": "mt", "rdangle_sep": "mt"}


@contextlib.contextmanager
def numpy_aliases():
    """NumPy's removed aliases (`np.float` ...) present within the block, as the NumPy their code was written for."""
    added = [name for name in NUMPY_ALIASES if name not in np.__dict__]
    for name in added:
        setattr(np, name, NUMPY_ALIASES[name])
    try:
        yield
    finally:
        for name in added:
            delattr(np, name)


def import_fairseq(folder: Path) -> SimpleNamespace:
    """Their `fairseq` package (with their models, options, criterions, optimizers and SequenceGenerator), imported
    from `folder` with it first on sys.path; it stays in sys.modules as `fairseq` (nothing of ours has that name)."""
    if "fairseq" in sys.modules:
        assert str(Path(sys.modules["fairseq"].__file__).resolve()).startswith(str(folder.resolve())), \
            "another fairseq is imported"
    sys.path.insert(0, str(folder))
    try:
        with numpy_aliases():
            import fairseq
            import fairseq.criterions.label_smoothed_cross_entropy
            import fairseq.data.language_pair_dataset
            import fairseq.models.transformer
            import fairseq.models.transformer_rdangle_kv_sep
            import fairseq.models.transformer_rdangle_kv_shared
            import fairseq.optim.adam
            import fairseq.sequence_generator
            from fairseq import options, utils
            from fairseq.data import Dictionary
    finally:
        sys.path.remove(str(folder))
    return SimpleNamespace(fairseq=fairseq, options=options, utils=utils, Dictionary=Dictionary,
                           models=fairseq.models, collate=fairseq.data.language_pair_dataset.collate,
                           criterion=fairseq.criterions.label_smoothed_cross_entropy,
                           adam=fairseq.optim.adam, SequenceGenerator=fairseq.sequence_generator.SequenceGenerator)


def official_args(official: SimpleNamespace, name: str, dropout: bool = False, extra: list[str] = ()):
    """fairseq-train's arguments for `name` as run_react.sh passes them (tiny sizes; dropout off unless `dropout`),
    parsed by their own parser and completed by their architecture function."""
    sizes = ["--encoder-embed-dim", str(WIDTH), "--decoder-embed-dim", str(WIDTH), "--encoder-ffn-embed-dim",
             str(FEED_FORWARD), "--decoder-ffn-embed-dim", str(FEED_FORWARD)]
    arguments = ["DATA", *COMMON, *FLAGS[name], *SIZES[name][0], *sizes, *([] if dropout else NO_DROPOUT), *extra]
    return official.options.parse_args_and_arch(official.options.get_training_parser(), arguments)


def official_model(official: SimpleNamespace, args, source_dictionary, target_dictionary,
                   dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    """Their model as fairseq-train builds it (`build_model` of the registered model class; drawn from the current
    torch seed), in `dtype`."""
    model_class = official.models.ARCH_MODEL_REGISTRY[args.arch]
    task = SimpleNamespace(source_dictionary=source_dictionary, target_dictionary=target_dictionary)
    return model_class.build_model(args, task).to(dtype)


def ours(name: str, source_dictionary, target_dictionary, overrides: dict | None = None):
    """Our `name` under 001's MT recipe, tiny, over fairseq's ids: separate dictionaries for `transformer` (its
    recipe's `dictionaries = "separate"`), one for the Dangles (`target_dictionary`, the same object as
    `source_dictionary`)."""
    entry = load_entry(name)
    architecture = {**resolved_architecture(entry, RECIPES[name]), **SIZES[name][1], "d_model": WIDTH,
                    "d_ff": FEED_FORWARD, **(overrides or {})}
    if name == "transformer":
        architecture["source_vocab_size"] = len(source_dictionary)
    else:
        assert source_dictionary is target_dictionary
    return build_model(dataclasses.replace(entry, architecture=architecture), vocab_size=len(target_dictionary),
                       pad_token_id=target_dictionary.pad(), bos_token_id=target_dictionary.bos(),
                       eos_token_id=target_dictionary.eos())


def encoded(dictionary_pair, rows: list[tuple[str, str]]) -> EncodedSplit:
    """`rows` (BPE'd source, target) as fairseq-preprocess encodes them (`Dictionary.encode_line`: words, then
    `</s>`), as lists of ids."""
    source, target = dictionary_pair
    encode = lambda dictionary, line: dictionary.encode_line(line, add_if_not_exist=False).long().tolist()  # noqa: E731
    return EncodedSplit(sources=[encode(source, s) for s, _ in rows], targets=[encode(target, t) for _, t in rows])


def their_batch(official: SimpleNamespace, split: EncodedSplit, dictionary) -> dict:
    """Their training batch of `split` (language_pair_dataset.collate: sources left-padded, targets right-padded,
    prev_output_tokens = `</s>` + target shifted right), back in the rows' own order."""
    samples = [{"id": index, "source": torch.tensor(source), "target": torch.tensor(target)}
               for index, (source, target) in enumerate(zip(split.sources, split.targets))]
    batch = official.collate(samples, dictionary.pad(), dictionary.eos())
    order = torch.argsort(batch["id"])
    net_input = {key: value[order] for key, value in batch["net_input"].items()}
    return {"id": batch["id"][order], "net_input": net_input, "target": batch["target"][order],
            "ntokens": batch["ntokens"], "nsentences": batch["nsentences"]}


def our_batch(split: EncodedSplit, dictionary, start: int | None = None) -> dict[str, torch.Tensor]:
    """Training's `collate` (sources right-padded); the decoder starts from `start` (default `</s>`, theirs)."""
    return collate(split, range(len(split.sources)), dictionary.pad(),
                   dictionary.eos() if start is None else start, "cpu")


def attention_state(prefix: str, attention, of) -> dict[str, torch.Tensor]:
    state = {}
    for theirs, mine in (("q_proj", attention.query), ("k_proj", attention.key), ("v_proj", attention.value),
                         ("out_proj", attention.out)):
        state.update({f"{prefix}.{theirs}.weight": of(mine.weight), f"{prefix}.{theirs}.bias": of(mine.bias)})
    if attention.position == "shaw":
        state[f"{prefix}.distance_embedding_src.weight"] = of(attention.distance_table)
        if attention.segmented:
            state[f"{prefix}.distance_embedding_tgt.weight"] = of(attention.target_distance_table)
            state[f"{prefix}.distance_embedding_st.weight"] = of(attention.boundary_table)
    return state


def norm_state(prefix: str, norm, of) -> dict[str, torch.Tensor]:
    return {f"{prefix}.weight": of(norm.weight), f"{prefix}.bias": of(norm.bias)}


def layer_state(prefix: str, layer, of) -> dict[str, torch.Tensor]:
    """One encoder or decoder layer of ours under fairseq's TransformerEncoderLayer / TransformerDecoderLayer names."""
    first, _, _, second = layer.feed_forward
    state = {**attention_state(f"{prefix}.self_attn", layer.mixer, of),
             **norm_state(f"{prefix}.self_attn_layer_norm", layer.mixer_norm, of),
             **norm_state(f"{prefix}.final_layer_norm", layer.feed_forward_norm, of),
             f"{prefix}.fc1.weight": of(first.weight), f"{prefix}.fc1.bias": of(first.bias),
             f"{prefix}.fc2.weight": of(second.weight), f"{prefix}.fc2.bias": of(second.bias)}
    if layer.decoder:
        state.update(attention_state(f"{prefix}.encoder_attn", layer.cross_attention, of))
        state.update(norm_state(f"{prefix}.encoder_attn_layer_norm", layer.cross_norm, of))
    return state


def stack_state(prefix: str, stack, of) -> dict[str, torch.Tensor]:
    state = {}
    for index, layer in enumerate(stack.layers):
        state.update(layer_state(f"{prefix}.{index}", layer, of))
    return state


def transformer_state(model, of) -> dict[str, torch.Tensor]:
    """Our `transformer` (separate dictionaries, tied output, pre-norm, "shaw" positions) under the names of their
    TransformerModel (models/transformer.py)."""
    config = model.config
    assert config.tie_output and config.pre_norm and config.position == "shaw" and not config.output_bias
    assert model.source_embedding is not None
    return {"encoder.embed_tokens.weight": of(model.source_embedding.weight),
            "decoder.embed_tokens.weight": of(model.embedding.weight),
            "decoder.output_projection.weight": of(model.embedding.weight),
            **stack_state("encoder.layers", model.encoder_stack, of),
            **norm_state("encoder.layer_norm", model.encoder_stack.final_norm, of),
            **stack_state("decoder.layers", model.decoder_stack, of),
            **norm_state("decoder.layer_norm", model.decoder_stack.final_norm, of)}


def dangle_state(model, of) -> dict[str, torch.Tensor]:
    """Our Dangle / R-Dangle (one table, pre-norm) under the names of their transformer_rdangle_kv_shared or
    transformer_rdangle_kv_sep model: their two embedding tables and the output layer all from our one table."""
    config, sides = model.config, model.sides
    assert config.pre_norm and config.type_embeddings and config.end_of_prefix
    state = {"encoder.embed_tokens.weight": of(model.embedding.weight),
             "decoder.embed_tokens.weight": of(model.embedding.weight),
             "decoder.output_projection.weight": of(model.embedding.weight),
             "encoder.src_emb.weight": of(sides.source_type)[None],
             "decoder.tgt_emb.weight": torch.stack([of(sides.target_type), of(sides.end_of_prefix)]),
             **stack_state("decoder.decoder_layers", model.decoder_stack, of),
             **norm_state("decoder.layer_norm", model.decoder_stack.final_norm, of)}
    if config.separate_keys_values:
        for side in ("encoder", "decoder"):
            state.update(stack_state(f"{side}.param_shared_layers", model.source_stack, of))
        state.update({**stack_state("encoder.value_dis_encoder_layers", model.value_stack, of),
                      **stack_state("decoder.key_dis_encoder_layers", model.adaptive_stack, of),
                      **norm_state("encoder.value_layer_norm", model.value_norm, of),
                      **norm_state("decoder.key_layer_norm", model.key_norm, of),
                      "encoder.se_emb.weight": of(sides.end_of_source)[None]})
    else:
        state.update({**stack_state("decoder.dis_encoder_layers", model.adaptive_stack, of),
                      **stack_state("decoder.encoder_layers", model.source_stack, of),
                      **norm_state("decoder.enc_layer_norm", model.key_norm, of)})
    return state


def official_state_dict(model, of=lambda parameter: parameter) -> dict[str, torch.Tensor]:
    """Our parameters under their names (every name of their state dict but buffers, a tied or shared tensor under
    each of its names): the converter. `of` reads each parameter (`lambda p: p.grad` for gradients)."""
    state = dangle_state(model, of) if model.config.kind == "dangle" else transformer_state(model, of)
    return {name: tensor.detach().clone() for name, tensor in state.items()}


def load_into(theirs: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """`state` into their model: exactly the entries of their state dict that are not buffers, with their buffers
    (`version`) kept: fairseq's `upgrade_state_dict_named` drops the final layer norm of a state dict without a
    version of at least 2, which it takes for an old checkpoint's."""
    own = theirs.state_dict()
    buffers = {name for name, _ in theirs.named_buffers()}
    assert set(state) == set(own) - buffers, set(state) ^ (set(own) - buffers)
    theirs.load_state_dict({**state, **{name: own[name] for name in buffers}}, strict=True)
    assert all(getattr(module, "layer_norm", True) is not None for module in (theirs.encoder, theirs.decoder))


def perturbed(model, seed: int = 1, scale: float = 0.3):
    """Every parameter that starts at a constant (layer norms, distance tables) moved off it, so that the converter's
    every row counts."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name or "table" in name:
                parameter.add_(torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype) * scale)
    return model
