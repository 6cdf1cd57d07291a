"""What every zoo model shares with `transformers`: the config defaults, generation hooks, label shifting, token loss."""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.cache_utils import Cache
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

from benchbuild.errors import BenchbuildError

# transformers 5.24 renamed the decoding cache `past_key_values` -> `cache` (generate's keyword, the outputs' field);
# both spellings are read, and outputs are built with the installed version's field (the old one warns there).
CACHE_FIELD = "cache" if "cache" in Seq2SeqLMOutput.__dataclass_fields__ else "past_key_values"


class ZooConfig(PretrainedConfig):
    """A seq2seq config over one shared source/target vocabulary of `vocab_size`, or, with `source_vocab_size`, over
    separate dictionaries: sources of `source_vocab_size` ids, targets (decoder inputs and outputs) of `vocab_size`.

    `source_vocab_size` comes from the run's dictionaries (recipe key `dictionaries`, `training.tokenization`), not
    from a catalogue entry; a model kind that cannot embed its sources on their own refuses it (`ZooSeq2SeqModel`).
    `use_cache` defaults to `caches_decoder_states`, which a model kind sets when its decoder keeps a key/value
    cache for incremental decoding; a kind without one always decodes by recomputing the prefix.
    """

    kind = ""
    caches_decoder_states = False

    def __init__(self, vocab_size: int = 32, pad_token_id: int = 0, bos_token_id: int = 1, eos_token_id: int = 2,
                 decoder_start_token_id: int | None = None, source_vocab_size: int | None = None, **kwargs):
        self.vocab_size = vocab_size
        self.source_vocab_size = source_vocab_size
        kwargs.setdefault("is_encoder_decoder", True)
        use_cache = kwargs.pop("use_cache", None)
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id,
                         decoder_start_token_id=bos_token_id if decoder_start_token_id is None else decoder_start_token_id,
                         **kwargs)
        self.use_cache = self.caches_decoder_states and (use_cache is None or bool(use_cache))

    @classmethod
    def architecture_keys(cls) -> set[str]:
        """The keyword arguments a catalogue entry's `[architecture]` table may set for this kind, and
        `source_vocab_size`, which training passes with the other architecture keys (`training.loop._network`
        refuses it from an entry or `--architecture`)."""
        keys = {"source_vocab_size"}
        for klass in cls.__mro__:
            if klass is ZooConfig:
                break
            if "__init__" in klass.__dict__:
                keys |= {name for name, p in inspect.signature(klass.__init__).parameters.items()
                         if name != "self" and p.kind is p.POSITIONAL_OR_KEYWORD}
        return keys - {"vocab_size", "pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"}


def check_choice(kind: str, name: str, value, choices) -> None:
    """Raise a `BenchbuildError` naming the switch when `value` is not one of `choices`."""
    if value not in choices:
        raise BenchbuildError(f"{kind}: {name} = {value!r} is not one of {', '.join(map(repr, choices))}")


class EncoderView:
    """The encoder half of a zoo model, as `generate()` calls it (not a module: it owns no weights)."""

    def __init__(self, model: "ZooSeq2SeqModel"):
        self.model = model

    def forward(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
                output_attentions: bool | None = None, output_hidden_states: bool | None = None,
                return_dict: bool | None = None, **kwargs) -> BaseModelOutput:
        if attention_mask is None:
            attention_mask = input_ids.ne(self.model.config.pad_token_id).long()
        return self.model.encode(input_ids, attention_mask)

    __call__ = forward


