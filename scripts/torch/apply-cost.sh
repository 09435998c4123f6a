#!/usr/bin/env bash
# What apply itself costs a torch step (python/bench/apply_cost.py), with the host's FMA
# peak before and after: every tensor in DRAM, torch against torch (the noise floor),
# a Python dispatch mode that only calls the op, and apply's C++ op hook.
#
# Usage: scripts/torch/apply-cost.sh [--model resnet18|bert-tiny|...] [--batch N] [--steps N]
exec "$(dirname "${BASH_SOURCE[0]}")/pybench.sh" apply_cost.py "$@"
