//! The arena's refusals, and each misuse of a copy: finished early, arenas dropped or
//! released mid-copy, a ticket from other arenas, copies that would race.

use super::*;
use crate::{Pool, PoolKind};
use std::time::{Duration, Instant};

fn arenas(sizes: &[u64]) -> (PoolSet, Arenas) {
    let mut pools =
        PoolSet::new(vec![Pool::new("dram", PoolKind::Dram, 1 << 30), Pool::new("slow", PoolKind::Dram, 1 << 30)]);
    let arenas = Arenas::reserve(&mut pools, sizes).expect("arena");
    (pools, arenas)
}

fn slot(pool: u16, offset: u64, len: u64) -> Slot {
    Slot { pool: PoolId(pool), offset, len }
}

#[test]
fn placing_over_a_live_range_is_refused_and_peaks_are_measured() {
    let (mut pools, mut a) = arenas(&[8192, 4096]);
    a.place(slot(0, 0, 4096)).expect("arena");
    assert!(a.place(slot(0, 2048, 4096)).is_err());
    assert!(a.place(slot(0, 4096, 8192)).is_err(), "past the end");
    a.place(slot(0, 4096, 4096)).expect("arena");
    a.release(slot(0, 0, 4096)).expect("arena");
    assert!(a.release(slot(0, 0, 4096)).is_err(), "nothing placed there any more");
    a.place(slot(0, 0, 1024)).expect("arena");
    assert_eq!(a.in_use(), vec![5120, 0]);
    assert_eq!(a.peaks(), vec![8192, 0]);
    assert_eq!(pools.pool(PoolId(0)).in_use(), 8192);
    a.release_all(&mut pools);
    assert_eq!(pools.pool(PoolId(0)).in_use(), 0);
}

#[test]
fn views_refuse_aliasing_and_unplaced_bytes() {
    let (_pools, mut a) = arenas(&[8192, 4096]);
    a.place(slot(0, 0, 4096)).expect("arena");
    a.place(slot(1, 0, 4096)).expect("arena");
    assert!(a.views(&[slot(0, 0, 64)], &[slot(0, 32, 64)]).is_err());
    assert!(a.views(&[], &[slot(0, 0, 64), slot(0, 0, 64)]).is_err());
    assert!(a.views(&[slot(0, 4096, 64)], &[]).is_err(), "not placed");
    let (r, w) = a.views(&[slot(0, 0, 64), slot(0, 0, 64)], &[slot(1, 0, 128)]).expect("arena");
    assert_eq!((r.len(), w.len(), w[0].len()), (2, 1, 128));
}

#[test]
fn a_copy_in_flight_fences_its_slots() {
    let (_pools, mut a) = arenas(&[8192, 4096]);
    a.place(slot(0, 0, 4096)).expect("arena");
    a.place(slot(1, 0, 4096)).expect("arena");
    a.views(&[], &[slot(0, 0, 4096)]).expect("arena").1[0].fill(7);
    let ticket = a.start_copy(slot(0, 0, 4096), slot(1, 0, 4096), 0.0).expect("arena");
    assert!(a.views(&[slot(1, 0, 8)], &[]).is_err(), "destination is being written");
    assert!(a.views(&[], &[slot(0, 0, 8)]).is_err(), "source is being read");
    assert!(a.views(&[slot(0, 0, 8)], &[]).is_ok(), "reading the source is fine");
    assert!(a.release(slot(1, 0, 4096)).is_err());
    a.finish_copy(ticket).expect("arena");
    assert!(a.views(&[slot(1, 0, 4096)], &[]).expect("arena").0[0].iter().all(|&b| b == 7));
    a.release(slot(1, 0, 4096)).expect("arena");
}

