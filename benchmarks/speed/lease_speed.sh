#!/usr/bin/env bash
# The speed benchmark alone on one `nvidia-h200` lease, with the shipped draft (and a DFlash-mode twin when
# stage_c/dflash holds one): the model files arrive in two or three calls (each call carries at most 64 MiB with the
# repository), the last installs, converts SmolLM2 and runs benchmarks/speed/throughput_h200.py. PROFILE=1 makes s1
# also run benchmarks/speed/round_kernels.py (needs no model files).
#
#   bash benchmarks/speed/lease_speed.sh s1   # carry stage_a: SmolLM2 wheel part 0 (+ the kernel profile, no files)
#   bash benchmarks/speed/lease_speed.sh s2   # carry stage_b2 stage_d, then again with stage_a2: parts 1-2, prompts
#   bash benchmarks/speed/lease_speed.sh s3   # carry stage_c/dflash: the DFlash-mode twin (optional)
#   DEADLINE=s METHODS=a,b bash benchmarks/speed/lease_speed.sh s4   # carry stage_b: part 3 + wheels; the benchmark
#   bash benchmarks/speed/lease_speed.sh s5   # carry stage_t (held-out prompts as a JSONL with suites heldout-code /
#       heldout-math; stage.sh builds it): more tree shapes at batch 1 (TREE_SHAPES, nodes/beam) and held-out τ, chain
#       against tree, at HELDOUT_T (0 default; 0,1 adds sampled τ); SCORE_TEMPS (default 1): the trees' score
#       temperatures (TreeShape.score_temperature), each shape and each held-out tree run once per value
# s4 and s5 take SPEED_VOCAB (--draft-vocab K), SPEED_PROMPTS (batch-1 requests, default 40), CONCURRENCY and
# TREE_NODES / TREE_BEAM (the dspark-tree method's shape); s4 takes TREE_MAX_ROWS, WAVES / REPEATS and RESERVE
#   (seconds the matrix leaves for the profile and report; 0 with a short DEADLINE skips the profile); PROFILE_ARGS
#   go to round_kernels.py on s1.
#
# Calls back to back: /root survives only while the machine stays warm (30 s).
set -euo pipefail
source "$(dirname "$0")/../smollm2/lease_lib.sh"
stage_carried  # the wheel parts and eval prompts this call carries
case "$1" in
s1)
    [ -z "${PROFILE:-}" ] || python3 benchmarks/speed/round_kernels.py ${PROFILE_ARGS:-} ;;
s2)
    ;;  # stage_carried did it (carry stage_b2 stage_d, then s2 again with stage_a2: wheel parts 1 and 2, prompts)
s3)
    rm -rf /root/dflash && cp -r stage_c/dflash /root/dflash ;;
s4)
    install_packages
    DFLASH=(); [ ! -d /root/dflash ] || DFLASH=(--dflash-draft /root/dflash)
    python3 benchmarks/speed/throughput_h200.py "${DFLASH[@]}" --prompts /root/stage/eval_prompts.jsonl \
        --methods "${METHODS:-plain,dspark,hf-static}" --deadline "${DEADLINE:-450}" --method-budget 30 \
        --draft-vocab "${SPEED_VOCAB:-0}" --num-prompts "${SPEED_PROMPTS:-40}" --concurrency "${CONCURRENCY:-1,4,16,64}" \
        --tree-nodes "${TREE_NODES:-23}" --tree-beam "${TREE_BEAM:-4}" --reserve "${RESERVE:-60}" \
        --waves "${WAVES:-2}" --repeats "${REPEATS:-1}" --tree-max-rows "${TREE_MAX_ROWS:-0}" \
        --out /root/speed 2>&1 | tee /root/speed.log || true   # whatever happened, the files below come back
    mkdir -p $OUT /root/speed && cp /root/speed.log /root/speed/ && tar -C /root -cf $OUT/speed.tar speed ;;
s5)
    [ -d /tmp/site/gguf ] || install_packages  # a machine s4 did not install on (carry stage_b then)
    DRAFT=src/dspark/assets/smollm2-135m-instruct-dspark
    for shape in ${TREE_SHAPES-31/8 47/8}; do  # TREE_SHAPES="" skips them
      for st in ${SCORE_TEMPS:-1}; do  # TreeShape.score_temperature values
        name="tree-${shape%/*}-${shape#*/}-t$st"
        python3 benchmarks/speed/throughput_h200.py --prompts /root/stage/eval_prompts.jsonl --methods plain,dspark-tree \
            --concurrency 1 --deadline 150 --method-budget 30 --draft-vocab "${SPEED_VOCAB:-0}" \
            --num-prompts "${SPEED_PROMPTS:-40}" --tree-nodes "${shape%/*}" --tree-beam "${shape#*/}" \
            --tree-score-temperature "$st" --out "/root/$name" > "/root/$name.log" 2>&1 || true
        grep -a "dspark-tree\|plain  " "/root/$name.log" | head -4
      done
    done
    for nodes in 0 ${TREE_NODES:-23}; do  # held-out τ on the GPU engine (HELDOUT_T: 0, 1 or 0,1): chain (0), tree
      for st in $([ "$nodes" = 0 ] && echo 1 || echo "${SCORE_TEMPS:-1}"); do
        PYTHONPATH=src:/tmp/site python3 -m dspark.cli bench acceptance --target /root/dspark-bench/smollm2 \
            --draft $DRAFT --prompts stage_t/heldout.jsonl --temperature "${HELDOUT_T:-0}" --max-new-tokens 256 \
            --draft-vocab "${SPEED_VOCAB:-0}" --tree-nodes $nodes --tree-beam "${TREE_BEAM:-4}" --batch 8 \
            --tree-score-temperature "$st" --no-progress --out /root/heldout/tree-$nodes-t$st.json 2>&1 \
            | grep -av -i warn | tail -n 6 || true
      done
    done
    mkdir -p $OUT && tar -C /root -cf $OUT/tree.tar heldout $(cd /root && ls -d tree-*) ;;
*)
    echo "usage: $0 s1|s2|s3|s4|s5" >&2; exit 2 ;;
esac
