//! `placer profile --export csv|json`: the measurements, for people and other tools.

use crate::record::Profile;
use std::fmt::Write;

/// One row per measurement; configs as pool names joined by `+`, in operand order.
pub fn csv(profile: &Profile) -> String {
    let names: Vec<&str> = profile.header.pools.iter().map(|p| p.name.as_str()).collect();
    let mut out = String::from("signature,node,op,config,pass,count,median_ns,mad_ns,min_ns,max_ns,cv,emulated\n");
    for m in &profile.measurements {
        let config: Vec<&str> = m.config.iter().map(|&c| names.get(usize::from(c)).copied().unwrap_or("?")).collect();
        let _ = writeln!(
            out,
            "{:016x},{},{},{},{},{},{:.1},{:.1},{:.1},{:.1},{:.4},{}",
            m.signature,
            quote(&m.node),
            m.op,
            config.join("+"),
            m.pass,
            m.count,
            m.median_ns,
            m.mad_ns,
            m.min_ns,
            m.max_ns,
            m.cv,
            profile.header.emulated
        );
    }
    out
}

/// Node names are the user's: quote them when CSV needs it.
fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n']) { format!("\"{}\"", field.replace('"', "\"\"")) } else { field.to_string() }
}

pub fn json(profile: &Profile) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(profile)
}
