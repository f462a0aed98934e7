#!/usr/bin/env bash
# Serves web/dist/ (built by scripts/build-web.sh) on 127.0.0.1 — a secure context, so
# browsers allow WebGPU. Usage: scripts/serve-web.sh [PORT]   (default 8080)
set -euo pipefail
cd "$(dirname "$0")/.."
port="${1:-8080}"
case "$port" in
  ''|*[!0-9]*) echo "serve-web.sh: PORT must be a number, got '$port'" >&2; exit 2 ;;
esac
if [ ! -f web/dist/index.html ]; then
  echo "serve-web.sh: web/dist/ is empty; run scripts/build-web.sh first" >&2
  exit 1
fi
echo "hif8lab demo: http://127.0.0.1:$port/?preset=smoke&autostart=1  (Ctrl-C stops)"
exec python3 -m http.server "$port" --bind 127.0.0.1 --directory web/dist
