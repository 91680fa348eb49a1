#!/usr/bin/env bash
# Runs 5, 8 and 9 on one `nvidia-h200` lease: continue training the shipped draft at batch 32, with the target's hidden
# states kept on the GPU after their first pass (`--hidden-cache-gib`), on the regenerated sequences (run 5: 23k;
# run 8: 68k, regenerated in f3; run 9: 98k, only the 30k new ones regenerated in f3).
#
#   bash benchmarks/smollm2/lease_finetune.sh f1   # carry stage_a: wheel part 0; the training-speed benchmark
#   bash benchmarks/smollm2/lease_finetune.sh f2   # carry stage_b2: wheel part 1 (and prompts*.jsonl.gz if there)
#   bash benchmarks/smollm2/lease_finetune.sh g1   # carry stage_a2: wheel part 2 (any call staging a part will do)
#   bash benchmarks/smollm2/lease_finetune.sh fp   # carry stage_p: prompts.jsonl.xz (a prompt set too big to ride
#                                                  #   with a wheel part); PROMPTS=, SEED= (run 9: stage_q, stage_i)
#   bash benchmarks/smollm2/lease_finetune.sh f3   # carry stage_b: install, convert, regenerate (until REGEN_UNTIL
#                                                  #   s into the call), pack, train
#   bash benchmarks/smollm2/lease_finetune.sh f4   # train on (--resume)
#   bash benchmarks/smollm2/lease_finetune.sh f5   # train to the end (--resume), held-out eval, ship (SPEED_S=230:
#                                                  #   and the speed benchmark of the new draft; T1_LIMIT=20: and
#                                                  #   τ at T=1 of the new and the initial draft, T1_SUITES)
# or, with the regenerated data already here (git-ignored $DATA/regen.jsonl.gz.part*, packed by f3 or lease_twin.sh
# t4; DATA defaults to stage_f, run 5's 23,240 sequences; stage_h holds run 6's 49,181):
#   bash benchmarks/smollm2/lease_finetune.sh g1   # carry stage_a: wheel part 0
#   bash benchmarks/smollm2/lease_finetune.sh g2   # carry stage_b2: wheel part 1 (then g1 with stage_a2: part 2)
#   bash benchmarks/smollm2/lease_finetune.sh gd   # carry $DATA: the regenerated data (with stage_b2 it would pass
#                                                  #   the 64 MiB a call may carry; a pack too big for one call
#                                                  #   goes in two gd calls, its parts split over two folders)
#   bash benchmarks/smollm2/lease_finetune.sh g3   # carry stage_b: install, convert, train, eval, ship (or, when
#                                                  #   DEADLINE cut the training, f4 / f5 go on)
# stage_d (the eval prompts) rides with any call before the eval that has room (gd with stage_i2, fp, f4): with
# stage_b it no longer fits beside the repository's 35 MB tree (run 18).
#
# Either way, `sp` (carry stage_b, after the wheel parts arrived) first measures the shipped draft's speed:
#   SPEED_S=230 bash benchmarks/smollm2/lease_finetune.sh sp
#
# Calls back to back: /root survives only while the machine stays warm (30 s). STEPS, BATCH and LR must be the same
# in f3–f5 (the cosine schedule is planned once); each call trains until DEADLINE seconds after it began, then ships
# the latest checkpoint's draft to $OUT (dspark-snapshot.part*, ~15 s: keep DEADLINE ≤ 575 in a 600 s call), since
# a machine released between calls takes /root with it (run 7 lost 5,949 of 6,000 steps that way).
# MODE=unanchored (default dspark) trains the DSpark heads on the DFlash block layout instead (`../results/smollm2/`
# "Run 12"): from scratch by default, or INIT=<an unanchored draft folder> on a later lease.
# CPU dry run (small numbers): PY=.venv/bin/python STEPS=4 BATCH=1 LR=1e-4 SAVE=2 ATTN=sdpa EXTRA="--anchors 8"
#   REGEN="--regen-max-new 8" EVAL="--eval-per-suite 1 --eval-max-new 8", with a few prompts in /root/stage/prompts.jsonl.
set -euo pipefail
source "$(dirname "$0")/lease_lib.sh"
stage_carried  # the wheel parts and eval prompts this call carries
INIT_DRAFT=src/dspark/assets/smollm2-135m-instruct-dspark
MODE=${MODE:-dspark}  # the draft this lease trains: dspark (anchored) or unanchored (train_draft.py --modes)
# INIT= (empty): a fresh draft (EXTRA="--draft-layers N"); the default is the shipped draft for MODE=dspark and a
# fresh one otherwise (the shipped draft is anchored)
INIT=${INIT-$([ "$MODE" = dspark ] && echo "$INIT_DRAFT" || true)}

train_until() {  # train_until <seconds since the call began> [--resume]
    local TRAIN=(--work /root/smol --out /root/o --stage train --modes "$MODE" ${INIT:+--init "$INIT"}
                 --steps "${STEPS:?}" --batch "${BATCH:?}" --lr "${LR:?}" --ce-weight 0.5 --l1-weight 0.5
                 --attention "${ATTN:-flex}" --save-every "${SAVE:-250}" ${EXTRA:-})
    local left=$(( $1 - SECONDS )); shift
    mkdir -p /root/o
    # the trainer stops itself 20 s early (--stop-by, a checkpoint of its last step); timeout is the backstop
    # expandable segments: run 10's 5-layer draft beside a 75 GiB hidden-state cache ran out of memory in fragments
    PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True} \
        timeout -k 60 "$left" $PY $T "${TRAIN[@]}" --stop-by $(( $(date +%s) + left - 20 )) "$@" >> /root/train.log 2>&1 \
        || echo "train stopped (rc $?) at ${SECONDS}s"
    [ ! -f /root/o/summary.json ] || cp /root/o/summary.json /root/o/train-summary.json  # eval writes summary.json too
    tail -n 3 /root/train.log
    tail -n 1 "/root/smol/$MODE/metrics.jsonl" 2>/dev/null || true
    snapshot "$MODE"
}

