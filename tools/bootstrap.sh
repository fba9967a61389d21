#!/usr/bin/env bash
# Sourced by tools/test.sh and tools/demo.sh: makes a fresh Debian machine ready to
# run infersight from this checkout. Installs Prometheus, promtool, Alertmanager and
# amtool from Debian when missing, and the project (with EXTRAS, e.g. "[test]") in .venv.
set -euo pipefail

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
echo "==> installing infersight${EXTRAS:-} into .venv"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".${EXTRAS:-}"
