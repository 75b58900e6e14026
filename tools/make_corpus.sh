#!/usr/bin/env bash
# Rebuild (or resume) the training corpus of the shipped drafters. Every step is resumable: rerun the
# script after an interruption and it continues where it stopped. Benchmark prompt files are read from
# BENCH_DIR only to keep them out of the corpus (decontamination); nothing of them is stored.
#   tools/make_corpus.sh [BENCH_DIR]        (default BENCH_DIR: ../shared/bench)
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${1:-../shared/bench}
DV=${DV:-.venv/bin/dspark-viz}
THREADS=${THREADS:-1}
PROMPT_BATCHES=${PROMPT_BATCHES:-140}
TOKEN_BUDGET=${TOKEN_BUDGET:-2000000}
SUITE=${SUITE:-assets/prompts/magpie.jsonl.gz}
TRAIN=$(dirname "$SUITE")/train.jsonl

$DV corpus prompts --raw corpus/prompts-raw --batches "$PROMPT_BATCHES" --batch-size 256 --dtype bf16 \
    --threads "$THREADS"
$DV corpus filter --raw corpus/prompts-raw --out "$SUITE" \
    --avoid "$(dirname "$SUITE")/eval.jsonl" "$BENCH_DIR"/*.jsonl
$DV corpus answers --prompts "$TRAIN" "$SUITE" --out corpus/answers --token-budget "$TOKEN_BUDGET" \
    --batch-size 128 --dtype bf16 --threads "$THREADS"
$DV corpus stats --out corpus/answers
