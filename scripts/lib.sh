# Shared helpers for the scripts in this directory.

# Makes sure cargo is on PATH (rustup installs it under ~/.cargo/bin).
ensure_toolchain() {
  if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "error: cargo not found; install the Rust toolchain (https://rustup.rs) first" >&2
    exit 1
  fi
}

# Where the shared evaluation data lives (../shared/eval beside the checkout).
eval_dir() {
  echo "${RAGSCOPE_EVAL_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/shared/eval}"
}
