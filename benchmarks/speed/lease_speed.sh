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
#
# Calls back to back: /root survives only while the machine stays warm (30 s).
set -euo pipefail
source "$(dirname "$0")/../smollm2/lease_lib.sh"
stage_carried  # the wheel parts and eval prompts this call carries
case "$1" in
s1)
    [ -z "${PROFILE:-}" ] || python3 benchmarks/speed/round_kernels.py ;;
s2)
    ;;  # stage_carried did it (carry stage_b2 stage_d, then s2 again with stage_a2: wheel parts 1 and 2, prompts)
s3)
    rm -rf /root/dflash && cp -r stage_c/dflash /root/dflash ;;
s4)
    install_packages
    DFLASH=(); [ ! -d /root/dflash ] || DFLASH=(--dflash-draft /root/dflash)
    python3 benchmarks/speed/throughput_h200.py "${DFLASH[@]}" --prompts /root/stage/eval_prompts.jsonl \
        --methods "${METHODS:-plain,dspark,hf-static}" --deadline "${DEADLINE:-450}" --method-budget 30 \
        --out /root/speed 2>&1 | tee /root/speed.log || true   # whatever happened, the files below come back
    mkdir -p $OUT /root/speed && cp /root/speed.log /root/speed/ && tar -C /root -cf $OUT/speed.tar speed ;;
*)
    echo "usage: $0 s1|s2|s3|s4" >&2; exit 2 ;;
esac
