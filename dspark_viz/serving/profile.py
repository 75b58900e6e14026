"""The SPS profiles under their earlier name: the cost model is ``dspark_viz.cost``, the per-target lookup
``dspark_viz.model.profile``."""
from __future__ import annotations

from ..cost import CUDA_GRAPH_BUCKETS, PROFILE_DIR, PROFILE_NAMES, SPSProfile, gpu_like, jagged, named_profile
from ..model.profile import cpu_profile_file, profile_for

__all__ = ["CUDA_GRAPH_BUCKETS", "PROFILE_DIR", "PROFILE_NAMES", "SPSProfile", "cpu_profile_file", "gpu_like",
           "jagged", "named_profile", "profile_for"]
