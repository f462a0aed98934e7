#!/usr/bin/env bash
# Checks the dependency rule of ARCHITECTURE.md:
#   format <- scaling <- engine <- train <- lab <- {app, cli}
# Each library crate may depend only on the hif8lab crates to its left; none of the
# libraries may pull in a UI crate (egui, eframe, winit); nothing depends on the app.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A allowed=(
  [hif8lab-format]=""
  [hif8lab-scaling]="hif8lab-format"
  [hif8lab-engine]="hif8lab-format hif8lab-scaling"
  [hif8lab-train]="hif8lab-format hif8lab-scaling hif8lab-engine"
  [hif8lab-lab]="hif8lab-format hif8lab-scaling hif8lab-engine hif8lab-train"
)
members=$(cargo metadata --format-version 1 --no-deps --locked |
  grep -o '"name":"hif8lab-[a-z]*"' | sed 's/"name":"\(.*\)"/\1/' | sort -u)
fail=0
for crate in $members; do
  deps=$(cargo tree --locked -e normal -p "$crate" --prefix none --format '{p}' |
    awk '{print $1}' | sort -u)
  if [ -n "${allowed[$crate]+set}" ]; then
    for dep in $(echo "$deps" | grep '^hif8lab-' | grep -vx "$crate" || true); do
      if ! grep -qw -- "$dep" <<<"${allowed[$crate]}"; then
        echo "dependency rule broken: $crate depends on $dep" >&2
        fail=1
      fi
    done
    for ui in $(echo "$deps" | grep -E '^(egui|eframe|egui-wgpu|egui_plot|winit)$' || true); do
      echo "dependency rule broken: library $crate depends on UI crate $ui" >&2
      fail=1
    done
  fi
  if [ "$crate" != hif8lab-app ] && echo "$deps" | grep -qx hif8lab-app; then
    echo "dependency rule broken: $crate depends on hif8lab-app" >&2
    fail=1
  fi
  echo "  $crate: $(echo "$deps" | grep '^hif8lab-' | grep -vx "$crate" | tr '\n' ' ')"
done
[ "$fail" -eq 0 ] && echo "dependency direction ok"
# Inside each crate too: no two modules import each other, directly or round a loop.
python3 "$(dirname "$0")/check-module-cycles.py" || fail=1
exit "$fail"
