# Helpers shared by the scripts (sourced, not run).

# The cargo target directory: honours CARGO_TARGET_DIR and .cargo/config.toml (build.target-dir),
# as cargo itself does, by asking cargo.
target_dir() {
  if [ -n "${CARGO_TARGET_DIR:-}" ]; then
    printf '%s\n' "$CARGO_TARGET_DIR"
    return
  fi
  local dir
  dir=$(cargo metadata --format-version 1 --no-deps --offline 2>/dev/null |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p' || true)
  printf '%s\n' "${dir:-target}"
}

# The toolchain rust-toolchain.toml pins (an exact version, the name rustup gives it).
pinned_toolchain() {
  sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml
}

# Installs the pinned toolchain, its components and the wasm32 target when missing. rustup's
# automatic installation may be off (RUSTUP_AUTO_INSTALL=0), so this asks for each explicitly.
ensure_toolchain() {
  local channel
  channel=$(pinned_toolchain)
  if ! command -v rustup >/dev/null; then
    echo "error: rustup is required (https://rustup.rs); it installs the pinned toolchain $channel" >&2
    return 1
  fi
  if ! rustup run "$channel" rustc --version >/dev/null 2>&1; then
    echo "==> installing Rust toolchain $channel (rustfmt, clippy, wasm32 target)"
    rustup toolchain install "$channel" --profile minimal -c rustfmt,clippy -t wasm32-unknown-unknown
  fi
  local installed
  installed=$(rustup component list --installed --toolchain "$channel")
  for component in rustfmt clippy; do
    if ! grep -q "^$component" <<<"$installed"; then
      echo "==> installing the $component component of $channel"
      rustup component add --toolchain "$channel" "$component"
    fi
  done
  if ! rustup target list --installed --toolchain "$channel" | grep -qx wasm32-unknown-unknown; then
    echo "==> installing the wasm32-unknown-unknown target of $channel"
    rustup target add --toolchain "$channel" wasm32-unknown-unknown
  fi
}
