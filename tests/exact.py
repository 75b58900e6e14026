"""Exact enumeration helper for the tests: it lives in the library now (dspark_viz/exact.py, also used by
notebook 01); this module re-exports it so `from exact import …` keeps working."""
from dspark_viz.exact import *  # noqa: F401,F403
from dspark_viz.exact import draft_branches, exact_output_distribution, target_output_distribution, total_variation  # noqa: F401
