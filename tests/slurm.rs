//! The Slurm check (scripts/slurm/test.sh) as part of the test suite: a single-node
//! Slurm cluster from Debian's slurm-wlm and munge runs this build's `placer` as an
//! array of profile shards, a merge, a finish and a solve job; one shard's task is
//! killed mid-run and resubmitted. Every check in the script must pass. About a
//! minute, plus the packages' install the first time (scripts/slurm/install.sh).

mod common;

#[test]
fn a_sharded_profile_runs_merges_and_recovers_under_a_real_slurm() {
    common::script_check("scripts/slurm/test.sh", "slurm-test: all checks passed");
}
