#!/usr/bin/env bash
# Run 6 on one `nvidia-h200` lease: DSpark against its DFlash-mode twin with the same budget (issue #3's 1.15× goal).
# Both drafts train from scratch at once on one GPU (two processes) with the same data, batch, lr and step count, on
# run 5's 23,240 regenerated sequences plus 30k new prompts of the 65k set. Measured: two trainers on one GPU get
# no more tokens/s together than one alone (36.5k + 40.1k vs 81k solo), so train one after the other next time.
#
#   bash benchmarks/smollm2/lease_twin.sh t1   # carry stage_a: wheel part 0
#   bash benchmarks/smollm2/lease_twin.sh t2   # carry stage_b2: wheel part 1
#   bash benchmarks/smollm2/lease_twin.sh t3   # carry stage_f stage_g: run 5's regenerated data, the new prompts
#   bash benchmarks/smollm2/lease_twin.sh t4   # carry stage_b stage_d: install, convert, regenerate the new prompts,
#                                              #   pack; a probe sizes STEPS to TRAIN_S seconds; both drafts start
#   bash benchmarks/smollm2/lease_twin.sh t5   # both train on (--resume)
#   bash benchmarks/smollm2/lease_twin.sh t6   # both train to the end, held-out eval of both, ship
#
# Calls back to back: /root survives only while the machine stays warm (30 s). Each call trains until DEADLINE seconds
# after it began. The step count is fixed once (the cosine schedule is planned over it): STEPS if given, else
# TRAIN_S (default 900) over the step time of two synthetic trainers run at once (`train_speed.py`), 10 % spare.
# CPU dry run of t5 + t6 (SmolLM2 converted at /root/smol/model, regen.jsonl there): PY=.venv/bin/python STEPS=4
#   BATCH=1 SAVE=2 ATTN=sdpa CACHE=0 EXTRA="--anchors 8" EVAL="--eval-per-suite 1 --eval-max-new 8"
set -euo pipefail
source "$(dirname "$0")/lease_lib.sh"
MODES=(dspark dflash)
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  # two trainers share the GPU memory

plan_steps() {  # /root/steps: STEPS, or what TRAIN_S seconds buy with two trainers sharing the GPU
    if [ -n "${STEPS:-}" ]; then echo "$STEPS" > /root/steps; return; fi
    for k in 1 2; do
        $PY benchmarks/smollm2/train_speed.py --settings 32x256 --steps 60 --examples 256 --profile '' \
            > /root/probe$k.log 2>&1 &
    done
    wait || true
    $PY - "${TRAIN_S:-900}" /root/probe1.log /root/probe2.log > /root/steps <<'EOF'
import json, sys
step_ms = max(json.loads(open(f).read().strip().splitlines()[-1])["rows"][0]["step_ms"] for f in sys.argv[2:])
print(int(float(sys.argv[1]) * 1000 / (1.1 * step_ms)))
print(f"probe: {step_ms:.1f} ms per step with two trainers on the GPU", file=sys.stderr)
EOF
    echo "steps: $(cat /root/steps)"
}

train_both_until() {  # train_both_until <seconds since the call began>: the unfinished drafts, at once
    local left=$(( $1 - SECONDS ))
    for m in "${MODES[@]}"; do
        [ -f /root/o-$m/summary.json ] && continue  # written only when the run has finished
        mkdir -p /root/o-$m
        timeout -k 60 "$left" $PY $T --work /root/smol --out /root/o-$m --stage train --modes $m --resume \
            --steps "$(cat /root/steps)" --batch "${BATCH:-32}" --lr "${LR:-2e-3}" --ce-weight 0.5 --l1-weight 0.5 \
            --attention "${ATTN:-flex}" --save-every "${SAVE:-100}" --hidden-cache-gib "${CACHE:-14}" ${EXTRA:-} \
            >> /root/train-$m.log 2>&1 &
    done
    wait || true
    for m in "${MODES[@]}"; do
        echo "$m: $(tail -n 1 /root/smol/$m/metrics.jsonl 2>/dev/null | cut -c1-200)"
        grep -h "train $m" /root/train-$m.log | tail -n 1 | cut -c1-300 || true
    done
}

case "$1" in
t1)
    mkdir -p /root/stage && cp stage_a/smol.part00 /root/stage/ ;;
t2)
    cp stage_b2/smol.part01 /root/stage/ && ls -la /root/stage ;;
t3)
    mkdir -p /root/smol && cat stage_f/regen.jsonl.gz.part* | gunzip > /root/smol/regen.jsonl
    gunzip -c stage_g/prompts30k.jsonl.gz > /root/stage/prompts.jsonl
    wc -l /root/smol/regen.jsonl /root/stage/prompts.jsonl ;;
t4)
    install_convert
    timeout $(( ${REGEN_DEADLINE:-400} - SECONDS )) $PY $T --stage regen --work /root/smol --out /root/o \
        --prompts /root/stage/prompts.jsonl ${REGEN:-} 2>&1 | tail -n 2 || echo "regeneration cut at ${SECONDS}s"
    $PY $T --stage pack --work /root/smol --out $OUT 2>&1 | tail -n 1
    wc -l /root/smol/regen.jsonl
    plan_steps
    train_both_until "${DEADLINE:-585}" ;;
t5)
    train_both_until "${DEADLINE:-590}" ;;
t6)
    train_both_until "${DEADLINE:-330}"
    $PY $T --work /root/smol --out /root/o --stage eval --eval-prompts /root/stage/eval_prompts.jsonl ${EVAL:-} \
        > /root/eval.log 2>&1 || true
    grep " τ " /root/eval.log || tail -n 20 /root/eval.log
    mkdir -p $OUT /root/o
    cp /root/train-*.log /root/eval.log /root/probe*.log /root/steps /root/o/ 2>/dev/null || true
    for m in "${MODES[@]}"; do
        cp /root/smol/$m/metrics.jsonl /root/o/$m-metrics.jsonl 2>/dev/null || true
        cp /root/o-$m/summary.json /root/o/$m-train-summary.json 2>/dev/null || true
        for p in /root/o-$m/$m.part*; do mv "$p" "$OUT/"; done
    done
    tar -C /root -cf $OUT/meta.tar o
    ls -la $OUT ;;
*)
    echo "usage: $0 t1|t2|t3|t4|t5|t6" >&2; exit 2 ;;
esac
