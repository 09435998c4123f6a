#!/usr/bin/env bash
# Regenerate the hwloc XML test topologies in configs/topologies/ with
# hwloc's own command-line tools (hwloc 2.9, Debian package hwloc-nox).
#
#   scripts/make-topologies.sh                  # all synthetic hosts
#   scripts/make-topologies.sh --this-machine   # ... and this-machine.xml
#
# this-machine.xml records the host the script runs on, so it is rewritten
# only on request. Every file present is then loaded back with lstopo and
# hwloc-info (any warning is an error), its NUMA nodes are compared with
# what this script meant to build, and a one-line summary is printed.
# Where each figure comes from: configs/topologies/README.md.
#
# Conventions used in all files:
# - sizes are binary (192GiB = 192 * 2^30 bytes), as DIMM capacities are;
# - bandwidths are quoted in GB/s (10^9 bytes/s, as papers and datasheets
#   do) and stored in MiB/s, the unit hwloc uses; latencies in ns;
# - memory attributes use the initiator's cpuset (like hwloc's Linux
#   backend), so queries from a cpuset or from a Package both match;
# - Bandwidth and Latency are set for every (initiator, node) pair that has
#   a figure. hwloc defines them as the average of read and write; when a
#   source gives only one figure, that figure is used.
#   ReadBandwidth/WriteBandwidth/ReadLatency are set only where the source
#   gives them separately.
set -euo pipefail

usage() { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; }

this_machine=0
for arg in "$@"; do
    case "$arg" in
        --this-machine) this_machine=1 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "make-topologies: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
    esac
done

for tool in lstopo-no-graphics hwloc-annotate hwloc-info hwloc-calc python3 awk; do
    command -v "$tool" >/dev/null || { echo "make-topologies: '$tool' not found (apt-get install hwloc-nox)" >&2; exit 1; }
done

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$repo/configs/topologies"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ---------------------------------------------------------------- helpers

# GB/s -> MiB/s, rounded to an integer (hwloc values are integers).
mibps() { awk -v g="$1" 'BEGIN { printf "%.0f", g * 1e9 / 1048576 }'; }
# Average of a read and a write figure in GB/s -> MiB/s (hwloc "Bandwidth").
avg_mibps() { awk -v r="$1" -v w="$2" 'BEGIN { printf "%.0f", (r + w) / 2 * 1e9 / 1048576 }'; }
# Nanoseconds, rounded to an integer.
ns() { awk -v t="$1" 'BEGIN { printf "%.0f", t }'; }

# synth FILE DESCRIPTION: write a synthetic topology as (version 2) XML.
synth() { lstopo-no-graphics --input "$2" --of xml -f "$1"; }
# annotate FILE LOCATION ANNOTATION...: edit FILE in place.
annotate() { local f=$1; shift; hwloc-annotate "$f" "$f" "$@"; }
# cpuset FILE LOCATION: the cpuset of e.g. Package:0, used as initiator.
cpuset() { hwloc-calc --input "$1" "$2"; }
# memattr FILE NUMANODE INITIATOR NAME VALUE
memattr() { annotate "$1" "$2" memattr "$4" "$3" "$5"; }

# mark FILE: record provenance on the Machine object.
mark() { annotate "$1" root info GeneratedBy scripts/make-topologies.sh; }

# cpu_info FILE VENDOR FAMILY MODEL_NUMBER MODEL: on every Package, the CPU
# infos hwloc's Linux backend takes from /proc/cpuinfo (vendor_id, cpu family,
# model, model name), with its names and in its order. CPUStepping is left out.
cpu_info() {
    local f=$1 i n
    n=$(hwloc-calc --input "$f" --number-of Package all)
    for ((i = 0; i < n; i++)); do
        annotate "$f" "Package:$i" info CPUVendor "$2"
        annotate "$f" "Package:$i" info CPUFamilyNumber "$3"
        annotate "$f" "Package:$i" info CPUModelNumber "$4"
        annotate "$f" "Package:$i" info CPUModel "$5"
    done
}

# Figures (sources in configs/topologies/README.md).
# Yang et al., FAST 2020 (Cascade Lake, 6 DIMMs per socket).
dram_rd=105.6 dram_wr=76.8 dram_lat=101.5
optane_rd=37.6 optane_wr=12.5 optane_lat=305
# Intel MLC on Cascade Lake, remote (other socket) DRAM: read traffic, idle read latency.
remote_bw=34 remote_lat=140
# CXL example host: local DDR5 and a PCIe 5.0 x8 CXL memory expander.
cxl_host_dram_bw=113 cxl_host_dram_lat=81
cxl_bw=32 cxl_lat=170
# Xeon Max flat mode: illustrative round numbers, not measurements.
xmax_hbm_bw=1000 xmax_ddr_bw=250

