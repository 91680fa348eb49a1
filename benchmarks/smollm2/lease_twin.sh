#!/usr/bin/env bash
# Run 6 on one `nvidia-h200` lease: DSpark against its DFlash-mode twin with the same budget (issue #3's 1.15× goal).
# Both drafts train from scratch at once on one GPU (two processes) with the same data, batch, lr and step count, on
# run 5's 23,240 regenerated sequences plus 30k new prompts of the 65k set. Measured there: two trainers on one GPU
# get no more tokens/s together than one alone (36.5k + 40.1k vs 81k solo), so the drafts now train one after the
# other unless TOGETHER=1 (run 6's way; with GPUS=2, on an `nvidia-h200-x2`, each draft gets a GPU of its own).
# PAIR="dspark unanchored" compares another pair of modes; CE / L1 set the DSpark-headed drafts' loss weights (default
# 0.5 / 0.5; the twin always trains on CE alone), so a pair of DSpark-headed drafts with the same STEPS, BATCH, LR and
# data can be set against an earlier run's twin (run 12: `../results/smollm2/run12/`). EXTRA goes to every draft,
# EXTRA_1 / EXTRA_2 to the first / second of PAIR alone: two variants of one mode, e.g. PAIR="unanchored-gated
# unanchored-rnn" EXTRA_1="--markov-head gated" EXTRA_2="--markov-head rnn" (train_draft.py's <mode>-<label>). The twin
# is deterministic (runs 14 and 16: the same metrics, step for step, on run 13's pack), so a pair of variants can be set
# against run 16's twin without training it again.
#
#   bash benchmarks/smollm2/lease_twin.sh t1   # carry stage_a: wheel part 0
#   bash benchmarks/smollm2/lease_twin.sh t2   # carry stage_b2: wheel part 1 (then t1 again with stage_a2: part 2)
#   bash benchmarks/smollm2/lease_twin.sh t3   # carry $DATA and the folder of $PROMPTS: regenerated data, prompts
#                                              #   to regenerate (run 6: DATA=stage_f PROMPTS=stage_g/prompts30k.jsonl.gz;
#                                              #   all of run 8's: DATA=none PROMPTS=stage_p/prompts.jsonl.xz)
#   bash benchmarks/smollm2/lease_twin.sh ti   # carry $DRAFTS (default stage_j): drafts to go on from, each
#                                              #   <name>.part* + <name>-config.json, into /root/stage/init-<name>
#                                              #   (then EXTRA_k="--init /root/stage/init-<name>"; keep the flags
#                                              #   that change a loaded draft, e.g. --no-markov-first-slot, in EXTRA)
#   bash benchmarks/smollm2/lease_twin.sh t4   # carry stage_b: install, convert, regenerate the prompts (until
#                                              #   REGEN_UNTIL s), pack; a probe sizes STEPS to TRAIN_S seconds;
#                                              #   both drafts start. stage_d (the eval prompts) rides with any
#                                              #   call before t6 that has room (t3 with stage_i2, t5)
#   bash benchmarks/smollm2/lease_twin.sh t5   # both train on (--resume)
#   bash benchmarks/smollm2/lease_twin.sh t6   # both train to the end, held-out eval of both, ship
#
# Calls back to back: /root survives only while the machine stays warm (30 s). Each call trains until DEADLINE seconds
# after it began, then ships each unfinished draft's latest checkpoint to $OUT (<mode>-snapshot.part*, ~15 s each) and
# each draft finished in the call (<mode>.part*), so a machine released between calls loses no training. The step
# count is fixed once (the cosine schedule is planned over it): STEPS if given, else TRAIN_S (default 900, for all
# drafts together) over the probed step time, 10 % spare. The probe is synthetic (`train_speed.py`): run 6's real
# steps took 1.9× its time, so prefer STEPS from the measured steps in benchmarks/results/smollm2/ (run 6 alone on the
# GPU: 146–236 ms per step with a 14 GiB cache).
# CPU dry run of t5 + t6 (SmolLM2 converted at /root/smol/model, regen.jsonl there): PY=.venv/bin/python STEPS=4
#   BATCH=1 SAVE=2 ATTN=sdpa CACHE=0 EXTRA="--anchors 8" EVAL="--eval-per-suite 1 --eval-max-new 8"
set -euo pipefail
source "$(dirname "$0")/lease_lib.sh"
stage_carried  # the wheel parts and eval prompts this call carries
read -r -a MODES <<< "${PAIR:-dspark dflash}"
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True  # less fragmentation (run 6: two trainers, one GPU)
SHARED=$([ "${TOGETHER:-0}" = 1 ] && [ "${GPUS:-1}" = 1 ] && echo 1 || echo 0)  # two trainers on one GPU
CACHE=${CACHE:-$([ $SHARED = 1 ] && echo 14 || echo 50)}  # GiB of hidden states kept per trainer