#[test]
fn a_copy_that_moves_no_bytes_still_waits_and_leaves_its_destination_as_it_was() {
    let (_pools, mut a) = arenas(&[1 << 20, 1 << 20]);
    a.place(slot(0, 0, 1 << 20)).expect("arena");
    a.place(slot(1, 0, 1 << 20)).expect("arena");
    a.views(&[], &[slot(0, 0, 1 << 20)]).expect("arena").1[0].fill(5);
    a.views(&[], &[slot(1, 0, 1 << 20)]).expect("arena").1[0].fill(9);
    a.set_copies_move_bytes(false);
    let start = Instant::now();
    let ticket = a.start_copy(slot(0, 0, 1 << 20), slot(1, 0, 1 << 20), SLOW_NS).expect("arena");
    a.finish_copy(ticket).expect("arena");
    assert!(start.elapsed() >= Duration::from_nanos(SLOW_NS as u64), "the emulated wait was skipped too");
    assert!(a.views(&[slot(1, 0, 1 << 20)], &[]).expect("arena").0[0].iter().all(|&b| b == 9));
    // Switched back on, the next copy moves its bytes again.
    a.set_copies_move_bytes(true);
    let ticket = a.start_copy(slot(0, 0, 1 << 20), slot(1, 0, 1 << 20), 0.0).expect("arena");
    a.finish_copy(ticket).expect("arena");
    assert!(a.views(&[slot(1, 0, 1 << 20)], &[]).expect("arena").0[0].iter().all(|&b| b == 5));
}

/// What the copy thread sleeps after each copy in the tests below: long enough that
/// a caller not waiting for it would be seen.
const SLOW_NS: f64 = 50e6;

#[test]
fn finishing_a_copy_early_waits_for_it() {
    let (_pools, mut a) = arenas(&[1 << 20, 1 << 20]);
    a.place(slot(0, 0, 1 << 20)).expect("arena");
    a.place(slot(1, 0, 1 << 20)).expect("arena");
    a.views(&[], &[slot(0, 0, 1 << 20)]).expect("arena").1[0].fill(3);
    let start = Instant::now();
    let ticket = a.start_copy(slot(0, 0, 1 << 20), slot(1, 0, 1 << 20), SLOW_NS).expect("arena");
    a.finish_copy(ticket).expect("arena");
    assert!(start.elapsed() >= Duration::from_nanos(SLOW_NS as u64), "finish returned before the copy ran");
    assert!(a.views(&[slot(1, 0, 1 << 20)], &[]).expect("arena").0[0].iter().all(|&b| b == 3));
}

#[test]
fn dropping_the_arenas_mid_copy_waits_for_the_copy() {
    let (_pools, mut a) = arenas(&[1 << 20, 1 << 20]);
    a.place(slot(0, 0, 1 << 20)).expect("arena");
    a.place(slot(1, 0, 1 << 20)).expect("arena");
    let start = Instant::now();
    let _ticket = a.start_copy(slot(0, 0, 1 << 20), slot(1, 0, 1 << 20), SLOW_NS).expect("arena");
    drop(a);
    assert!(start.elapsed() >= Duration::from_nanos(SLOW_NS as u64), "buffers freed under a running copy");
}

#[test]
fn releasing_the_arenas_mid_copy_waits_for_the_copy() {
    let (mut pools, mut a) = arenas(&[1 << 20, 1 << 20]);
    a.place(slot(0, 0, 1 << 20)).expect("arena");
    a.place(slot(1, 0, 1 << 20)).expect("arena");
    let start = Instant::now();
    let _ticket = a.start_copy(slot(0, 0, 1 << 20), slot(1, 0, 1 << 20), SLOW_NS).expect("arena");
    a.release_all(&mut pools);
    assert!(start.elapsed() >= Duration::from_nanos(SLOW_NS as u64), "buffers freed under a running copy");
    assert_eq!((pools.pool(PoolId(0)).in_use(), pools.pool(PoolId(1)).in_use()), (0, 0));
}