# local_yang FILE NODE INITIATOR READ WRITE LATENCY: the full Yang et al. set.
local_yang() {
    local f=$1 node=$2 init=$3
    memattr "$f" "$node" "$init" ReadBandwidth "$(mibps "$4")"
    memattr "$f" "$node" "$init" WriteBandwidth "$(mibps "$5")"
    memattr "$f" "$node" "$init" Bandwidth "$(avg_mibps "$4" "$5")"
    memattr "$f" "$node" "$init" ReadLatency "$(ns "$6")"
    memattr "$f" "$node" "$init" Latency "$(ns "$6")"
}

# wrap_in_memcache SRC DST CACHE_BYTES: put every NUMA node below a
# memory-side cache (hwloc type MemCache). The synthetic syntax cannot
# express MemCache objects, so this edits the XML text: each
#   <object type="NUMANode" ...>...</object>
# becomes
#   <object type="MemCache" (same cpusets/nodesets) cache_size=...>
#     <object type="NUMANode" ...>...</object>
#   </object>
# Attributes follow what hwloc's Linux backend reports for Optane Memory
# Mode: depth 1, 64-byte lines, direct-mapped (1 way), unified.
wrap_in_memcache() {
    python3 - "$1" "$2" "$3" <<'EOF'
import re, sys
src, dst, cache_bytes = sys.argv[1:]
xml = open(src).read()
next_gp = max(int(g) for g in re.findall(r'gp_index="(\d+)"', xml)) + 1
numa = re.compile(r'^(?P<ind> *)(?P<elem><object type="NUMANode" (?P<attrs>[^>]*)>\n.*?^(?P=ind)</object>\n)',
                  re.M | re.S)

def wrap(m):
    global next_gp
    attrs = dict(re.findall(r'(\w+)="([^"]*)"', m.group('attrs')))
    sets = ' '.join(f'{k}="{attrs[k]}"' for k in ('cpuset', 'complete_cpuset', 'nodeset', 'complete_nodeset'))
    ind = m.group('ind')
    inner = ''.join('  ' + line + '\n' for line in (ind + m.group('elem')).splitlines())
    gp, next_gp = next_gp, next_gp + 1
    return (f'{ind}<object type="MemCache" {sets} gp_index="{gp}" cache_size="{cache_bytes}"'
            f' depth="1" cache_linesize="64" cache_associativity="1" cache_type="0">\n'
            f'{inner}{ind}</object>\n')

xml, n = numa.subn(wrap, xml)
if n == 0:
    sys.exit('wrap_in_memcache: no NUMANode found in ' + src)
open(dst, 'w').write(xml)
EOF
}

# ------------------------------------------------------------- topologies
# NUMANode:N below is hwloc's *logical* index (tree order); the comment
# above each synthetic string maps it to the OS index (P#).

# 1. Two-socket Cascade Lake with Optane DC PMem in App Direct mode, PMem
#    onlined as system RAM (KMEM): per socket a DRAM node with the CPUs and
#    a CPU-less NVM node. As on Linux, DRAM nodes are P#0-1, PMem P#2-3.
#    Logical: L#0=P#0 DRAM pkg0, L#1=P#2 NVM pkg0, L#2=P#1 DRAM pkg1, L#3=P#3 NVM pkg1.
make_two_socket_optane() {
    local f=$1 pkg0 pkg1
    synth "$f" "pack:2 [numa(memory=192GiB indexes=0,2,1,3)] [numa(memory=768GiB)] core:2 pu:2"
    annotate "$f" NUMANode:0 subtype DRAM
    annotate "$f" NUMANode:1 subtype NVM
    annotate "$f" NUMANode:2 subtype DRAM
    annotate "$f" NUMANode:3 subtype NVM
    pkg0=$(cpuset "$f" Package:0)
    pkg1=$(cpuset "$f" Package:1)
    local_yang "$f" NUMANode:0 "$pkg0" "$dram_rd" "$dram_wr" "$dram_lat"
    local_yang "$f" NUMANode:1 "$pkg0" "$optane_rd" "$optane_wr" "$optane_lat"
    local_yang "$f" NUMANode:2 "$pkg1" "$dram_rd" "$dram_wr" "$dram_lat"
    local_yang "$f" NUMANode:3 "$pkg1" "$optane_rd" "$optane_wr" "$optane_lat"
    # Remote DRAM (MLC: read-only traffic, idle read latency). No published
    # figure for remote Optane is used, so those pairs are left unset.
    local node init node_init
    for node_init in "NUMANode:2 $pkg0" "NUMANode:0 $pkg1"; do
        read -r node init <<<"$node_init"
        memattr "$f" "$node" "$init" ReadBandwidth "$(mibps "$remote_bw")"
        memattr "$f" "$node" "$init" Bandwidth "$(mibps "$remote_bw")"
        memattr "$f" "$node" "$init" ReadLatency "$(ns "$remote_lat")"
        memattr "$f" "$node" "$init" Latency "$(ns "$remote_lat")"
    done
    mark "$f"
}

