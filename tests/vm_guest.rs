//! The NUMA guest check (scripts/vm/check.sh) as part of the test suite: a QEMU guest
//! with a DRAM node, a CPU-less DRAM node and a kmem-DAX NVDIMM node runs this build's
//! `placer` binary, and every check in scripts/vm/verify.py must pass. It boots a real
//! kernel under QEMU's software CPU, so it takes one to three minutes; the packages it
//! needs come from scripts/install-deps.sh (scripts/vm/install.sh).

use std::path::Path;
use std::process::Command;

#[test]
#[allow(clippy::print_stdout)] // the check's own report is the test's evidence
fn placer_finds_binds_and_verifies_real_tiers_in_a_numa_guest() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(repo.join("scripts/vm/check.sh"))
        .args(["--placer", env!("CARGO_BIN_EXE_placer")])
        .output()
        .expect("scripts/vm/check.sh runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "the guest check failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("vm-check: all checks passed"), "{stdout}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
}
