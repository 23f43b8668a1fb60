#!/usr/bin/env bash
# Encode CPU of tourpack's in-process FFmpeg encoder against the ffmpeg CLI,
# per format, plus the AAC coder comparison. Release build: the figures of a
# debug build say nothing about the product.
#   scripts/bench-encode.sh [--seconds 60] [--repetitions 5] [--no-coders]
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product tourpack-bench
exec .build/release/tourpack-bench encode "$@"
