#!/usr/bin/env bash
# The integration suite against the real engines (not part of CI): see README.md beside this file.
#   benchmarks/integration/run_all.sh [WORK_DIR]
# WORK_DIR (default /tmp/integration-work) holds the tiny target, drafts, exports and server logs; its path must not
# contain "dspark", "dflash" or "eagle", or vLLM would pick the speculative method from the path, not the config.
# Each check records its JSON (with command and commit) in benchmarks/results/integration/result.json. Exit status 1 if any
# check failed.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WORK="${1:-/tmp/integration-work}"
VLLM="${VLLM_VENV:-$HOME/venvs/vllm}"
PEERS="${PEERS_VENV:-$HOME/venvs/peers}"
"$HERE/setup_vllm.sh" || exit 1
"$HERE/setup_peers.sh" || exit 1
rm -rf "$WORK" && mkdir -p "$WORK"
"$REPO/.venv/bin/python" "$HERE/tiny_pair.py" --work "$WORK" || exit 1
status=0
"$PEERS/bin/python" "$HERE/check_speculators.py" || status=1
"$PEERS/bin/python" "$HERE/check_dflash.py" --work "$WORK" || status=1
"$VLLM/bin/python" "$HERE/check_vllm_dflash.py" --work "$WORK" || status=1
"$VLLM/bin/python" "$HERE/check_vllm_dspark.py" --work "$WORK" || status=1
exit "$status"