# 2. Xeon Max (Sapphire Rapids + HBM2e), flat memory mode, SNC off:
#    per socket a DDR5 node with the CPUs and a CPU-less 64 GiB HBM node.
#    Logical: L#0=P#0 DRAM pkg0, L#1=P#2 HBM pkg0, L#2=P#1 DRAM pkg1, L#3=P#3 HBM pkg1.
make_xeon_max_flat() {
    local f=$1 pkg0 pkg1
    synth "$f" "pack:2 [numa(memory=256GiB indexes=0,2,1,3)] [numa(memory=64GiB)] core:2 pu:2"
    annotate "$f" NUMANode:0 subtype DRAM
    annotate "$f" NUMANode:1 subtype HBM
    annotate "$f" NUMANode:2 subtype DRAM
    annotate "$f" NUMANode:3 subtype HBM
    pkg0=$(cpuset "$f" Package:0)
    pkg1=$(cpuset "$f" Package:1)
    memattr "$f" NUMANode:0 "$pkg0" Bandwidth "$(mibps "$xmax_ddr_bw")"
    memattr "$f" NUMANode:1 "$pkg0" Bandwidth "$(mibps "$xmax_hbm_bw")"
    memattr "$f" NUMANode:2 "$pkg1" Bandwidth "$(mibps "$xmax_ddr_bw")"
    memattr "$f" NUMANode:3 "$pkg1" Bandwidth "$(mibps "$xmax_hbm_bw")"
    mark "$f"
}

# 3. One socket with local DDR5 plus a CXL Type-3 memory expander (PCIe 5.0 x8)
#    onlined as a CPU-less NUMA node.
#    Logical: L#0=P#0 DRAM, L#1=P#1 CXL-DRAM.
make_cxl_expander() {
    local f=$1 pkg0
    synth "$f" "pack:1 [numa(memory=128GiB)] [numa(memory=256GiB)] core:2 pu:2"
    annotate "$f" NUMANode:0 subtype DRAM
    annotate "$f" NUMANode:1 subtype CXL-DRAM
    pkg0=$(cpuset "$f" Package:0)
    memattr "$f" NUMANode:0 "$pkg0" Bandwidth "$(mibps "$cxl_host_dram_bw")"
    memattr "$f" NUMANode:0 "$pkg0" Latency "$(ns "$cxl_host_dram_lat")"
    memattr "$f" NUMANode:1 "$pkg0" Bandwidth "$(mibps "$cxl_bw")"
    memattr "$f" NUMANode:1 "$pkg0" Latency "$(ns "$cxl_lat")"
    mark "$f"
}

# 4. Two-socket Cascade Lake with Optane in Memory Mode (2LM): the OS sees
#    only the PMem capacity; the DRAM is a direct-mapped memory-side cache
#    in front of it (MemCache object, parent of the NUMA node). No subtype:
#    Linux reports this memory as ordinary RAM.
#    Logical: L#0=P#0 pkg0, L#1=P#1 pkg1.
make_two_level_memory() {
    local f=$1
    synth "$work/2lm-base.xml" "pack:2 [numa(memory=1536GiB)] core:2 pu:2"
    wrap_in_memcache "$work/2lm-base.xml" "$f" $((192 * 1024 * 1024 * 1024))
    mark "$f" # also re-exports the file through hwloc
}

