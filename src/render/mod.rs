//! Terminal rendering shared by more than one verb.

pub mod plans;
pub mod progress;

/// Where the kernel put a pool's pages, as `move_pages` reported them after the first
/// touch: `; pages verified on node 2: 67 of 67`. Empty for a pool whose pages are not
/// checked (heap, file-backed memkind).
pub fn pages(pool: &placer_pools::Pool) -> String {
    pages_on(&pool.page_tally(), pool.backend.checked_nodes())
}

/// [`pages`] for a tally and the nodes it was checked against.
pub fn pages_on(t: &placer_pools::PageTally, nodes: &[u32]) -> String {
    if t.checked == 0 {
        return String::new();
    }
    let mut text =
        format!("; pages verified on node {}: {} of {}", placer_pools::node_list(nodes), t.verified(), t.checked);
    if t.elsewhere > 0 {
        text.push_str(&format!(", {} ON ANOTHER NODE", t.elsewhere));
    }
    if t.unknown > 0 {
        text.push_str(&format!(", {} not reported by the kernel", t.unknown));
    }
    text
}
