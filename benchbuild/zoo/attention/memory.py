"""What attention reads besides its own sequence: the `Memory` cross-attention attends over, and the decoding cache
(`decoding_cache`) whose `CacheSlot`s keep the keys and values of the positions decoded so far."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PretrainedConfig
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache

from benchbuild.zoo.attention.layouts import Groups, Packed


@dataclass(frozen=True)
class Memory:
    """What a cross-attention reads: `keys` (the encoder output) and `values` (None: the keys; R-Dangle_sep's H^v
    otherwise) with `mask` marking the real keys, or, in grouped training, `layout` saying where they lie."""

    keys: torch.Tensor
    mask: torch.Tensor | None = None
    values: torch.Tensor | None = None
    layout: Groups | Packed | None = None


@dataclass(frozen=True)
class CacheSlot:
    """Slot `depth` of a `transformers` `EncoderDecoderCache`: what depth d of a decoder keeps between decoding steps.

    Its self-attention part holds depth d's keys and values of the positions decoded so far (with a convolution
    mixer: depth d's inputs, of which the convolution reads the last 2·span), its cross-attention part the projection
    of the encoder output, computed at the first step and reused. Universal Transformers index the cache by depth,
    not by (shared) layer. FUSION needs nothing cached: fuse-attention stays within one position.
    """

    cache: EncoderDecoderCache
    depth: int

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The self-attention keys and values of every position so far, the new `keys` / `values` appended."""
        return self.cache.self_attention_cache.update(keys, values, self.depth)

    def memory(self, project) -> tuple[torch.Tensor, torch.Tensor]:
        """The cross-attention keys and values: `project()` at the first step, stored and reused after it."""
        if self.cache.is_updated.get(self.depth, False):
            stored = self.cache.cross_attention_cache.layers[self.depth]
            return stored.keys, stored.values
        keys, values = self.cache.cross_attention_cache.update(*project(), self.depth)
        self.cache.is_updated[self.depth] = True
        return keys, values


def decoding_cache(past_key_values: Cache | None, use_cache: bool | None,
                   config: PretrainedConfig) -> EncoderDecoderCache | None:
    """The cache to decode with: the one given (a bare self-attention cache gains a cross-attention one), a new one
    when `use_cache` asks for it, else none (training never builds one unless asked)."""
    if past_key_values is None:
        if not use_cache:
            return None
        return EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))
    if not isinstance(past_key_values, EncoderDecoderCache):
        return EncoderDecoderCache(past_key_values, DynamicCache(config=config))
    return past_key_values