# 6. One socket, three tiers: DRAM (with the CPUs), CXL-DRAM and NVM
#    (both CPU-less), local to the package.
#    Logical: L#0=P#0 DRAM, L#1=P#1 CXL-DRAM, L#2=P#2 NVM.
make_three_tier() {
    local f=$1 pkg0
    synth "$f" "pack:1 [numa(memory=96GiB)] [numa(memory=256GiB)] [numa(memory=512GiB)] core:2 pu:2"
    annotate "$f" NUMANode:0 subtype DRAM
    annotate "$f" NUMANode:1 subtype CXL-DRAM
    annotate "$f" NUMANode:2 subtype NVM
    pkg0=$(cpuset "$f" Package:0)
    local_yang "$f" NUMANode:0 "$pkg0" "$dram_rd" "$dram_wr" "$dram_lat"
    memattr "$f" NUMANode:1 "$pkg0" Bandwidth "$(mibps "$cxl_bw")"
    memattr "$f" NUMANode:1 "$pkg0" Latency "$(ns "$cxl_lat")"
    local_yang "$f" NUMANode:2 "$pkg0" "$optane_rd" "$optane_wr" "$optane_lat"
    mark "$f"
}

# 7. Two-socket Intel Xeon CPU Max 9462, flat memory mode, SNC4, as exported
#    by a hwloc older than 2.8: no NUMA subtype and no memory attributes, so
#    a tool must tell HBM from DDR5 by capacity, locality and CPU model. Each
#    socket has 4 sub-NUMA clusters (Groups); each cluster has a DDR5 node and
#    a 16 GiB HBM node (64 GiB per socket / 4), both attached to the Group, so
#    the HBM node has the cluster's CPUs in its cpuset. 2 cores x 2 PUs per
#    cluster: with 1 core, hwloc would merge the Group into the Core.
#    As on Linux, DDR nodes are P#0-7, HBM P#8-15; cluster c (0-7, package
#    c/4) has DDR P#c and HBM P#c+8.
#    Logical: L#2c=P#c DDR, L#2c+1=P#c+8 HBM (L#0=P#0, L#1=P#8, L#2=P#1, ...).
make_xeon_max_9462_snc4_flat() {
    local f=$1
    synth "$f" "pack:2 group:4 [numa(memory=126GiB indexes=0,8,1,9,2,10,3,11,4,12,5,13,6,14,7,15)] [numa(memory=16GiB)] core:2 pu:2"
    # Sapphire Rapids: family 6, model 143 (0x8F).
    cpu_info "$f" GenuineIntel 6 143 "Intel(R) Xeon(R) CPU Max 9462"
    mark "$f"
}

# 8. Intel Xeon Phi 7250 (Knights Landing), SNC4 cluster mode, flat memory
#    mode, without the subtypes hwloc's KNL support would set (see README):
#    one package, 4 clusters (Groups), each with a 24 GiB DDR4 node
#    (96 GiB / 4) and a 4 GiB MCDRAM node (16 GiB / 4), both attached to
#    the Group. As on Linux, DDR nodes are P#0-3, MCDRAM P#4-7; cluster c
#    has DDR P#c and MCDRAM P#c+4.
#    Logical: L#2c=P#c DDR, L#2c+1=P#c+4 MCDRAM (L#0=P#0, L#1=P#4, L#2=P#1, ...).
make_knl_snc4_flat() {
    local f=$1
    synth "$f" "pack:1 group:4 [numa(memory=24GiB indexes=0,4,1,5,2,6,3,7)] [numa(memory=4GiB)] core:2 pu:2"
    # Knights Landing: family 6, model 87 (0x57).
    cpu_info "$f" GenuineIntel 6 87 "Intel(R) Xeon Phi(TM) CPU 7250 @ 1.40GHz"
    mark "$f"
}

# 5. This machine, as hwloc sees it (only with --this-machine).
make_this_machine() { lstopo-no-graphics --of xml -f "$1"; }

