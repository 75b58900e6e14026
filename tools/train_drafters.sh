#!/usr/bin/env bash
# Rebuild the drafters from the committed corpus: the feature cache, then every drafter of the paper's
# configuration (DSpark-Markov, DSpark-RNN and DFlash-style at depth D, EAGLE-style at one layer) and the
# equal-depth one-layer row (DSpark-Markov and DFlash-style at D = 1), same recipe, data and steps for all.
# Every step is resumable: rerun the script after an interruption and each run continues from its checkpoint.
# Candidates land in $OUT; `python tools/select_drafters.py` compares them with the shipped drafters on the
# selection half of the benchmark prompts and copies only the better ones into assets/drafters/.
#   tools/train_drafters.sh                       (defaults below; override any by environment)
set -euo pipefail
cd "$(dirname "$0")/.."
DV=${DV:-.venv/bin/dspark-viz}
CACHE=${DSPARK_CACHE:-$HOME/.cache/dspark_viz}
DATA=${DATA:-$CACHE/data/train}             # the feature cache (rebuildable, ≈ 7 KB a token)
OUT=${OUT:-$CACHE/candidates}
RUNS=${RUNS:-$CACHE/runs}
DEPTH=${DEPTH:-2}                           # the paper uses 5; D is what the budget allows
STEPS=${STEPS:-6000}
LR=${LR:-2e-3}
DECAY=${DECAY:-4}                           # position weights exp(−(k−1)/DECAY): 4 (DeepSpec's) beat the paper's
                                            # γ in the ablation of docs/training.md
THREADS=${THREADS:-2}
PRECISION=${PRECISION:-auto}                # auto: bf16 autocast where it is faster (timed); pass bf16 / fp32 when
                                            # another job shares the machine and would skew that timing
MAX_SEQS=${MAX_SEQS:-}                      # train on the first N corpus answers only (a fixed data budget)
ONLY=${ONLY:-}                              # e.g. "dspark-L2 dflash-L2": train only these

$DV data --corpus corpus/answers --out "$DATA" --threads "$THREADS" ${MAX_SEQS:+--max-seqs "$MAX_SEQS"}
mkdir -p "$OUT"
for spec in "dspark $DEPTH" "dspark-rnn $DEPTH" "dflash $DEPTH" "eagle 1" "dspark 1" "dflash 1"; do
    read -r algo layers <<< "$spec"
    name="$algo-L$layers"
    if [ -n "$ONLY" ] && [[ " $ONLY " != *" $name "* ]]; then continue; fi
    $DV train --algo "$algo" --n-layers "$layers" --data "$DATA" --run-dir "$RUNS/$name" \
        --out "$OUT/$name.json" --steps "$STEPS" --lr "$LR" --position-decay "$DECAY" --threads "$THREADS" --precision "$PRECISION" ${MAX_SEQS:+--max-seqs "$MAX_SEQS"}
done
