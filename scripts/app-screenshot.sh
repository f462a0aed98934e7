#!/usr/bin/env bash
# Starts the desktop app under Xvfb with `--preset smoke --autostart`, waits until training
# has finished, takes a screenshot and checks it is not blank; also checks the app's own PNG
# export of the shown panel (--png-after).
#   scripts/app-screenshot.sh [OUT.png] [PANEL]   (default <target dir>/app-screenshot.png, loss)
# HIF8LAB_APP_ARGS adds flags, e.g. HIF8LAB_APP_ARGS="--init-from tests/fixtures/hf/tiny-untied-f32-sharded"
# (continue training a Hugging Face folder).
# Installs Xvfb, ImageMagick and the X libraries winit needs when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
target=$(target_dir)
out=${1:-$target/app-screenshot.png}
tab=${2:-loss}
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi
missing=()
command -v Xvfb >/dev/null || missing+=(xvfb)
command -v import >/dev/null || missing+=(imagemagick)
for lib in libxkbcommon-x11.so.0 libXcursor.so.1 libXrandr.so.2 libXi.so.6 libX11-xcb.so.1; do
  ldconfig -p | grep -q "$lib" || missing+=("$lib")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> installing Xvfb, ImageMagick and X libraries for the app screenshot"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    xvfb imagemagick libxkbcommon-x11-0 libxcursor1 libxrandr2 libxi6 libx11-xcb1
fi
# HIF8LAB_APP_BIN: an app binary already built (scripts/test.sh passes the one `cargo test
# --workspace` built; `cargo build -p hif8lab-app` alone resolves other dependency features
# and rebuilds wgpu, naga and more).
app_bin=${HIF8LAB_APP_BIN:-}
if [ -z "$app_bin" ]; then
  cargo build --locked -p hif8lab-app
  app_bin=$target/debug/hif8lab-app
elif [ ! -x "$app_bin" ]; then
  echo "app-screenshot.sh: HIF8LAB_APP_BIN=$app_bin: no executable there" >&2
  exit 2
fi
display=":$((90 + RANDOM % 9))"
Xvfb "$display" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
log=$(mktemp)
runtime=$(mktemp -d)
cleanup() { kill "${app:-}" "$xvfb" 2>/dev/null || true; rm -rf "$log" "$runtime"; }
trap cleanup EXIT
sleep 1
png="app-screenshot-check-$$.png"
rm -f "exports/$png"
# shellcheck disable=SC2086 # HIF8LAB_APP_ARGS is split into flags on purpose
DISPLAY=$display XDG_RUNTIME_DIR=$runtime "$app_bin" --preset smoke --autostart --tab "$tab" --png-after "$png" ${HIF8LAB_APP_ARGS:-} >"$log" 2>&1 &
app=$!
for _ in $(seq 1 240); do
  grep -q "Training finished" "$log" && break
  if ! kill -0 "$app" 2>/dev/null; then echo "app exited early:"; cat "$log"; exit 1; fi
  sleep 1
done
grep -q "Training finished" "$log" || { echo "training did not finish in 240 s:"; cat "$log"; exit 1; }
sleep 1
mkdir -p "$(dirname "$out")"
DISPLAY=$display import -window root "$out"
stats=$(convert "$out" -format "%[fx:standard_deviation] %k" info:)
read -r stddev colors <<<"$stats"
echo "screenshot $out: standard deviation $stddev, $colors colours"
awk -v s="$stddev" -v c="$colors" 'BEGIN { exit !(s > 0.02 && c > 50) }' || { echo "screenshot looks blank"; exit 1; }
# The app's own PNG export of the shown panel (--png-after), through eframe's screenshot path.
for _ in $(seq 1 20); do grep -q "Saved exports/$png" "$log" && break; sleep 0.5; done
grep -q "Saved exports/$png" "$log" || { echo "the app did not export its panel as PNG:"; cat "$log"; exit 1; }
read -r w h pstd pcol <<<"$(convert "exports/$png" -format "%w %h %[fx:standard_deviation] %k" info:)"
rm -f "exports/$png"
echo "panel PNG export: ${w}x${h}, standard deviation $pstd, $pcol colours"
awk -v w="$w" -v h="$h" -v s="$pstd" -v c="$pcol" 'BEGIN { exit !(w >= 600 && h >= 400 && s > 0.02 && c > 20) }' \
  || { echo "the exported panel PNG looks wrong"; exit 1; }