class ZooSeq2SeqModel(PreTrainedModel, GenerationMixin):
    """Base of the zoo's models: `encode()` + `forward()` in subclasses; generation and loss here.

    A model that takes separate dictionaries (`config.source_vocab_size`) builds a `source_embedding` module for its
    encoder; one that builds none embeds source and target ids alike (Dangle embeds [source; target prefix] with one
    embedding) and is refused when its config names a source vocabulary (`post_init`).
    """

    main_input_name = "input_ids"
    base_model_prefix = "zoo"
    supports_gradient_checkpointing = False
    accepts_length_groups = False  # True where `forward(length_groups=...)` trains on a batch's length groups at once

    def post_init(self) -> None:
        if getattr(self.config, "source_vocab_size", None) is not None and \
                getattr(self, "source_embedding", None) is None:
            raise BenchbuildError(f"{self.config.kind}: separate source and target dictionaries (recipe key "
                                  "dictionaries = 'separate') need a model with an encoder embedding of its own, and "
                                  "this one embeds source and target ids with one embedding: train it with --set "
                                  "dictionaries=joint")
        super().post_init()

    def get_encoder(self, modality: str | None = None) -> EncoderView:
        return EncoderView(self)

    def encode(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor) -> BaseModelOutput:
        raise NotImplementedError

    def prepare_inputs_for_generation(self, input_ids: torch.LongTensor, past_key_values: Cache | None = None,
                                      encoder_outputs=None, attention_mask=None, use_cache: bool | None = None,
                                      cache: Cache | None = None, **kwargs) -> dict:
        """The decoder reads only the tokens its cache has not seen yet; a model that never fills the cache (or
        decoding with `use_cache=False`) gets the whole prefix at every step. `generate` passes the cache as `cache`
        from transformers 5.24 on, as `past_key_values` before."""
        past_key_values = cache if cache is not None else past_key_values
        seen = past_key_values.get_seq_length() if past_key_values is not None else 0
        inputs = {"decoder_input_ids": input_ids[:, seen:], "encoder_outputs": encoder_outputs,
                  "attention_mask": attention_mask}
        if past_key_values is not None:
            inputs.update(past_key_values=past_key_values, use_cache=use_cache)
        return inputs

    def prepare_decoder_input_ids_from_labels(self, labels: torch.LongTensor) -> torch.LongTensor:
        """Shift labels one step right behind the start token; ignored (-100) positions become padding."""
        shifted = labels.new_full(labels.shape, self.config.pad_token_id)
        shifted[:, 1:] = labels[:, :-1]
        shifted[:, 0] = self.config.decoder_start_token_id
        return shifted.masked_fill(shifted.eq(-100), self.config.pad_token_id)

    def seq2seq_inputs(self, input_ids, attention_mask, decoder_input_ids, labels, encoder_outputs):
        """(decoder ids, source mask, encoder output) from whatever `forward` was given, per the HF conventions."""
        if decoder_input_ids is None and labels is not None:
            decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        if attention_mask is None and input_ids is not None:
            attention_mask = input_ids.ne(self.config.pad_token_id).long()
        if encoder_outputs is None:
            encoder_outputs = self.encode(input_ids, attention_mask)
        elif isinstance(encoder_outputs, (tuple, list)):
            encoder_outputs = BaseModelOutput(last_hidden_state=encoder_outputs[0])
        if attention_mask is None:
            attention_mask = torch.ones(encoder_outputs.last_hidden_state.shape[:2], dtype=torch.long,
                                        device=encoder_outputs.last_hidden_state.device)
        return decoder_input_ids, attention_mask, encoder_outputs

    def seq2seq_output(self, logits: torch.Tensor, labels: torch.LongTensor | None, encoder_outputs,
                       past_key_values: Cache | None = None) -> Seq2SeqLMOutput:
        return Seq2SeqLMOutput(loss=self.token_loss(logits, labels), logits=logits, **{CACHE_FIELD: past_key_values},
                               encoder_last_hidden_state=encoder_outputs.last_hidden_state)

    @staticmethod
    def token_loss(logits: torch.Tensor, labels: torch.LongTensor | None) -> torch.Tensor | None:
        """Mean cross-entropy over the label positions that are not -100 (label smoothing is the trainer's)."""
        if labels is None:
            return None
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), labels.reshape(-1), ignore_index=-100)
