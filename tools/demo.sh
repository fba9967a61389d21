#!/usr/bin/env bash
# The run command (README: "See it work"). On a fresh Debian machine with no GPU and
# no Docker: installs what the native stack needs (tools/bootstrap.sh), then runs
# `infersight demo` (simulated vLLM and GPU, real Prometheus and Alertmanager, a local
# PagerDuty receiver). Extra arguments go to `infersight demo`; Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

source tools/bootstrap.sh

exec .venv/bin/infersight demo "$@"
