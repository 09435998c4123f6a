#!/usr/bin/env bash
# Which XML inputs hwloc 2.9's own importer leaks memory on, with hwloc alone: a C
# program (hwloc-load.c: set the XML buffer, load, destroy) built with AddressSanitizer
# runs on every file given (by default the hwloc_xml fuzz corpus, fuzz/corpus/hwloc_xml)
# and counts the files with a leak report, printing the first one's allocation sites.
# This is why scripts/fuzz.sh does not look for leaks in the hwloc_xml target.
#   scripts/fuzz-hwloc/leaks.sh [FILE...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2046 # pkg-config's flags are separate words
gcc -fsanitize=address -g "$here/hwloc-load.c" -o "$work/hwloc-load" $(pkg-config --cflags --libs hwloc)
files=("$@")
if [ ${#files[@]} -eq 0 ]; then files=("$here"/../../fuzz/corpus/hwloc_xml/*); fi
n=0 leaking=0 first=""
for f in "${files[@]}"; do
    n=$((n + 1))
    out=$(ASAN_OPTIONS=detect_leaks=1 timeout 10 "$work/hwloc-load" "$f" 2>&1 || true)
    if [[ $out == *"detected memory leaks"* ]]; then
        leaking=$((leaking + 1))
        [ -n "$first" ] || first=$f
    fi
done
echo "hwloc $(pkg-config --modversion hwloc): $leaking of $n inputs leak in hwloc's own XML import"
if [ -n "$first" ]; then
    echo "first: $first"
    out=$(ASAN_OPTIONS=detect_leaks=1 "$work/hwloc-load" "$first" 2>&1 || true)
    grep -E '^    #1 ' <<<"$out" | sort | uniq -c | sort -rn | head -5
fi
