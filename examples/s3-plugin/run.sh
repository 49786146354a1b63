#!/usr/bin/env bash
# Builds and tests the s3 plugin example against moto's S3 server on loopback: installs moto
# (PyPI, into a virtualenv under target/) when `moto_server` is not on PATH, then runs
# `cargo test` with moto required (a missing moto fails instead of skipping).
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v moto_server >/dev/null 2>&1; then
    venv="$PWD/target/moto-venv"
    if [ ! -x "$venv/bin/moto_server" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet 'moto[server]==5.2.1'
    fi
    export PATH="$venv/bin:$PATH"
fi
# Share the workspace's target directory: the lock file pins the same versions, so the
# dependencies hydra's own build compiled are reused.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/../../target}"
export HYDRA_S3_REQUIRE_MOTO=1
cargo test --locked "$@"