# Expected NUMA nodes, in logical order: P#<os>:<subtype or ->:<GiB>:<parent type>.
declare -A expect=(
    [two-socket-optane.xml]="P#0:DRAM:192GiB:Package P#2:NVM:768GiB:Package P#1:DRAM:192GiB:Package P#3:NVM:768GiB:Package"
    [xeon-max-flat.xml]="P#0:DRAM:256GiB:Package P#2:HBM:64GiB:Package P#1:DRAM:256GiB:Package P#3:HBM:64GiB:Package"
    [cxl-expander.xml]="P#0:DRAM:128GiB:Package P#1:CXL-DRAM:256GiB:Package"
    [two-level-memory.xml]="P#0:-:1536GiB:MemCache P#1:-:1536GiB:MemCache"
    [three-tier.xml]="P#0:DRAM:96GiB:Package P#1:CXL-DRAM:256GiB:Package P#2:NVM:512GiB:Package"
    [xeon-max-9462-snc4-flat.xml]="P#0:-:126GiB:Group0 P#8:-:16GiB:Group0 P#1:-:126GiB:Group0 P#9:-:16GiB:Group0 P#2:-:126GiB:Group0 P#10:-:16GiB:Group0 P#3:-:126GiB:Group0 P#11:-:16GiB:Group0 P#4:-:126GiB:Group0 P#12:-:16GiB:Group0 P#5:-:126GiB:Group0 P#13:-:16GiB:Group0 P#6:-:126GiB:Group0 P#14:-:16GiB:Group0 P#7:-:126GiB:Group0 P#15:-:16GiB:Group0"
    [knl-snc4-flat.xml]="P#0:-:24GiB:Group0 P#4:-:4GiB:Group0 P#1:-:24GiB:Group0 P#5:-:4GiB:Group0 P#2:-:24GiB:Group0 P#6:-:4GiB:Group0 P#3:-:24GiB:Group0 P#7:-:4GiB:Group0"
)

generated=(two-socket-optane.xml xeon-max-flat.xml cxl-expander.xml two-level-memory.xml three-tier.xml
    xeon-max-9462-snc4-flat.xml knl-snc4-flat.xml)
for name in "${generated[@]}"; do
    fn="make_$(basename "$name" .xml | tr - _)"
    "$fn" "$work/$name"
done
if ((this_machine)); then
    make_this_machine "$work/this-machine.xml"
    generated+=(this-machine.xml)
fi
for name in "${generated[@]}"; do
    mv -f "$work/$name" "$out/$name"
done

# ------------------------------------------------------------ verification

# load_clean FILE CMD...: run CMD, fail if it fails or prints anything on stderr.
load_clean() {
    local f=$1 err
    shift
    if ! err=$(HWLOC_DEBUG_CHECK=1 "$@" 2>&1 >/dev/null) || [[ -n $err ]]; then
        echo "make-topologies: $(basename "$f"): '$*' failed or warned:" >&2
        echo "$err" >&2
        exit 1
    fi
}

# numa_nodes FILE: "P#<os>:<subtype>:<size>:<parent>" for each NUMA node.
numa_nodes() {
    local f=$1 n i desc os sub mem parent nodes=()
    n=$(hwloc-calc --input "$f" --number-of NUMANode all)
    for ((i = 0; i < n; i++)); do
        desc=$(hwloc-info --input "$f" "NUMANode:$i")
        os=$(sed -n 's/^ os index = //p' <<<"$desc")
        sub=$(sed -n 's/^ subtype = //p' <<<"$desc")
        mem=$(sed -n 's/^ local memory = //p' <<<"$desc")
        parent=$(hwloc-info --input "$f" -s --ancestors "NUMANode:$i" | sed -n '2s/:.*//p')
        nodes+=("P#$os:${sub:--}:$(awk -v b="$mem" 'BEGIN { g = b / 2^30; printf (g == int(g) ? "%dGiB" : "%.1fGiB"), g }'):$parent")
    done
    echo "${nodes[*]}"
}

# memattr_counts FILE: "Name=<number of (initiator, node) values>" per attribute.
memattr_counts() {
    lstopo-no-graphics --input "$1" --if xml --memattrs | awk '
        /^Memory attribute/ { name = $5; gsub(/[`'\'']/, "", name) }
        / from / { count[name]++ }
        END { for (n in count) printf "%s=%d ", n, count[n] }' | tr ' ' '\n' | sort | paste -sd' '
}

status=0
for f in "$out"/*.xml; do
    name=$(basename "$f")
    load_clean "$f" lstopo-no-graphics --input "$f" --if xml --of console
    load_clean "$f" hwloc-info --input "$f" --if xml
    nodes=$(numa_nodes "$f")
    if [[ -n ${expect[$name]:-} && $nodes != "${expect[$name]}" ]]; then
        echo "make-topologies: $name: NUMA nodes are '$nodes', expected '${expect[$name]}'" >&2
        status=1
    fi
    pkgs=$(hwloc-calc --input "$f" --number-of Package all)
    pus=$(hwloc-calc --input "$f" --number-of PU all)
    attrs=$(memattr_counts "$f")
    printf '%-27s %s pkg, %2s PU | NUMA %s | memattrs: %s\n' "$name" "$pkgs" "$pus" "$nodes" "${attrs:-none}"
done
exit "$status"
