"""Evaluation: what a drafter and a decode method achieve, measured over prompt sets, and what they ran on.

Legend: γ block size, ℓ verification length, τ mean committed tokens per round, T temperature.

- ``full_block``     τ per domain at a fixed ℓ = γ, as the paper's Table 1 (``dspark-viz eval``, ``record``);
- ``speed_methods``  the decode-speed comparison's methods: transformers' ``generate`` and prompt lookup against
                     ours (what is timed);
- ``speed_runner``   prompts, the interleaved run, ``BenchReport`` (``dspark-viz bench``);
- ``speed_report``   the text table and the Markdown page;
- ``machine_info``   what a run ran on: the machine, the versions, the target's fast paths;
- ``dtype_choice``   the CPU dtype this machine decodes fastest at, measured once and kept;
- ``calibration_checks`` the events behind each calibration statistic, the AUROC's standard error, STS's objective
                     per position and temperatures at the grid's ends (notebook 03);
- ``round_timing``   a round's parts timed on this machine: the draft, the verify at each ℓ, a plain step;
- ``speculation_gain`` the paper's Eq. 1 per ℓ: expected committed tokens against a round's time (notebook 07);
- ``reproduces``     which of the paper's effects the recorded data reproduce: one table with intervals and
                     verdicts (``dspark-viz reproduces``, the README, every notebook).
"""
