#!/usr/bin/env bash
# Results born in their planned pool against results born in torch's memory, under one
# plan, in one process (python/bench/births.py), with the host's FMA peak before and
# after: step time against torch alone (twice: the noise floor), the DRAM peak apply
# tracked and how much of it the plan did not place.
#
# Usage: scripts/torch/births.sh [--model resnet18|resnet50|bert-tiny|...] [--batch N] [--budget B] [--steps N] [--release]
exec "$(dirname "${BASH_SOURCE[0]}")/pybench.sh" births.py "$@"
