//! Why an existing checkpoint cannot be resumed by this run, or two shards cannot be
//! merged, in words: each part of the header that differs, and each of its fields with
//! both values.

use super::{DesignSpec, Mode, PoolInfo, ProfileHeader, Protocol, Shard};

/// What the two headers compared are called in the words: `rounds 1 {a}, 3 {b}`.
#[derive(Debug, Clone, Copy)]
pub struct Sides<'a> {
    pub a: &'a str,
    pub b: &'a str,
}

/// A checkpoint against the run that would resume it.
pub const RESUME: Sides<'static> = Sides { a: "in the checkpoint", b: "now" };

/// The first `n` characters: a checkpoint's header comes from a file and may be short.
fn prefix(text: &str, n: usize) -> &str {
    text.char_indices().nth(n).map_or(text, |(i, _)| &text[..i])
}

/// `NAME OLD in the checkpoint, NEW now` (with `sides`' words) into `out` when `old` and
/// `new` differ, each value shown by `show`.
fn differs<T: PartialEq + ?Sized>(
    out: &mut Vec<String>,
    sides: Sides<'_>,
    name: &str,
    old: &T,
    new: &T,
    show: impl Fn(&T) -> String,
) {
    if old != new {
        let space = if name.is_empty() { "" } else { " " };
        out.push(format!("{name}{space}{} {}, {} {}", show(old), sides.a, show(new), sides.b));
    }
}

/// `what: field; field` into `parts` when any field of `what` differs.
fn part(parts: &mut Vec<String>, what: &str, fields: Vec<String>) {
    if !fields.is_empty() {
        parts.push(format!("{what}: {}", fields.join("; ")));
    }
}

fn show<T: ToString + ?Sized>(value: &T) -> String {
    value.to_string()
}

/// `dram, pmem and cxl`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => "none".to_string(),
        [one] => one.clone(),
        [head @ .., last] => format!("{} and {last}", head.join(", ")),
    }
}

fn emulation(e: &Option<String>) -> String {
    e.as_ref().map_or_else(|| "not emulated".to_string(), |e| format!("EMULATED as {e}"))
}

/// The pools' differences: the list when pools were added, removed or renamed, else
/// each pool's kind and emulation.
fn pool_fields(sides: Sides<'_>, old: &[PoolInfo], new: &[PoolInfo]) -> Vec<String> {
    let mut f = Vec::new();
    if old.len() != new.len() || old.iter().zip(new).any(|(a, b)| a.name != b.name) {
        let list = |pools: &[PoolInfo]| {
            let named: Vec<String> = pools
                .iter()
                .map(|p| match &p.emulated_as {
                    Some(e) => format!("{} (EMULATED as {e})", p.name),
                    None => p.name.clone(),
                })
                .collect();
            and_list(&named)
        };
        differs(&mut f, sides, "", old, new, list);
        return f;
    }
    for (a, b) in old.iter().zip(new) {
        let PoolInfo { name, kind, emulated_as } = a;
        differs(&mut f, sides, &format!("{name} kind"), kind, &b.kind, show);
        differs(&mut f, sides, name, emulated_as, &b.emulated_as, emulation);
    }
    f
}

fn protocol_fields(sides: Sides<'_>, old: &Protocol, new: &Protocol) -> Vec<String> {
    // Destructured whole, so a field added to the protocol cannot be left out here.
    let Protocol { warmup, reps, max_reps, precision, seed, rounds, round_noise, steps } = old;
    let mut f = Vec::new();
    differs(&mut f, sides, "warm-up steps", warmup, &new.warmup, show);
    differs(&mut f, sides, "reps", reps, &new.reps, show);
    differs(&mut f, sides, "max reps", max_reps, &new.max_reps, show);
    differs(&mut f, sides, "precision", precision, &new.precision, show);
    differs(&mut f, sides, "data seed", seed, &new.seed, show);
    differs(&mut f, sides, "rounds", rounds, &new.rounds, show);
    differs(&mut f, sides, "round noise", round_noise, &new.round_noise, show);
    differs(&mut f, sides, "steps", steps, &new.steps, |s| s.as_str().to_string());
    f
}

