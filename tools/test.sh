#!/usr/bin/env bash
# The test command (README: "Run the tests"). On a fresh Debian machine it installs
# everything the suite needs (tools/bootstrap.sh, then the vLLM CPU build in its own
# cached venv via tools/setup-vllm.sh), then runs ruff and pytest.
# Extra arguments go to pytest, e.g. `bash tools/test.sh -m "not integration"`.
set -euo pipefail
cd "$(dirname "$0")/.."

EXTRAS="[test]" source tools/bootstrap.sh

echo "==> preparing the vLLM CPU server venv"
bash tools/setup-vllm.sh

echo "==> ruff"
.venv/bin/ruff check .

echo "==> pytest"
# Every integration dependency was installed above: a missing one must fail, not skip.
export INFERSIGHT_REQUIRE_INTEGRATION=1
exec .venv/bin/python -m pytest "$@"