evaluate_and_ship() {
    $PY $T --work /root/smol --out /root/o --stage eval --eval-prompts /root/stage/eval_prompts.jsonl \
        ${EVAL:-} > /root/eval.log 2>&1 || true
    grep " τ " /root/eval.log || tail -n 20 /root/eval.log
    mkdir -p $OUT
    cp /root/train.log /root/eval.log /root/o/ 2>/dev/null || true
    cp "/root/smol/$MODE/metrics.jsonl" "/root/o/$MODE-metrics.jsonl" 2>/dev/null || true
    for p in /root/o/$MODE.part*; do [ ! -e "$p" ] || mv "$p" "$OUT/"; done  # none when the run was cut (f5)
    tar -C /root -cf $OUT/meta.tar o
    ls -la $OUT
}

case "$1" in
g1)
    ;;  # stage_carried did it (carry stage_a, or stage_a2)
g2)
    ;;  # stage_carried did it (carry stage_b2)
gd)  # the parts may come in several calls (DATA=stage_i, then DATA=stage_i2 …): unpacked once all have arrived
    unpack_data "${DATA:-stage_f}" ;;
g3)  # a run longer than one call: f4 (on) and f5 (to the end, eval, ship) resume it
    install_convert
    train_until "${DEADLINE:-450}"
    # finished: the train stage wrote the draft (convert's summary.json is no sign of it: run 10's g3 evaluated nothing)
    if [ -d "/root/smol/$MODE-draft" ]; then evaluate_and_ship; else echo "not finished: continue with f4 / f5"; fi ;;
f1)
    $PY benchmarks/smollm2/train_speed.py --settings "${SETTINGS:-8x256,8x256c,32x256c,48x256c}" --steps 60 --examples 256 \
        --profile 32x256c 2>&1 | grep -v -i warn | tail -n 75 ;;
f2)
    for g in stage_b2/prompts*.jsonl.gz; do [ -f "$g" ] && gunzip -c "$g" > /root/stage/prompts.jsonl; done
    wc -l /root/stage/prompts.jsonl 2>/dev/null || true ;;
fp)  # PROMPTS: another prompt set; SEED: a folder of an earlier pack (f3 then regenerates only the new prompts,
    #   with REGEN="--regen-seed /root/seed")
    unpack_prompts "${PROMPTS:-stage_p/prompts.jsonl.xz}"
    if [ -n "${SEED:-}" ]; then mkdir -p /root/seed && cp "$SEED"/regen.jsonl.gz.part* /root/seed/ && ls /root/seed; fi ;;
f3)
    install_convert
    regen_until "${REGEN_UNTIL:-400}"
    $PY $T --stage pack --work /root/smol --out $OUT 2>&1 | tail -n 1
    train_until "${DEADLINE:-560}" ;;
f4)
    train_until "${DEADLINE:-575}" --resume ;;
f5)  # finishes the run, or evaluates its latest checkpoint when DEADLINE comes first; SPEED_S > 0: then the speed
    #   benchmark of the new draft (benchmarks/speed/throughput_h200.py, SPEED_METHODS, that many seconds)
    train_until "${DEADLINE:-300}" --resume
    if [ ! -d "/root/smol/$MODE-draft" ]; then
        cp -r "/root/smol/$MODE/$(cat "/root/smol/$MODE/latest")/draft" "/root/smol/$MODE-draft"
        echo "evaluating the unfinished run's checkpoint $(cat "/root/smol/$MODE/latest")"
    fi
    evaluate_and_ship
    [ "${SPEED_S:-0}" -le 0 ] || speed_benchmark "/root/smol/$MODE-draft" "$SPEED_S"
    if [ "${T1_LIMIT:-0}" -gt 0 ]; then  # sampled τ of the new draft and of the one it started from, same call
        sampled_acceptance "/root/smol/$MODE-draft" acceptance-t1-new
        [ -z "$INIT" ] || sampled_acceptance "$INIT" acceptance-t1-init
        tar -C /root -cf $OUT/t1.tar t1  # one file: f5 brings back 8 (4 draft parts, meta, speed, t1, summary)
    fi ;;
ev)  # carry stage_b (after g1, g2, g1, one of them with stage_d): install, convert, held-out eval + STS calibration of
    #   EVAL_DRAFT (default the shipped draft: put a candidate there first), then SPEED_S seconds of the speed
    #   benchmark: what f5 does after training, for a lease whose f5 was lost (run 22: the machine went between f4 and f5)
    install_convert
    rm -rf "/root/smol/$MODE-draft" && cp -r "${EVAL_DRAFT:-$INIT_DRAFT}" "/root/smol/$MODE-draft"
    evaluate_and_ship
    [ "${SPEED_S:-0}" -le 0 ] || speed_benchmark "/root/smol/$MODE-draft" "$SPEED_S" ;;
sp)  # carry stage_b (after g1, g2 or f1/f2, one of them with stage_d): install, convert and the speed benchmark of
    #   the shipped draft for SPEED_S (default 230) seconds; g3 / f3 then find the install in place
    install_convert
    speed_benchmark "$INIT_DRAFT" "${SPEED_S:-230}" ;;
*)
    echo "usage: $0 f1|f2|fp|f3|f4|f5|g1|g2|gd|g3|ev|sp" >&2; exit 2 ;;
esac
