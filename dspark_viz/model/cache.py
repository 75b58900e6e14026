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
    are views of the first n positions (what DynamicLayer holds as whole tensors), made when read. Assigning a
    tensor to them (transformers' own layer methods do) adopts it as the buffer, full."""

    _k: torch.Tensor | None = None
    _v: torch.Tensor | None = None
    _n = 0

    @property
    def keys(self) -> torch.Tensor | None:
        return None if self._k is None else self._k[..., : self._n, :]

    @keys.setter
    def keys(self, t: torch.Tensor | None) -> None:
        self._k, self._n = self._adopt(t)

    @property
    def values(self) -> torch.Tensor | None:
        return None if self._v is None else self._v[..., : self._n, :]

    @values.setter
    def values(self, t: torch.Tensor | None) -> None:
        self._v, self._n = self._adopt(t)

    @staticmethod
    def _adopt(t: torch.Tensor | None) -> tuple[torch.Tensor | None, int]:
        if t is None or t.dim() < 2:                   # None, or lazy_initialization's empty placeholder
            return None, 0
        return t, t.shape[-2]

    def get_seq_length(self) -> int:
        return self._n if self.is_initialized else 0

    def reserve(self, q: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Room for q more positions after the n held (the buffers double, or grow to fit) → the key and value
        buffers (b, H, capacity, D), for a writer that fills positions n … n + q − 1 and then calls ``written``."""
        n = self._n
        if n + q > self._k.shape[-2]:
            cap = max(2 * n, n + q, MIN_CAPACITY)
            k = self._k.new_empty(*self._k.shape[:-2], cap, self._k.shape[-1])      # (b, H, cap, D)
            v = self._v.new_empty(*self._v.shape[:-2], cap, self._v.shape[-1])
            if n:
                k[..., :n, :], v[..., :n, :] = self._k[..., :n, :], self._v[..., :n, :]
            self._k, self._v = k, v
        return self._k, self._v

    def written(self, q: int) -> None:
        """q more positions hold keys and values (written into the buffers ``reserve`` returned)."""
        self._n += q

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, q = self._n, key_states.shape[-2]
        if self._k is None:
            shape = (*key_states.shape[:-2], max(q, MIN_CAPACITY), key_states.shape[-1])
            self._k, self._v = key_states.new_empty(shape), value_states.new_empty(shape[:-1] + value_states.shape[-1:])
        self.reserve(q)
        self._k[..., n:n + q, :] = key_states
        self._v[..., n:n + q, :] = value_states
        self._n = n + q
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self._n:
            self._k, self._v = self._k[indices], self._v[indices]

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes a negative count (tokens to remove), got {tokens_to_remove}")
        if self.is_initialized:
            self._n = max(0, self._n + tokens_to_remove)


class GrowingCache(DynamicCache):
    """A DynamicCache of GrowingLayers: the same interface, no per-step copy of the cache."""

    grows_in_place = True          # fast/stack.py appends to its layers directly

    def __init__(self):
        Cache.__init__(self, layer_class_to_replicate=GrowingLayer)


__all__ = ["GrowingCache", "GrowingLayer"]
