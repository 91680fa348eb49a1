#!/usr/bin/env bash
# Create the venv with the peer implementations the integration suite compares against (outside the repo):
#   speculators 0.9.0 (vLLM project) and dflash 0.1.0 (z-lab), on the CPU torch 2.13.0 + transformers 5.17.0 that
#   dspark itself is tested with; dspark is installed editable from this checkout, without touching its own venv.
#   PEERS_VENV (default $HOME/venvs/peers), PYTHON311 (default python3.11).
# speculators requires torchvision / torchaudio, whose PyPI builds are CUDA builds that pull a CUDA torch; its model
# code does not use them, so it is installed --no-deps with the dependencies it imports listed here.
set -euo pipefail
VENV="${PEERS_VENV:-$HOME/venvs/peers}"
PY="${PYTHON311:-python3.11}"
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import speculators, dflash, dspark" 2>/dev/null; then
  echo "peers venv ready: $VENV"; exit 0
fi
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/pip" install -q -c "$REPO/constraints.txt")
"${PIP[@]}" torch==2.13.0 transformers==5.17.0
"${PIP[@]}" --no-deps speculators==0.9.0 dflash==0.1.0 hs-connectors==0.9.0
"${PIP[@]}" loguru pydantic pydantic-settings "datasets<=5.1.0" typer click httpx "openai>=2" aiohttp psutil protobuf \
  safetensors numpy rich tqdm pyyaml prometheus_client
"${PIP[@]}" --no-deps -e "$REPO"
"$VENV/bin/python" -c "import speculators, dflash, dspark, torch, transformers; from importlib.metadata import version; \
print('speculators', version('speculators'), 'dflash', version('dflash'), 'torch', torch.__version__, \
'transformers', transformers.__version__)"
