#!/usr/bin/env bash
# Installs Debian's chromium for the workbench's browser tests
# (crates/rag-server/tests/browser.rs). Idempotent: does nothing when a
# chromium binary is already on PATH (or RAGSCOPE_CHROMIUM points at one).
set -euo pipefail

if [[ -n "${RAGSCOPE_CHROMIUM:-}" && -x "${RAGSCOPE_CHROMIUM}" ]]; then
  echo "chromium: using ${RAGSCOPE_CHROMIUM}"
  exit 0
fi
for bin in chromium chromium-browser; do
  if command -v "$bin" >/dev/null 2>&1; then
    echo "chromium: $("$bin" --version 2>/dev/null || echo "$bin") already installed"
    exit 0
  fi
done

if [[ "$(id -u)" -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "setup-browser: chromium is missing and neither root nor sudo is available" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends chromium
chromium --version
