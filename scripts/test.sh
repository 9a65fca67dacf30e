#!/usr/bin/env bash
# The test command: installs dependencies, builds, and runs every test
# (lit suite, GoogleTest unit tests through ctest, the references' pytest,
# the installed tree and the embedding examples).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/build.sh
cmake --build build --target check-megatron
ctest --test-dir build --output-on-failure -j "$(nproc)"
python3 -m pytest -q -p no:cacheprovider utils/gpt2_reference utils/llama_reference
scripts/check-install.sh
scripts/test-sanitize.sh
