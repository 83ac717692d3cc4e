#!/usr/bin/env bash
# Installs Debian's chromium (and a CJK font, so screenshots of the Chinese UI
# are readable) for the workbench's browser tests
# (crates/rag-server/tests/browser.rs). Idempotent: does nothing when a
# chromium binary is already on PATH (or RAGSCOPE_CHROMIUM points at one) and
# the font is present.
#
# Versions: the font is pinned; chromium is pinned to the version the tests
# were written against when the mirror still has it (Debian replaces chromium
# with every security release, so an exact pin alone would stop working),
# otherwise the mirror's current chromium is installed and its version printed.
set -euo pipefail

CHROMIUM_VERSION="${RAGSCOPE_CHROMIUM_VERSION:-148.0.7778.167-1~deb12u1}"
FONT_VERSION="0.2.0-beta-3.1"

have_font() { dpkg-query -W -f='${Status}' fonts-wqy-microhei 2>/dev/null | grep -q "install ok installed"; }
have_chromium() {
  [[ -n "${RAGSCOPE_CHROMIUM:-}" && -x "${RAGSCOPE_CHROMIUM}" ]] && return 0
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1
}

if have_chromium && have_font; then
  echo "setup-browser: chromium and fonts-wqy-microhei already installed"
  exit 0
fi

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
packages=()
have_font || packages+=("fonts-wqy-microhei=${FONT_VERSION}")
if ! have_chromium; then
  if apt-cache madison chromium | grep -qF "| ${CHROMIUM_VERSION} |"; then
    packages+=("chromium=${CHROMIUM_VERSION}")
  else
    echo "setup-browser: chromium ${CHROMIUM_VERSION} is no longer on the mirror; installing its current version" >&2
    packages+=(chromium)
  fi
fi
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${packages[@]}"
chromium --version
