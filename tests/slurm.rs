//! The Slurm check (scripts/slurm/test.sh) as part of the test suite: a single-node
//! Slurm cluster from Debian's slurm-wlm and munge runs this build's `placer` as an
//! array of profile shards, a merge, a finish and a solve job; one shard's task is
//! killed mid-run and resubmitted. Every check in the script must pass. About a
//! minute, plus the packages' install the first time (scripts/slurm/install.sh).

use std::path::Path;
use std::process::Command;

#[test]
#[allow(clippy::print_stdout)] // the check's own report is the test's evidence
fn a_sharded_profile_runs_merges_and_recovers_under_a_real_slurm() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(repo.join("scripts/slurm/test.sh"))
        .args(["--placer", env!("CARGO_BIN_EXE_placer")])
        .output()
        .expect("scripts/slurm/test.sh runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "the Slurm check failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("slurm-test: all checks passed"), "{stdout}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
}
