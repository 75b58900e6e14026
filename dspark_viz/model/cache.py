"""A KV cache that grows in place: transformers' DynamicCache interface without a per-step copy of the cache.

Legend: b rows, H key/value heads, n cached positions, D head size.

transformers' DynamicCache concatenates each layer's whole cache with the new keys and values at every forward
(a copy that grows with the context, in every layer). Here each layer keeps buffers (b, H, capacity, D) that double
when full; a forward writes its new positions in place and the layer's ``keys`` / ``values`` are views of the first
n positions (heads lie ``capacity`` positions apart, each head's rows contiguous — what the fused decoder layer
reads, csrc/decoder_layer.h). Cropping (a rejected draft) only moves n back; selecting rows (a batch that drops
finished requests) copies once.
"""
from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

MIN_CAPACITY = 64


class GrowingLayer(DynamicLayer):
    """One layer's keys and values in buffers (b, H, capacity, D) that double when full; ``keys`` / ``values``
    are views of the first n positions (what DynamicLayer holds as whole tensors)."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._k = self._v = None
        self._n = 0

    def _views(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.keys, self.values = self._k[..., : self._n, :], self._v[..., : self._n, :]
        return self.keys, self.values

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, q = self._n, key_states.shape[-2]
        if self._k is None or n + q > self._k.shape[-2]:
            cap = max(2 * n, n + q, MIN_CAPACITY)
            k = key_states.new_empty(*key_states.shape[:-2], cap, key_states.shape[-1])      # (b, H, cap, D)
            v = value_states.new_empty(*value_states.shape[:-2], cap, value_states.shape[-1])
            if n:
                k[..., :n, :], v[..., :n, :] = self._k[..., :n, :], self._v[..., :n, :]
            self._k, self._v = k, v
        self._k[..., n:n + q, :] = key_states
        self._v[..., n:n + q, :] = value_states
        self._n = n + q
        return self._views()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self._n:
            self._k, self._v = self._k[indices], self._v[indices]
            self._views()

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        self._n = self.keys.shape[-2] if self.is_initialized and self.keys is not None else 0


class GrowingCache(DynamicCache):
    """A DynamicCache of GrowingLayers: the same interface, no per-step copy of the cache."""

    grows_in_place = True          # fast/stack.py appends to its layers directly

    def __init__(self):
        Cache.__init__(self, layer_class_to_replicate=GrowingLayer)


__all__ = ["GrowingCache", "GrowingLayer"]
