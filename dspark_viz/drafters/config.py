"""A drafter's architecture: a frozen dataclass, stored in every drafter card, and the named presets.

Legend: γ block size, d hidden size, r sequential-head rank, V_d draft vocabulary size.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from .. import registry
from ..registry import LiveNames

# Read from the one table of drafter names (dspark_viz.registry): algorithm → the stem of its shipped files
# (assets/drafters/<stem>.json), the algorithms, and each one's architecture preset.
SHIPPED = registry.field_map("stem")
ALGOS = LiveNames(lambda: tuple(SHIPPED))
PRESETS = registry.LiveMap(lambda: {n: dict(registry.DRAFTERS[n].preset) for n in SHIPPED})


@dataclass(frozen=True)
class DrafterConfig:
    algo: str = "dspark"                 # a name of config.ALGOS: dspark | dspark-rnn | dflash | eagle
    gamma: int = 7
    n_layers: int = 1                    # draft layers (EAGLE-style: 1)
    head: str | None = "markov"          # markov | rnn | None
    confidence: bool = True
    rank: int = 64                       # r of W1 (V_d+1 × r) and W2 (r × V_d)
    draft_vocab: int = 8192              # V_d
    feature_layers: tuple[int, ...] = (2, 8, 14, 21, 27)
    hidden_size: int = 576
    n_heads: int = 9
    n_kv_heads: int = 3
    head_dim: int = 64
    d_ff: int = 1536
    rms_eps: float = 1e-5
    rope_theta: float = 100000.0
    init_from_target: bool = True        # copy the target's top layers into the draft layers

    def to_dict(self) -> dict:
        d = asdict(self)
        d["feature_layers"] = list(self.feature_layers)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "DrafterConfig":
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown drafter config fields: {sorted(unknown)}")
        d = dict(d)
        if "feature_layers" in d:
            d["feature_layers"] = tuple(d["feature_layers"])
        return cls(**d)

    @classmethod
    def for_target(cls, target, algo: str = "dspark", **kw) -> "DrafterConfig":
        if algo not in ALGOS:
            raise ValueError(f"unknown algorithm {algo!r}: {', '.join(ALGOS)}")
        c = target.config if hasattr(target, "config") else None
        base = dict(algo=algo, feature_layers=tuple(target.feature_layers), hidden_size=target.hidden_size)
        if c is not None:
            rp = getattr(c, "rope_parameters", None) or {}
            base.update(n_heads=c.num_attention_heads, n_kv_heads=c.num_key_value_heads,
                        head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
                        d_ff=c.intermediate_size, rms_eps=float(c.rms_norm_eps),
                        rope_theta=float(rp.get("rope_theta", getattr(c, "rope_theta", 10000.0))))
        base.update(PRESETS[algo])
        base.update(kw)
        return cls(**base)