plan_steps() {  # /root/steps: STEPS, or what TRAIN_S seconds buy for both drafts
    if [ -n "${STEPS:-}" ]; then echo "$STEPS" > /root/steps; return; fi
    local probes=$(( SHARED + 1 )) share=2  # one after the other: each draft gets half of TRAIN_S
    [ "${TOGETHER:-0}" = 1 ] && share=1
    for k in $(seq $probes); do
        $PY benchmarks/smollm2/train_speed.py --settings 32x256 --steps 60 --examples 256 --profile '' \
            > /root/probe$k.log 2>&1 &
    done
    wait || true
    $PY - "${TRAIN_S:-900}" $share /root/probe*.log > /root/steps <<'EOF'
import json, sys
step_ms = max(json.loads(open(f).read().strip().splitlines()[-1])["rows"][0]["step_ms"] for f in sys.argv[3:])
print(int(float(sys.argv[1]) * 1000 / (1.1 * step_ms * int(sys.argv[2]))))
print(f"probe: {step_ms:.1f} ms per step with {len(sys.argv) - 3} trainer(s) on the GPU", file=sys.stderr)
EOF
    echo "steps: $(cat /root/steps)"
}

train_one() {  # train_one <mode> <seconds left> [GPU] [K]: from its last checkpoint, with EXTRA and EXTRA_K; it stops
    # itself 20 s before the limit with a checkpoint (--stop-by), and SIGTERM at the limit is the backstop
    [ "$2" -gt 30 ] || { echo "$1: no time left in this call"; return 0; }
    local own="EXTRA_${4:-0}"
    mkdir -p /root/o-$1
    CUDA_VISIBLE_DEVICES=${3:-0} timeout -k 60 "$2" $PY $T --work /root/smol --out /root/o-$1 --stage train \
        --stop-by $(( $(date +%s) + $2 - 20 )) \
        --modes $1 --resume --steps "$(cat /root/steps)" --batch "${BATCH:-32}" --lr "${LR:-2e-3}" --ce-weight "${CE:-0.5}" --l1-weight "${L1:-0.5}" \
        --attention "${ATTN:-flex}" --save-every "${SAVE:-100}" --hidden-cache-gib "$CACHE" ${EXTRA:-} ${!own:-} \
        >> /root/train-$1.log 2>&1 || true
}

train_both_until() {  # train_both_until <seconds since the call began>: the unfinished drafts
    local k=0
    for m in "${MODES[@]}"; do
        k=$(( k + 1 ))
        [ -f /root/o-$m/summary.json ] && continue  # written only when the run has finished
        if [ "${TOGETHER:-0}" = 1 ]; then
            train_one $m $(( $1 - SECONDS )) $(( (k - 1) % ${GPUS:-1} )) $k &
        else
            train_one $m $(( $1 - SECONDS )) 0 $k
        fi
    done
    wait || true
    for m in "${MODES[@]}"; do
        echo "$m: $(tail -n 1 /root/smol/$m/metrics.jsonl 2>/dev/null | cut -c1-200)"
        grep -h "train $m" /root/train-$m.log | tail -n 1 | cut -c1-300 || true
    done
    snapshot "$(IFS=,; echo "${MODES[*]}")"  # the unfinished drafts come back with this call
    for m in "${MODES[@]}"; do  # and a draft finished in this call too (run 18 lost one with a released machine)
        for p in /root/o-$m/$m.part*; do [ ! -e "$p" ] || mv "$p" "$OUT/"; done
        [ ! -f /root/o-$m/$m-config.json ] || cp /root/o-$m/$m-config.json "$OUT/"
    done
    pack_out > /dev/null
}

