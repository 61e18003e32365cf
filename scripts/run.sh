#!/usr/bin/env bash
# The main job: install what is missing, build triage, and run seed 001's experiment 1 (quick)
# on the real server beside nginx and Apache. Prints where the HTML report is.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cargo build --release --bin triage
exec ./target/release/triage lab pos --exp 1 --quick "$@"