#[test]
fn a_ticket_from_other_arenas_is_refused_and_the_copy_stays_fenced() {
    let (_pools, mut a) = arenas(&[4096, 4096]);
    let (_other_pools, mut b) = arenas(&[4096, 4096]);
    for arenas in [&mut a, &mut b] {
        arenas.place(slot(0, 0, 4096)).expect("arena");
        arenas.place(slot(1, 0, 4096)).expect("arena");
    }
    let ticket = a.start_copy(slot(0, 0, 4096), slot(1, 0, 4096), 0.0).expect("arena");
    assert!(b.finish_copy(ticket).is_err(), "b started no copy");
    assert_eq!(a.copies_in_flight(), 1);
    assert!(a.views(&[slot(1, 0, 8)], &[]).is_err(), "a's copy was never finished");
    assert!(a.release(slot(1, 0, 4096)).is_err());
}

#[test]
fn copies_that_would_race_are_refused() {
    let (_pools, mut a) = arenas(&[16384, 8192]);
    a.place(slot(0, 0, 8192)).expect("arena");
    a.place(slot(0, 8192, 4096)).expect("arena");
    a.place(slot(1, 0, 8192)).expect("arena");
    assert!(a.start_copy(slot(0, 0, 4096), slot(1, 0, 8192), 0.0).is_err(), "lengths differ");
    assert!(a.start_copy(slot(0, 0, 4096), slot(0, 2048, 4096), 0.0).is_err(), "source and destination overlap");
    assert!(a.start_copy(slot(0, 12288, 4096), slot(1, 0, 4096), 0.0).is_err(), "source not placed");
    let ticket = a.start_copy(slot(0, 0, 4096), slot(1, 0, 4096), SLOW_NS).expect("arena");
    assert!(a.start_copy(slot(0, 8192, 4096), slot(1, 0, 4096), 0.0).is_err(), "destination written twice");
    assert!(a.start_copy(slot(0, 8192, 4096), slot(0, 0, 4096), 0.0).is_err(), "a source being read is written");
    assert!(a.start_copy(slot(1, 0, 4096), slot(0, 8192, 4096), 0.0).is_err(), "a destination is read unfinished");
    let second = a.start_copy(slot(0, 0, 4096), slot(0, 8192, 4096), 0.0).expect("two copies may read one source");
    a.finish_copy(ticket).expect("arena");
    a.finish_copy(second).expect("arena");
    assert_eq!(a.copies_in_flight(), 0);
}

#[test]
fn freeing_a_range_part_of_which_is_in_a_copy_is_refused() {
    let (_pools, mut a) = arenas(&[8192, 4096]);
    a.place(slot(0, 0, 8192)).expect("arena");
    a.place(slot(1, 0, 4096)).expect("arena");
    let ticket = a.start_copy(slot(0, 4096, 4096), slot(1, 0, 4096), 0.0).expect("arena");
    assert!(a.release(slot(0, 0, 64)).is_err(), "the range placed at 0 holds the copy's source");
    a.finish_copy(ticket).expect("arena");
    a.release(slot(0, 0, 64)).expect("arena");
}

#[test]
fn copies_finished_out_of_order_each_wait_for_their_own() {
    let (_pools, mut a) = arenas(&[3 * 4096, 3 * 4096]);
    let mut tickets = Vec::new();
    for i in 0..3u64 {
        let (from, to) = (slot(0, i * 4096, 4096), slot(1, i * 4096, 4096));
        a.place(from).expect("arena");
        a.place(to).expect("arena");
        a.views(&[], &[from]).expect("arena").1[0].fill(i as u8 + 1);
        tickets.push(a.start_copy(from, to, 1e6).expect("arena"));
    }
    for (i, ticket) in tickets.into_iter().enumerate().rev() {
        a.finish_copy(ticket).expect("arena");
        let to = slot(1, i as u64 * 4096, 4096);
        assert!(a.views(&[to], &[]).expect("arena").0[0].iter().all(|&b| b == i as u8 + 1));
    }
}

#[test]
fn arenas_can_move_to_another_thread() {
    fn send<T: Send>(_: &T) {}
    let (_pools, a) = arenas(&[4096]);
    send(&a);
}
