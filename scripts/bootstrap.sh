#!/usr/bin/env bash
# Set up a machine for tilefarm: system packages (when we can install them), .venv, the project and its pins.
# Idempotent and quiet when everything is already there. Used by `make serve`, `make test` and .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
# the real-header check compiles kernels with `g++ -m32` (tests/metalium): that needs Debian's g++-multilib
echo '#include <cstdint>' | g++ -m32 -x c++ -fsyntax-only - >/dev/null 2>&1 || need_apt+=(g++-multilib)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)   # the dashboard's browser tests drive Debian's chromium (Playwright)
if [ "${TILEFARM_SYSTEM_PACKAGES:-1}" = 1 ] && [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing Debian packages: ${need_apt[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "bootstrap: please install: ${need_apt[*]} (tests need them)" >&2
  fi
fi

PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      PYTHON=$candidate; break
    fi
  done
fi
[ -n "$PYTHON" ] || { echo "bootstrap: Python 3.11 is required" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.tilefarm-installed
if [ -L .venv ]; then
  # a worktree sharing another checkout's environment: `pip install -e .` here would re-point that checkout's
  # editable install at this tree (its subprocesses would import this tree's code)
  echo "bootstrap: .venv links to $(readlink -f .venv), another checkout's environment: not installing into it" >&2
elif [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  # pip's own output (build warnings included) goes to a log: the console says what is happening, and where to look
  log=.venv/pip-install.log
  started=$(date +%s)
  echo "bootstrap: installing tilefarm and its pinned dependencies into .venv (a few minutes the first time; pip's log: $log)"
  if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -e ".[test]"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "bootstrap: pip install failed (the whole log: $log)" >&2
    exit 1
  fi
  touch "$stamp"
  echo "bootstrap: installed in $(( $(date +%s) - started )) s"
fi
