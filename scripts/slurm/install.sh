#!/usr/bin/env bash
# Installs Debian's Slurm (slurm-wlm: slurmctld, slurmd and the client tools) and munge,
# for the single-node cluster of scripts/slurm/test.sh. Idempotent: nothing is touched
# when both are present. Their package scripts start no daemons here (no init system);
# cluster.sh starts them, in a directory of its own.
set -euo pipefail
missing=()
for p in slurm-wlm munge; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
    exit 0
fi
echo "slurm/install: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -q >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