case "$1" in
t1)
    ;;  # stage_carried did it (carry stage_a, or stage_a2)
t2)
    ;;  # stage_carried did it (carry stage_b2)
t3)  # DATA: packed regenerated data (run 6: stage_f; none: regenerate everything); PROMPTS: prompts to regenerate
    #     in t4, .gz or .xz (run 6: stage_g/prompts30k.jsonl.gz; run 8's 68k: stage_p/prompts.jsonl.xz; unset: none)
    #     A pack in two folders (run 11's: stage_i, stage_i2) takes two t3 calls, PROMPTS with the second.
    mkdir -p /root/smol
    if [ "${DATA:-stage_f}" != none ]; then unpack_data "${DATA:-stage_f}"; fi
    if [ -n "${PROMPTS:-}" ]; then unpack_prompts "$PROMPTS"; fi ;;
ti)
    mkdir -p /root/stage && unpack_drafts "${DRAFTS:-stage_j}" ;;
t4)
    install_convert
    if [ -f /root/stage/prompts.jsonl ]; then
        regen_until "${REGEN_UNTIL:-400}"
        $PY $T --stage pack --work /root/smol --out $OUT 2>&1 | tail -n 1
    fi
    wc -l /root/smol/regen.jsonl
    plan_steps
    train_both_until "${DEADLINE:-565}" ;;
t5)
    train_both_until "${DEADLINE:-565}" ;;
t6)  # T1_LIMIT=40: then τ at T = 1 of each finished draft too (sampled_acceptance, ~50 s a draft); SPEED_S > 0: and
    #   the speed benchmark of the first draft of PAIR for that many seconds (speed_benchmark, speed.tar)
    train_both_until "${DEADLINE:-330}"
    $PY $T --work /root/smol --out /root/o --stage eval --eval-prompts /root/stage/eval_prompts.jsonl ${EVAL:-} \
        > /root/eval.log 2>&1 || true
    grep " τ " /root/eval.log || tail -n 20 /root/eval.log
    mkdir -p $OUT /root/o
    for m in "${MODES[@]}"; do
        [ -z "${T1_LIMIT:-}" ] || [ ! -f /root/smol/$m-draft/config.json ] || sampled_acceptance /root/smol/$m-draft $m
    done
    [ "${SPEED_S:-0}" -le 0 ] || [ ! -f /root/smol/${MODES[0]}-draft/config.json ] \
        || speed_benchmark /root/smol/${MODES[0]}-draft "$SPEED_S"
    cp -r /root/t1 /root/o/ 2>/dev/null || true
    cp /root/train-*.log /root/eval.log /root/probe*.log /root/steps /root/o/ 2>/dev/null || true
    for m in "${MODES[@]}"; do
        cp /root/smol/$m/metrics.jsonl /root/o/$m-metrics.jsonl 2>/dev/null || true
        cp /root/o-$m/summary.json /root/o/$m-train-summary.json 2>/dev/null || true
        cp /root/o-$m/$m-config.json /root/o/ 2>/dev/null || true  # the parts' config (run 12 had to rebuild it)
        for p in /root/o-$m/$m.part*; do [ ! -e "$p" ] || mv "$p" "$OUT/"; done  # none: cut, or shipped by t4 / t5
    done
    tar -C /root -cf $OUT/meta.tar o
    pack_out ;;
*)
    echo "usage: $0 t1|t2|t3|ti|t4|t5|t6" >&2; exit 2 ;;
esac
