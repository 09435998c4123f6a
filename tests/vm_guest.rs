//! The NUMA guest check (scripts/vm/check.sh) as part of the test suite: a QEMU guest
//! with a DRAM node, a CPU-less DRAM node and a kmem-DAX NVDIMM node runs this build's
//! `placer` binary, and every check in scripts/vm/verify.py must pass. It boots a real
//! kernel under QEMU's software CPU, so it takes one to three minutes; the packages it
//! needs come from scripts/install-deps.sh (scripts/vm/install.sh).

mod common;

#[test]
fn placer_finds_binds_and_verifies_real_tiers_in_a_numa_guest() {
    common::script_check("scripts/vm/check.sh", "vm-check: all checks passed");
}