fn mode_fields(sides: Sides<'_>, old: &Mode, new: &Mode) -> Vec<String> {
    let Mode { max_simultaneous, two_hop, sample, max_configs, negligible, design } = old;
    let DesignSpec { design: kind, tolerance, min_error_ns, seed } = design;
    let on_off = |on: &bool| if *on { "on" } else { "off" }.to_string();
    let sampled =
        |s: &Option<(u32, u64)>| s.map_or_else(|| "none".to_string(), |(k, seed)| format!("{k} (seed {seed})"));
    let us = |ns: &f64| format!("{} µs", ns / 1e3);
    let mut f = Vec::new();
    differs(&mut f, sides, "max simultaneous", max_simultaneous, &new.max_simultaneous, show);
    differs(&mut f, sides, "2-hop conflicts", two_hop, &new.two_hop, on_off);
    differs(&mut f, sides, "sample", sample, &new.sample, sampled);
    differs(&mut f, sides, "max configs", max_configs, &new.max_configs, show);
    differs(&mut f, sides, "negligible share", negligible, &new.negligible, show);
    differs(&mut f, sides, "design", kind, &new.design.design, |d| d.as_str().to_string());
    differs(&mut f, sides, "design tolerance", tolerance, &new.design.tolerance, show);
    differs(&mut f, sides, "design error floor", min_error_ns, &new.design.min_error_ns, us);
    differs(&mut f, sides, "design seed", seed, &new.design.seed, show);
    f
}

/// Every setting of an existing checkpoint (`old`) that differs from this run's
/// (`new`), in words, on one line: each part of the header that differs, then each of
/// its fields with both values (`protocol differs: rounds 1 in the checkpoint, 3 now`),
/// `; `-separated. `None` when the checkpoint can be resumed. The pass plan's digest
/// is named only when nothing it is made from (model, pools, mode, pins) differs.
pub fn mismatch(old: &ProfileHeader, new: &ProfileHeader) -> Option<String> {
    differences(old, new, RESUME)
}

