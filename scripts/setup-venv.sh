#!/usr/bin/env bash
# Creates .venv/ in the repository root with the pinned Python tools the tests use
# (scripts/requirements.txt), idempotently, and prints the venv's python path on stdout.
# Progress and pip output go to stderr. Reinstalls only when requirements.txt changes.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
req="$root/scripts/requirements.txt"
py="$venv/bin/python"
stamp="$venv/.arenac-requirements"

if [[ ! -x "$py" ]]; then
    echo "setup-venv: creating $venv" >&2
    if ! python3 -m venv "$venv" >&2; then
        echo "setup-venv: 'python3 -m venv' failed; install Python's venv module (e.g. python3-venv)" >&2
        rm -rf "$venv"
        exit 1
    fi
fi

if [[ ! -f "$stamp" ]] || ! cmp -s "$req" "$stamp"; then
    echo "setup-venv: installing $(grep -cv '^\s*#' "$req") pinned packages" >&2
    "$py" -m pip install --quiet --disable-pip-version-check --requirement "$req" >&2
    cp "$req" "$stamp"
fi

echo "$py"
