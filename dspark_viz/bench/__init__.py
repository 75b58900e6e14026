"""Decode speed side by side: transformers' ``generate`` and prompt lookup against our decoding methods.

Legend: γ block size, ℓ verification length, τ mean committed tokens per round, T temperature.

``methods`` (the registry: what is timed), ``runner`` (prompts, the interleaved run, ``BenchReport``),
``machine`` (what it ran on), ``report`` (the text table and the Markdown page). The command is
``dspark-viz bench`` (dspark_viz/cli/bench.py).
"""