/// [`mismatch`] in `sides`' words: every field of `old` that differs from `new`, or
/// `None`.
pub fn differences(old: &ProfileHeader, new: &ProfileHeader, sides: Sides<'_>) -> Option<String> {
    // Destructured whole, so a field added to the header cannot be left out here.
    let ProfileHeader {
        format,
        version,
        model_name,
        model_hash,
        // Where the model file is now is not the checkpoint's identity (a resumed run
        // records it), and `emulated` follows from the pools.
        model_source: _,
        host_fingerprint,
        pools,
        emulated: _,
        protocol,
        mode,
        pins,
        plan_hash,
        shard,
        // Follows from the model and the host's memory, which the hash and the
        // fingerprint already compare.
        footprint_fits: _,
        cache_bytes,
    } = old;
    let mut parts = Vec::new();
    let mut f = Vec::new();
    differs(&mut f, sides, "format", format, &new.format, show);
    differs(&mut f, sides, "version", version, &new.version, show);
    part(&mut parts, "checkpoint format differs", f);
    if model_hash != &new.model_hash {
        let model = |name: &str, hash: &str| format!("{name} (hash {})", prefix(hash, 12));
        parts.push(format!(
            "model differs: {} {}, {} {}",
            model(model_name, model_hash),
            sides.a,
            model(&new.model_name, &new.model_hash),
            sides.b
        ));
    }
    let mut f = Vec::new();
    differs(&mut f, sides, "fingerprint", host_fingerprint, &new.host_fingerprint, show);
    differs(&mut f, sides, "last-level cache", cache_bytes, &new.cache_bytes, |b: &Option<u64>| {
        b.map_or_else(|| "none".to_string(), |b| format!("{} KiB", b >> 10))
    });
    part(&mut parts, "host differs", f);
    part(&mut parts, "pools differ", pool_fields(sides, pools, &new.pools));
    part(&mut parts, "protocol differs", protocol_fields(sides, protocol, &new.protocol));
    part(&mut parts, "mode differs", mode_fields(sides, mode, &new.mode));
    let mut f = Vec::new();
    differs(&mut f, sides, "", pins.as_slice(), new.pins.as_slice(), |p| {
        if p.is_empty() { "none".into() } else { p.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ") }
    });
    part(&mut parts, "pins differ", f);
    let planned_alike =
        model_hash == &new.model_hash && pools.len() == new.pools.len() && mode == &new.mode && pins == &new.pins;
    if planned_alike && plan_hash != &new.plan_hash {
        parts.push(format!(
            "pass plan differs: digest {} {}, {} {} (the same settings planned other passes)",
            prefix(plan_hash, 12),
            sides.a,
            prefix(&new.plan_hash, 12),
            sides.b
        ));
    }
    let mut f = Vec::new();
    differs(&mut f, sides, "", shard, &new.shard, |s: &Option<Shard>| {
        s.map_or_else(|| "none (the whole plan)".to_string(), |s| s.label())
    });
    part(&mut parts, "shard differs", f);
    (!parts.is_empty()).then(|| parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Design;
    use crate::profiler::ProfileOptions;
    use crate::record::{FORMAT_NAME, FORMAT_VERSION, Steps};

    /// A header as `placer pipeline` would write it on a host with an emulated pmem pool.
    fn header() -> ProfileHeader {
        let options = ProfileOptions::pipeline(3, 1);
        let pool = |name: &str, emulated_as: Option<&str>| PoolInfo {
            name: name.into(),
            kind: placer_pools::PoolKind::parse(name).expect("a pool kind"),
            emulated_as: emulated_as.map(str::to_string),
        };
        ProfileHeader {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            model_name: "mlp-b4".into(),
            model_hash: "0123456789abcdef0123".into(),
            model_source: Some("/models/mlp-b4.json".into()),
            host_fingerprint: "00112233aabbccdd".into(),
            pools: vec![pool("dram", None), pool("pmem", Some("optane-dcpmm:additive"))],
            emulated: true,
            protocol: options.protocol,
            mode: options.mode,
            pins: Vec::new(),
            plan_hash: "feedfacecafe00001111".into(),
            shard: None,
            footprint_fits: true,
            cache_bytes: None,
        }
    }

    /// What `mismatch` says of the checkpoint's header against this run's, made from
    /// it by `change`.
    fn said(change: impl FnOnce(&mut ProfileHeader)) -> Option<String> {
        let mut now = header();
        change(&mut now);
        mismatch(&header(), &now)
    }

    #[test]
    fn the_same_settings_are_no_mismatch() {
        assert_eq!(said(|_| {}), None);
        // Where the model file is now, and the model's name, are not its identity.
        assert_eq!(
            said(|h| {
                h.model_source = None;
                h.model_name = "renamed".into();
            }),
            None
        );
    }

    #[test]
    fn every_field_is_named_with_both_values() {
        type Change = fn(&mut ProfileHeader);
        let cases: Vec<(Change, String)> = vec![
            (
                |h| h.version += 1,
                format!(
                    "checkpoint format differs: version {FORMAT_VERSION} in the checkpoint, {} now",
                    FORMAT_VERSION + 1
                ),
            ),
            (
                |h| h.format = "other".into(),
                "checkpoint format differs: format placer-profile in the checkpoint, other now".into(),
            ),
            (
                |h| {
                    h.model_name = "mlp-b8".into();
                    h.model_hash = "9876543210abcdef".into();
                },
                "model differs: mlp-b4 (hash 0123456789ab) in the checkpoint, mlp-b8 (hash 9876543210ab) now".into(),
            ),
            (
                |h| h.host_fingerprint = "99887766ffeeddcc".into(),
                "host differs: fingerprint 00112233aabbccdd in the checkpoint, 99887766ffeeddcc now".into(),
            ),
            (
                |h| h.pools[1].emulated_as = Some("optane-dcpmm:overlap".into()),
                "pools differ: pmem EMULATED as optane-dcpmm:additive in the checkpoint, EMULATED as \
                 optane-dcpmm:overlap now"
                    .into(),
            ),
            (
                |h| h.pools[1].emulated_as = None,
                "pools differ: pmem EMULATED as optane-dcpmm:additive in the checkpoint, not emulated now".into(),
            ),
            (
                |h| h.pools[1].kind = placer_pools::PoolKind::Cxl,
                "pools differ: pmem kind pmem in the checkpoint, cxl now".into(),
            ),
            (
                |h| h.pools.truncate(1),
                "pools differ: dram and pmem (EMULATED as optane-dcpmm:additive) in the checkpoint, dram now".into(),
            ),
            (
                |h| h.pools.push(PoolInfo { name: "hbm".into(), kind: placer_pools::PoolKind::Hbm, emulated_as: None }),
                "pools differ: dram and pmem (EMULATED as optane-dcpmm:additive) in the checkpoint, dram, pmem \
                 (EMULATED as optane-dcpmm:additive) and hbm now"
                    .into(),
            ),
            (
                |h| h.cache_bytes = Some(32 << 20),
                "host differs: last-level cache none in the checkpoint, 32768 KiB now".into(),
            ),
            (|h| h.protocol.warmup = 2, "protocol differs: warm-up steps 1 in the checkpoint, 2 now".into()),
            (|h| h.protocol.reps = 4, "protocol differs: reps 3 in the checkpoint, 4 now".into()),
            (|h| h.protocol.max_reps = 12, "protocol differs: max reps 9 in the checkpoint, 12 now".into()),
            (|h| h.protocol.precision = 0.05, "protocol differs: precision 0.02 in the checkpoint, 0.05 now".into()),
            (|h| h.protocol.seed = 7, "protocol differs: data seed 24301 in the checkpoint, 7 now".into()),
            (|h| h.protocol.rounds = 3, "protocol differs: rounds 1 in the checkpoint, 3 now".into()),
            (|h| h.protocol.round_noise = 0.0, "protocol differs: round noise 0.02 in the checkpoint, 0 now".into()),
            (|h| h.protocol.steps = Steps::Whole, "protocol differs: steps picked in the checkpoint, whole now".into()),
            (|h| h.mode.max_simultaneous = 1, "mode differs: max simultaneous 64 in the checkpoint, 1 now".into()),
            (|h| h.mode.two_hop = true, "mode differs: 2-hop conflicts off in the checkpoint, on now".into()),
            (|h| h.mode.sample = Some((10, 1)), "mode differs: sample none in the checkpoint, 10 (seed 1) now".into()),
            (|h| h.mode.max_configs = 128, "mode differs: max configs 256 in the checkpoint, 128 now".into()),
            (|h| h.mode.negligible = 0.0, "mode differs: negligible share 0.001 in the checkpoint, 0 now".into()),
            (|h| h.mode.design.design = Design::Full, "mode differs: design screen in the checkpoint, full now".into()),
            (
                |h| h.mode.design.tolerance = 0.1,
                "mode differs: design tolerance 0.05 in the checkpoint, 0.1 now".into(),
            ),
            (
                |h| h.mode.design.min_error_ns = 5_500.0,
                "mode differs: design error floor 20 µs in the checkpoint, 5.5 µs now".into(),
            ),
            (|h| h.mode.design.seed = 9, "mode differs: design seed 24301 in the checkpoint, 9 now".into()),
            (
                |h| {
                    h.pins = vec!["role=weight:dram".parse().expect("a rule"), "tensor=x:pmem".parse().expect("a rule")]
                },
                "pins differ: none in the checkpoint, role=weight:dram, tensor=x:pmem now".into(),
            ),
            (
                |h| h.shard = Some(Shard { index: 2, count: 3, schedule_passes: 7 }),
                "shard differs: none (the whole plan) in the checkpoint, 2/3 now".into(),
            ),
            (
                |h| h.plan_hash = "0000aaaa1111bbbb".into(),
                "pass plan differs: digest feedfacecafe in the checkpoint, 0000aaaa1111 now (the same settings \
                 planned other passes)"
                    .into(),
            ),
        ];
        for (change, expected) in cases {
            let text = said(change).unwrap_or_default();
            assert_eq!(text, expected);
            assert!(!text.contains(['{', '\n']), "{text}");
        }
    }

    #[test]
    fn several_differences_are_listed_in_one_line() {
        assert_eq!(
            said(|h| {
                h.protocol.reps = 4;
                h.protocol.max_reps = 12;
                h.protocol.rounds = 3;
            })
            .as_deref(),
            Some(
                "protocol differs: reps 3 in the checkpoint, 4 now; max reps 9 in the checkpoint, 12 now; rounds 1 \
                 in the checkpoint, 3 now"
            )
        );
        // Parts in header order; a plan made from another model or mode differs as a
        // matter of course, so its digest is not named.
        assert_eq!(
            said(|h| {
                h.pins = vec!["role=weight:dram".parse().expect("a rule")];
                h.mode.max_simultaneous = 1;
                h.protocol.steps = Steps::Live;
                h.host_fingerprint = "99887766ffeeddcc".into();
                h.model_hash = "9876543210abcdef".into();
                h.plan_hash = "0000aaaa1111bbbb".into();
            })
            .as_deref(),
            Some(
                "model differs: mlp-b4 (hash 0123456789ab) in the checkpoint, mlp-b4 (hash 9876543210ab) now; host \
                 differs: fingerprint 00112233aabbccdd in the checkpoint, 99887766ffeeddcc now; protocol differs: \
                 steps picked in the checkpoint, live now; mode differs: max simultaneous 64 in the checkpoint, 1 \
                 now; pins differ: none in the checkpoint, role=weight:dram now"
            )
        );
    }

    #[test]
    fn a_short_header_from_a_file_is_shown_as_it_is() {
        assert_eq!(
            said(|h| h.model_hash = "abc".into()).as_deref(),
            Some("model differs: mlp-b4 (hash 0123456789ab) in the checkpoint, mlp-b4 (hash abc) now")
        );
    }
}
