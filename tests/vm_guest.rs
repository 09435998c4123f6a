//! The NUMA guest check (scripts/vm/check.sh) as part of the test suite: a QEMU guest
//! with a DRAM node, a CPU-less DRAM node and a kmem-DAX NVDIMM node runs this build's
//! `placer` binary, and every check in scripts/vm/verify.py must pass. It boots a real
//! kernel under QEMU's software CPU: about two minutes here, most of it in the guest
//! (scripts/vm/check.sh prints each step's time); the profile in the guest times one
//! step per pass and skips the calibrations, so that a slower host stays far inside the
//! script's 600 s guard. The packages it needs come from scripts/vm/install.sh.

mod common;

#[test]
fn placer_finds_binds_and_verifies_real_tiers_in_a_numa_guest() {
    common::script_check("scripts/vm/check.sh", "vm-check: all checks passed");
}
