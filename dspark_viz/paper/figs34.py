"""The paper's numbers for Fig. 3 (drafter depth) and Fig. 4 (proposal length and latency), §4.3.2.

Pure data, no imports. "text" is the paper's prose, "printed" a number printed inside a figure (its PDF text);
the figures' curves themselves are not transcribed (only their claims and printed labels are).

Legend: γ drafts per block; the paper's "draft length" in Fig. 4 is γ + 1 (the anchor counted), so its
draft lengths 4, 8, 12, 16 are γ = 3, 7, 11, 15.
"""

# Fig. 3 (text): block size fixed to 7; DSpark at 1, 2 and 5 layers against a 5-layer DFlash, Qwen3-4B.
FIG3_SETUP = {"gamma": 7, "dspark_layers": (1, 2, 5), "dflash_layers": 5, "target": "Qwen3-4B"}
FIG3_CLAIMS = (
    "DSpark's accepted length improves monotonically with depth",
    "the steepest marginal gain is from one to two layers",
    "a 2-layer DSpark outperforms the 5-layer DFlash baseline in every domain",
)

# Fig. 4 (text + printed): depth fixed to 5 layers; draft length γ + 1 ∈ {4, 8, 12, 16}.
FIG4_SETUP = {"layers": 5, "draft_lengths": (4, 8, 12, 16), "gammas": (3, 7, 11, 15), "target": "Qwen3-4B",
              "latency_batch": 128, "latency_contexts": (512, 1024, 2048, 4096)}
# DSpark (Markov) over DFlash, relative gain in accepted length at draft lengths 8, 12, 16 (printed in the figure;
# the 8 and 16 values also in the text: "at γ = 7 … 16 %, 15 %, 18 %; at γ = 15 … 30 %, 26 %, 22 %")
FIG4_GAIN_PRINTED = {
    "math": {8: 0.16, 12: 0.23, 16: 0.30},
    "code": {8: 0.15, 12: 0.21, 16: 0.26},
    "chat": {8: 0.18, 12: 0.21, 16: 0.22},
}
# Full-round latency overhead of DSpark over DFlash at draft lengths 8, 12, 16 (printed); text: "from 4 to 16
# adds a marginal 0.2 % to 1.3 %"
FIG4_LATENCY_OVERHEAD_PRINTED = {8: 0.006, 12: 0.009, 16: 0.013}
FIG4_CLAIMS = (
    "DSpark outperforms DFlash at every proposal length, and the gap widens as γ grows",
    "the RNN head adds only marginal gains over the Markov head, mainly at longer proposals",
    "the sequential head adds 0.2 % to 1.3 % to the full-round latency (batch 128, target-dominated)",
)
