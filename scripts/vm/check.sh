#!/usr/bin/env bash
# Boots a small NUMA guest under QEMU's software CPU and checks, inside it, that placer
# finds and uses real memory tiers: a DRAM node with the CPUs, a CPU-less DRAM node (a
# far socket or expander) and an emulated NVDIMM onlined as a kmem-DAX node, with HMAT
# figures from the device models in configs/devices. The same placer binary runs in
# the guest (virtme-ng boots the Debian kernel over this machine's root filesystem).
#
#   scripts/vm/check.sh [--placer BIN] [--keep] [--record DIR] [--torch]
#
# --placer   the binary to check (default: build target/release/placer)
# --keep     keep the work directory (its path is printed)
# --record   copy the guest's outputs into DIR
# --torch    also run a torch training loop in the guest under placer's plans, with its
#            tensors' pages checked on their nodes (importing torch under the software
#            CPU takes about six minutes, so this is not part of the test suite)
#
# Exits 0 only when every check passes. Takes about two minutes after the first install
# (about nine with --torch).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
placer="" keep=0 record="" torch=0
while (($#)); do
    case "$1" in
        --placer) placer=$(realpath "$2"); shift 2 ;;
        --keep) keep=1; shift ;;
        --record) record=$(realpath -m "$2"); shift 2 ;;
        --torch) torch=1; shift ;;
        -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "vm-check: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

"$repo/scripts/vm/install.sh"
vm_dir=${PLACER_VM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/placer/vm}
if [ -z "$placer" ]; then
    (cd "$repo" && cargo build --release --quiet)
    placer=$repo/target/release/placer
fi
kernel=$(ls /boot/vmlinuz-* | sort -V | tail -1)

# The work directory is the only place the guest writes back to (--rwdir).
work=$(mktemp -d "${TMPDIR:-/tmp}/placer-vm.XXXXXX")
vng_pid=""
cleanup() {
    if [ -n "$vng_pid" ] && kill -0 "$vng_pid" 2>/dev/null; then
        kill -- "-$vng_pid" 2>/dev/null || kill "$vng_pid" 2>/dev/null || true
    fi
    if ((keep)); then echo "vm-check: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

truncate -s 1G "$work/nvdimm.img"
"$placer" zoo lenet-mnist --batch 4 -o "$work/model.json" >/dev/null
# The torch loop the guest runs under a plan: captured here (tracing under the guest's
# software CPU would take minutes), from the venv the torch tests use.
py="" guard=600
if ((torch)); then
    py=$("$repo/scripts/torch/venv.sh")
    "$py" "$repo/python/examples/small_cnn.py" "$work/cnn.json" >/dev/null
    # apply's op hook, compiled here into the directory the guest can write (guest.sh).
    TORCH_EXTENSIONS_DIR="$work/torch-ext" "$py" -c "from placer_torch import hook; hook.load()"
    guard=1200
fi

# Memory layout and HMAT figures, from the device models (GB/s → MB/s, the unit the
# kernel and QEMU use for HMAT; latencies in ns).
hmat=$(python3 - "$repo/configs/devices" <<'PY'
import json, sys
d = sys.argv[1]
pmem = json.load(open(f"{d}/optane-dcpmm.json"))
far = json.load(open(f"{d}/remote-socket.json"))
targets = [(0, pmem["reference_dram"]), (1, far["device"]), (2, pmem["device"])]
for node, fig in targets:
    print(f"-numa hmat-lb,initiator=0,target={node},hierarchy=memory,data-type=access-latency,latency={round(fig['latency_ns'])}")
    for kind in ("read", "write"):
        print(f"-numa hmat-lb,initiator=0,target={node},hierarchy=memory,data-type={kind}-bandwidth,bandwidth={round(fig[kind + '_gbps'] * 1000)}M")
PY
)
qemu_opts="-m 2G,slots=4,maxmem=8G -machine nvdimm=on,hmat=on
 -L $vm_dir/root/usr/share/seabios -L $vm_dir/root/usr/share/qemu -L /usr/share/seabios -L /usr/lib/ipxe/qemu
 -object memory-backend-ram,id=m0,size=1536M -object memory-backend-ram,id=m1,size=512M
 -numa node,nodeid=0,memdev=m0,cpus=0-1,initiator=0
 -numa node,nodeid=1,memdev=m1,initiator=0
 -numa node,nodeid=2,initiator=0
 -numa dist,src=0,dst=1,val=21 -numa dist,src=0,dst=2,val=17 -numa dist,src=1,dst=2,val=28
 $hmat
 -object memory-backend-file,id=nv,share=on,mem-path=$work/nvdimm.img,size=1G
 -device nvdimm,memdev=nv,node=2,label-size=128K"

echo "vm-check: booting $(basename "$kernel") under QEMU TCG (2 vCPUs; nodes: 0 DRAM + CPUs, 1 CPU-less DRAM, 2 NVDIMM)"
start=$(date +%s)
# vng runs QEMU as its child; setsid gives them a process group of their own, which
# cleanup stops by the id this script started, and nothing else.
PATH="$vm_dir/venv/bin:$vm_dir/root/usr/bin:$PATH" setsid timeout --kill-after=10 "$guard" \
    vng --run "$kernel" --disable-kvm --cpus 2 --busybox "$vm_dir/root/bin/busybox" \
    --qemu "$vm_dir/root/usr/bin/qemu-system-x86_64" --rwdir "$work" \
    --qemu-opts="$(echo $qemu_opts)" \
    -- "$repo/scripts/vm/guest.sh" "$placer" "$repo" "$work" "$py" >"$work/vng.log" 2>&1 &
vng_pid=$!
rc=0
wait "$vng_pid" || rc=$?
vng_pid=""
echo "vm-check: guest ran for $(($(date +%s) - start)) s (vng exit $rc)"
if [ ! -f "$work/out/finished" ]; then
    echo "vm-check: the guest did not finish; its console:" >&2
    tail -20 "$work/vng.log" >&2
    [ -f "$work/out/guest.log" ] && tail -20 "$work/out/guest.log" >&2
    exit 1
fi
if [ -n "$record" ]; then
    mkdir -p "$record"
    cp "$work"/out/*.txt "$work"/out/*.xml "$record/"
    echo "vm-check: guest outputs copied to $record"
fi
# Where the guest's time went, step by step (wall seconds under TCG).
[ -f "$work/out/times.txt" ] && echo "vm-check: step times (s): $(awk '{printf "%s %.1f  ", $1, $2 / 1000}' "$work/out/times.txt")"
python3 "$repo/scripts/vm/verify.py" "$work/out"
