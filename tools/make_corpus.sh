#!/usr/bin/env bash
# Rebuild (or resume) the training corpus of the shipped drafters. Every step is resumable: rerun the
# script after an interruption and it continues where it stopped. Benchmark prompt files are read from
# BENCH_DIR only to keep them out of the corpus (decontamination); nothing of them is stored.
#   tools/make_corpus.sh [BENCH_DIR]        (default BENCH_DIR: ../shared/bench)
# The target writes requests (one process) while it answers the requests filtered so far (another
# process, a few shards at a time); with THREADS=1 each takes one core.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${1:-../shared/bench}
DV=${DV:-.venv/bin/dspark-viz}
THREADS=${THREADS:-1}
PROMPT_BATCHES=${PROMPT_BATCHES:-110}         # × 256 requests; about 80 % survive the filter (≥ 20,000 prompts)
TOKEN_BUDGET=${TOKEN_BUDGET:-2000000}
SUITE=${SUITE:-assets/prompts/magpie.jsonl.gz}
TRAIN=$(dirname "$SUITE")/train.jsonl
STEP_SHARDS=${STEP_SHARDS:-16}
# bf16 where the CPU multiplies it natively (AVX512-BF16 / AMX), else fp32 (bf16 is slower there); each
# answer shard records the dtype it was sampled in
if [ -z "${DTYPE:-}" ]; then
    grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null && DTYPE=bf16 || DTYPE=fp32
fi

filter() {
    $DV corpus filter --raw corpus/prompts-raw --out "$SUITE" \
        --avoid "$(dirname "$SUITE")/eval.jsonl" "$BENCH_DIR"/*.jsonl > /dev/null
}

$DV corpus prompts --raw corpus/prompts-raw --batches "$PROMPT_BATCHES" --batch-size 256 --dtype "$DTYPE" \
    --threads "$THREADS" &
PROMPTS=$!
trap 'kill $PROMPTS 2>/dev/null || true' EXIT

while :; do
    filter
    running=$(kill -0 $PROMPTS 2>/dev/null && echo 1 || echo 0)
    state=$($DV corpus answers --prompts "$TRAIN" "$SUITE" --out corpus/answers --token-budget "$TOKEN_BUDGET" \
        --batch-size 128 --dtype "$DTYPE" --threads "$THREADS" --max-shards "$STEP_SHARDS" |
        python3 -c 'import json,sys; s=json.load(sys.stdin); print(int(s["budget_met"]), s["unanswered"])')
    read -r met left <<< "$state"
    [ "$met" = 1 ] && break
    if [ "$left" = 0 ]; then
        [ "$running" = 0 ] && break
        sleep 60
    fi
done
wait $PROMPTS
filter
$DV corpus stats --out corpus/answers
