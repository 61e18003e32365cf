#!/usr/bin/env bash
# The whole test suite: installs what the tests need, then format, lint, the layout rules and
# every test. Tests that need root (cgroups, netns, tc) run when root and print why they skip
# otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cargo fmt --all -- --check
python3 scripts/check_layout.py
cargo clippy --profile ci --workspace --all-targets --quiet -- -D warnings
cargo test --workspace --profile ci
