#!/bin/bash
# Runs inside the NUMA guest that scripts/vm/check.sh boots: onlines the emulated
# NVDIMM as a kmem-DAX node, then runs placer's checks and writes every output to
# OUT (a directory the host shares with the guest). Asserts nothing itself: the host
# reads OUT (scripts/vm/verify.py). Usage: guest.sh PLACER REPO WORK [PYTHON]
# (PYTHON: the torch venv's, from check.sh --torch; WORK/cnn.json, captured on the host,
# then runs under plans too)
set -u
placer=$1 repo=$2 work=$3 py=${4:-}
out=$work/out
mkdir -p "$out"
exec >"$out/guest.log" 2>&1
export PLACER_CACHE_DIR=$work/cache
# The slow tiers get the device models' timing; their data stays bound to their nodes.
emulate=optane-dcpmm@pmem,remote-socket@remote-dram
model=$work/model.json

# step NAME COMMAND...: runs COMMAND with its output in OUT/NAME.txt and records its
# exit status in OUT/status.txt and its wall time in OUT/times.txt (ms).
step() {
    local name=$1
    shift
    echo "+ $*"
    local start=$(date +%s%N)
    { echo "\$ $*"; "$@"; } >"$out/$name.txt" 2>&1
    local rc=$?
    echo "$name $rc" >>"$out/status.txt"
    echo "$name $((($(date +%s%N) - start) / 1000000))" >>"$out/times.txt"
    echo "  -> exit $rc"
}

# The NVDIMM's labels live in its image: write fresh ones, make one devdax namespace,
# and hand it to the kmem driver, which onlines it as a CPU-less NUMA node.
online_nvdimm() {
    modprobe -a nfit nd_pmem dax_pmem device_dax kmem &&
        ndctl disable-region region0 &&
        ndctl init-labels -f nmem0 &&
        ndctl enable-region region0 &&
        ndctl create-namespace --mode=devdax -r region0 &&
        daxctl reconfigure-device --mode=system-ram dax0.0
}

kernel_view() {
    uname -r
    numactl -H
    for tier in /sys/devices/virtual/memory_tiering/memory_tier*; do
        echo "$(basename "$tier"): nodes $(cat "$tier/nodelist")"
    done
    for node in /sys/devices/system/node/node[0-9]*; do
        dir=$node/access0/initiators
        [ -d "$dir" ] || continue
        echo "$(basename "$node") from $(ls "$dir" | grep node | tr '\n' ' '): read $(cat "$dir/read_bandwidth") MB/s, write $(cat "$dir/write_bandwidth") MB/s, read latency $(cat "$dir/read_latency") ns"
    done
    lstopo-no-graphics --memattrs
}

step setup online_nvdimm
step kernel kernel_view
step topo "$placer" topo
# The guest's own hwloc export, as a user would send it: read back as an XML topology,
# where no kernel tier is known and HMAT alone must tell node 1 from local DRAM.
step export lstopo-no-graphics --of xml "$out/export.xml"
step topo-export "$placer" topo --topology "$out/export.xml" --json
step topo-json "$placer" topo --json
# The probe checks where its buffers' pages land, not the guest's bandwidth (TCG's is
# no device's): 2 MiB buffers, 512 pages a pool.
step probe "$placer" topo --probe --probe-bytes 2MiB --emulate "$emulate"
step probe-json "$placer" topo --json --emulate "$emulate"
step run "$placer" run "$model" -n 1 --warmup 1 --place weight=pmem --place activation=remote-dram --emulate "$emulate"
step memkind "$placer" run "$model" -n 1 --warmup 1 --host "$repo/configs/hosts/memkind-dax-kmem.json" --place weight=pmem
# Under QEMU's software CPU no pass settles to --precision, and one step's timings are
# too noisy for the screening design's validation, which would then measure nearly
# every family in full (68 more passes, 77 of 91 s). The guest checks that profiling
# works on real tiers end to end (passes, checkpoint, labels, then solve and plan), not
# its precision, which the host's own tests check: one step per pass, the design's
# predictions taken as they are, and no calibrations after the passes (29 of the
# profile's 52 s here; solve says they are missing). The whole check must stay within
# two minutes on the slowest host of this kind (its guard is 600 s).
step profile "$placer" profile "$model" --checkpoint-dir "$work/checkpoints" --emulate "$emulate" \
    --warmup 0 --reps 1 --max-reps 1 --rounds 1 --design-tolerance 100 --skip-calibrations
step solve "$placer" solve --checkpoint-dir "$work/checkpoints" --budget 50% --time-limit 20 -o "$work/plan.json" --emulate "$emulate"
step plan "$placer" run "$model" --plan "$work/plan.json" -n 1 --warmup 1 --emulate "$emulate"
# With check.sh --torch: the small CNN's own torch loop, captured on the host, under two
# plans solved here on the real tiers: the ILP's at 25%, and the same with parameters and
# optimizer state pinned to the kmem-DAX node. Parameters and optimizer state are
# re-homed into their pools' memory and their pages asked of the kernel
# (scripts/vm/torch_step.py). The plans come from the cost model alone: profiling the
# CNN here took 77 s, and what is checked is where pages land. No --emulate: apply opens
# the pools as placer does by default.
if [ -n "$py" ]; then
    cnn=$work/cnn.json
    solve_cnn() {
        "$placer" solve "$cnn" --checkpoint-dir "$work/torch-checkpoints" --budget 25% --time-limit 20 "$@"
    }
    step torch-solve solve_cnn -o "$work/cnn-plan.json"
    step torch-solve-pmem solve_cnn -o "$work/cnn-pmem.json" --pin role=weight:pmem --pin role=optimizer_state:pmem
    # apply's op hook, built on the host (check.sh): compiling it under TCG would take
    # minutes, and only WORK is writable here.
    export TORCH_EXTENSIONS_DIR=$work/torch-ext
    step torch-apply "$py" "$repo/scripts/vm/torch_step.py" "$cnn" "$work/cnn-plan.json" "$work/cnn-pmem.json"
fi
echo done >"$out/finished"
