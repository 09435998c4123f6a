//! `as_launcher`: the closure runs on a worker of the pool, pinned to the core it names,
//! and every worker has its own mask back afterwards.

use std::collections::BTreeSet;

fn this_thread() -> String {
    let status = std::fs::read_to_string("/proc/thread-self/status").expect("status");
    status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).expect("Cpus_allowed_list").trim().to_string()
}

#[test]
fn the_launcher_is_a_pinned_worker_and_unpinned_after() {
    let before: BTreeSet<String> = rayon::broadcast(|_| this_thread()).into_iter().collect();
    let (core, during, worker) = placer_exec::as_launcher(|core| (core, this_thread(), rayon::current_thread_index()));
    assert!(worker.is_some(), "the launcher is not a worker of the pool");
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    match core {
        Some(c) => assert_eq!(during, c.to_string(), "the launcher runs on core {c} alone"),
        None => assert_eq!(cores, 1, "not pinned with {cores} cores"),
    }
    let after: BTreeSet<String> = rayon::broadcast(|_| this_thread()).into_iter().collect();
    assert_eq!(after, before);
}
