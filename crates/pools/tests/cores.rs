//! The launcher pinned to its core and background copies kept off it, checked against
//! what the kernel reports for each thread (`Cpus_allowed_list` in /proc).

use placer_pools::{Arenas, Pinned, Pool, PoolId, PoolKind, PoolSet, Slot};
use std::collections::BTreeSet;

/// The cores a thread may run on, as the kernel lists them ("0-3,6").
fn allowed(status_path: &str) -> BTreeSet<usize> {
    let status = std::fs::read_to_string(status_path).expect("status");
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).expect("Cpus_allowed_list").trim();
    let mut cores = BTreeSet::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cores.extend(a.parse::<usize>().expect("core")..=b.parse().expect("core")),
            None => {
                cores.insert(part.parse().expect("core"));
            }
        }
    }
    cores
}

fn this_thread() -> BTreeSet<usize> {
    allowed("/proc/thread-self/status")
}

/// The arenas' copy thread: the one thread of this process with its name (this file's
/// tests each start their own process, and only one makes arenas).
fn copy_thread() -> BTreeSet<usize> {
    let task = std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .flatten()
        .find(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "placer-copy"));
    allowed(task.expect("the copy thread").path().join("status").to_str().expect("path"))
}

#[test]
fn a_pinned_launcher_runs_on_one_core_and_gets_its_mask_back() {
    let before = this_thread();
    match Pinned::here() {
        Some(pinned) => {
            assert!(before.len() >= 2, "pinned although the thread has one core: {before:?}");
            assert!(before.contains(&pinned.cpu()));
            assert_eq!(this_thread(), BTreeSet::from([pinned.cpu()]));
            drop(pinned);
            assert_eq!(this_thread(), before);
        }
        None => assert_eq!(before.len(), 1, "not pinned, with cores {before:?}"),
    }
}

#[test]
fn copies_keep_off_the_launchers_core_and_come_back() {
    let mut pools = PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 20)]);
    let mut arenas = Arenas::reserve(&mut pools, &[8192]).expect("reserved");
    let from = Slot { pool: PoolId(0), offset: 0, len: 4096 };
    let to = Slot { pool: PoolId(0), offset: 4096, len: 4096 };
    arenas.place(from).expect("placed");
    arenas.place(to).expect("placed");
    let copy = |arenas: &mut Arenas| {
        let ticket = arenas.start_copy(from, to, 0.0).expect("started");
        arenas.finish_copy(ticket).expect("finished");
    };
    copy(&mut arenas);
    let all = copy_thread();
    let launcher = *all.first().expect("a core");
    arenas.keep_copies_off(Some(launcher));
    copy(&mut arenas);
    let mut others = all.clone();
    others.remove(&launcher);
    if others.is_empty() {
        // One core: the copy thread cannot give up its only one.
        assert_eq!(copy_thread(), all);
    } else {
        assert_eq!(copy_thread(), others);
    }
    arenas.keep_copies_off(None);
    copy(&mut arenas);
    assert_eq!(copy_thread(), all);
    arenas.release_all(&mut pools);

    // Arenas made on a launcher pinned to its core (as the profile's interference
    // calibration made its copy thread): the copy thread inherits that one core, and
    // must still take the process's cores, or it would copy on the launcher's.
    std::thread::scope(|s| {
        s.spawn(|| {
            let pinned = Pinned::here();
            let mut arenas = Arenas::reserve(&mut pools, &[8192]).expect("reserved");
            arenas.place(from).expect("placed");
            arenas.place(to).expect("placed");
            arenas.keep_copies_off(pinned.as_ref().map(Pinned::cpu));
            copy(&mut arenas);
            match &pinned {
                Some(p) => assert_eq!(copy_thread(), all.iter().copied().filter(|&c| c != p.cpu()).collect()),
                None => assert_eq!(copy_thread(), all),
            }
            arenas.release_all(&mut pools);
        });
    });
}
