#!/usr/bin/env bash
# torch's own step on three C heaps (glibc as found, its two thresholds fixed, and
# placer_torch's steady heap), each in a fresh process, interleaved in rounds, with the
# host's FMA peak before and after: step time, page faults and system time per step
# (python/bench/heap.py).
#
# Usage: scripts/torch/heap.sh [--model resnet50|resnet18|bert-base|...] [--batch N] [--steps N] [--rounds N]
exec "$(dirname "${BASH_SOURCE[0]}")/pybench.sh" heap.py "$@"
