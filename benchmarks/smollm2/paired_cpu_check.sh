#!/usr/bin/env bash
# A paired held-out check of two drafts on this CPU (run 17's): greedy τ of each on the built-in HumanEval and GSM8K
# suites, both drafts on the same prompts, one thread each side by side, then `dspark bench compare` (bootstrap
# intervals over the prompts; the share of resamples at or above RATIO). ~20 min for two 2-layer drafts at LIMIT=100
# on 2 cores.
#
#   bash benchmarks/smollm2/paired_cpu_check.sh TARGET A_DRAFT B_DRAFT OUT_DIR
#   (LIMIT=100 SUITES=code,math NEW=128 TEMPS=0 RATIO=1.15 PY=.venv/bin/python by default)
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 TARGET A_DRAFT B_DRAFT OUT_DIR" >&2; exit 2; }
TARGET=$1 A=$2 B=$3 OUT=$4
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
measure() {  # measure <draft> <name>
    OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE $PY -m dspark.cli bench acceptance --target "$TARGET" --draft "$1" \
        --suite "${SUITES:-code,math}" --limit "${LIMIT:-100}" --seed 0 --temperature "${TEMPS:-0}" \
        --max-new-tokens "${NEW:-128}" --no-progress --out "$OUT/$2.json" > "$OUT/$2.log" 2>&1
}
measure "$A" a & measure "$B" b & wait
$PY -m dspark.cli bench compare "$OUT/a.json" "$OUT/b.json" --threshold "${RATIO:-1.15}" | tee "$OUT/compare.txt"
