#!/usr/bin/env bash
# The test command (README: "Run the tests"). On a fresh Debian machine it installs
# everything the suite needs, then runs it: Prometheus, promtool, Alertmanager and
# amtool from Debian; the project and its test extras in .venv; the vLLM CPU build
# in its own cached venv (tools/setup-vllm.sh); then ruff and pytest.
# Extra arguments go to pytest, e.g. `bash tools/test.sh -m "not integration"`.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)

missing=()
command -v prometheus >/dev/null && command -v promtool >/dev/null || missing+=(prometheus)
command -v prometheus-alertmanager >/dev/null && command -v amtool >/dev/null || missing+=(prometheus-alertmanager)
python3 -c "import ensurepip, venv" 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> installing ${missing[*]} from Debian"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  python3 -m venv .venv
fi
echo "==> installing infersight with test extras into .venv"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]"

echo "==> preparing the vLLM CPU server venv"
bash tools/setup-vllm.sh

echo "==> ruff"
.venv/bin/ruff check .

echo "==> pytest"
# Every integration dependency was installed above: a missing one must fail, not skip.
export INFERSIGHT_REQUIRE_INTEGRATION=1
exec .venv/bin/python -m pytest "$@"
