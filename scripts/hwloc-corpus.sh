#!/usr/bin/env bash
# Rebuilds the corpus of real hwloc topology exports in crates/host/tests/data/hwloc-corpus/
# from hwloc's own source tree (its tests/hwloc directory), so that placer is tested on
# files nobody on this team wrote.
#
#   scripts/hwloc-corpus.sh HWLOC_GIT_DIR [REF]
#
# HWLOC_GIT_DIR  a clone of hwloc's repository (a bare git directory is fine)
# REF            the branch or tag to take the files from (default: v2.x, the newest
#                hwloc 2 line, whose exports are XML format 2.0 or 1.x)
#
# What it takes:
# - xml/*.xml: hwloc's XML test exports, format 2.0 and 1.x, as they are;
# - x86/*.output and x86+linux/*.output: exports of real machines made by hwloc's x86
#   backend from CPUID dumps, alone or with a sysfs tree (format 2.0), renamed .xml;
# - linux/*.tar.bz2: snapshots of real Linux sysfs trees, turned
#   into exports here with this machine's lstopo-no-graphics (Debian's hwloc 2.9):
#   HWLOC_FSROOT=<snapshot> HWLOC_COMPONENTS=linux,stop lstopo-no-graphics --of xml.
# Each file is then loaded back with lstopo-no-graphics, and SOURCES.md records where
# every file came from, at which commit, and whether hwloc 2.9 loads it.
set -euo pipefail

if (($# < 1)) || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit $((($# < 1) ? 2 : 0))
fi
git_dir=$1 ref=${2:-v2.x}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$repo/crates/host/tests/data/hwloc-corpus
command -v lstopo-no-graphics >/dev/null || { echo "hwloc-corpus: lstopo-no-graphics not found (apt-get install hwloc-nox)" >&2; exit 1; }
g() { git --git-dir "$git_dir" "$@"; }
if [ -d "$git_dir/.git" ]; then git_dir=$git_dir/.git; fi
commit=$(g rev-parse "$ref^{commit}")
hwloc_version=$(lstopo-no-graphics --version | awk '{print $NF}')

rm -rf "$out"
mkdir -p "$out/xml" "$out/x86" "$out/linux"
work=$(mktemp -d "${TMPDIR:-/tmp}/hwloc-corpus.XXXXXX")
trap 'rm -rf "$work"' EXIT
sources=$work/sources.md

# origin DIR/NAME FROM: one row of SOURCES.md, with what hwloc 2.9 makes of the file.
origin() {
    local file=$1 from=$2 loads=yes
    if ! lstopo-no-graphics --input "$out/$file" --of xml >/dev/null 2>"$work/err"; then loads="no: $(head -c 120 "$work/err" | tr '\n|' '  ')"; fi
    echo "| \`$file\` | \`$from\` | $loads |" >>"$sources"
}

for path in $(g ls-tree -r --name-only "$commit" tests/hwloc/xml | grep '\.xml$'); do
    name=$(basename "$path")
    g show "$commit:$path" >"$out/xml/$name"
    origin "xml/$name" "$path"
done

for path in $(g ls-tree -r --name-only "$commit" tests/hwloc/x86 tests/hwloc/x86+linux | grep '\.output$'); do
    name=$(basename "$path" .output).xml
    g show "$commit:$path" >"$out/x86/$name"
    # A few expected outputs are lstopo's console text, not exports.
    if ! head -c 5 "$out/x86/$name" | grep -q '^<?xml'; then rm "$out/x86/$name"; continue; fi
    origin "x86/$name" "$path"
done

# (linux/allowed/ holds a partial tree that hwloc's tests combine with an XML; it is not
# an export on its own.)
for path in $(g ls-tree --name-only "$commit" tests/hwloc/linux/ | grep '\.tar\.bz2$'); do
    base=$(basename "$path" .tar.bz2)
    dir=$work/fsroot-$base
    mkdir -p "$dir"
    g show "$commit:$path" | (cd "$dir" && tar xjf -)
    # A snapshot is one directory holding the sysfs/proc tree.
    root=$(find "$dir" -mindepth 1 -maxdepth 1 -type d | head -1)
    name=$base.xml
    (
        # Some snapshots carry their own settings (e.g. where the dumped DMI data lives).
        envfile=${path%.tar.bz2}.env
        if g cat-file -e "$commit:$envfile" 2>/dev/null; then eval "$(g show "$commit:$envfile")"; fi
        HWLOC_FSROOT=$root HWLOC_COMPONENTS=linux,stop HWLOC_DUMPED_HWDATA_DIR=/var/run/hwloc \
            lstopo-no-graphics --no-io --of xml >"$out/linux/$name" 2>/dev/null
    ) || { echo "hwloc-corpus: hwloc could not read $path; skipped" >&2; rm -f "$out/linux/$name"; continue; }
    origin "linux/$name" "$path"
done

{
    echo "# Real hwloc topology exports"
    echo
    echo "Taken from hwloc's own test suite (https://github.com/open-mpi/hwloc, BSD-3-Clause,"
    echo "copyright the hwloc authors) at \`$ref\`, commit \`$commit\`, by"
    echo "\`scripts/hwloc-corpus.sh\`. \`xml/\` and \`x86/\` are hwloc's files as they are"
    echo "(\`x86/\` renamed from \`.output\`); \`linux/\` holds exports made here from hwloc's"
    echo "sysfs snapshots with hwloc $hwloc_version (\`HWLOC_FSROOT=... HWLOC_COMPONENTS=linux,stop"
    echo "lstopo-no-graphics --no-io --of xml\`). The last column says whether hwloc $hwloc_version"
    echo "itself loads the file. \`expected.txt\` is the pool layout placer must give each one"
    echo "(crates/host/tests/corpus.rs)."
    echo
    echo "| file | from | hwloc $hwloc_version loads it |"
    echo "|---|---|---|"
    cat "$sources"
} >"$out/SOURCES.md"
echo "hwloc-corpus: $(grep -c '^| `' "$out/SOURCES.md") files in $out ($(grep -c '| yes |$' "$out/SOURCES.md") load in hwloc $hwloc_version)"
