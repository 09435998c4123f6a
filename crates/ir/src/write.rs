//! Writing model.json and hashing model content.
//!
//! Files are written one tensor and one node per line: small enough to diff and grep,
//! and a 5,000-node graph stays a few megabytes.

use crate::model::{FORMAT_NAME, FORMAT_VERSION, Model, ModelDecl};
use crate::types::{AttrValue, Attrs};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", quoted.join(", "))
}

fn attr_json(value: &AttrValue) -> String {
    match value {
        AttrValue::Int(i) => i.to_string(),
        // serde_json writes f64 in shortest round-trip form and always with a '.' or an
        // exponent, so a float attribute reads back as a float.
        AttrValue::Float(f) => serde_json::Value::from(*f).to_string(),
        AttrValue::Bool(b) => b.to_string(),
        AttrValue::Str(s) => quote(s),
        AttrValue::Ints(v) => {
            let items: Vec<String> = v.iter().map(i64::to_string).collect();
            format!("[{}]", items.join(", "))
        }
    }
}

fn attrs_json(attrs: &Attrs) -> String {
    let items: Vec<String> = attrs.iter().map(|(k, v)| format!("{}: {}", quote(k), attr_json(v))).collect();
    format!("{{{}}}", items.join(", "))
}

/// Serialises a declaration as model.json text (format version [`FORMAT_VERSION`]).
pub fn decl_to_json(decl: &ModelDecl) -> String {
    let mut out = String::with_capacity(256 * (decl.tensors.len() + decl.nodes.len()));
    let _ = writeln!(out, "{{\n  \"format\": \"{FORMAT_NAME}\",\n  \"version\": {FORMAT_VERSION},");
    let _ = writeln!(out, "  \"name\": {},", quote(&decl.name));
    if !decl.meta.is_empty() {
        let items: Vec<String> = decl.meta.iter().map(|(k, v)| format!("{}: {}", quote(k), quote(v))).collect();
        let _ = writeln!(out, "  \"meta\": {{{}}},", items.join(", "));
    }
    out.push_str("  \"tensors\": [\n");
    for (i, t) in decl.tensors.iter().enumerate() {
        let dims: Vec<String> = t.shape.iter().map(u64::to_string).collect();
        let sep = if i + 1 < decl.tensors.len() { "," } else { "" };
        let _ = writeln!(
            out,
            "    {{\"name\": {}, \"shape\": [{}], \"dtype\": \"{}\", \"role\": \"{}\"}}{sep}",
            quote(&t.name),
            dims.join(", "),
            t.dtype,
            t.role
        );
    }
    out.push_str("  ],\n  \"nodes\": [\n");
    for (i, n) in decl.nodes.iter().enumerate() {
        let _ = write!(out, "    {{\"name\": {}, \"op\": \"{}\"", quote(&n.name), n.op);
        if !n.attrs.is_empty() {
            let _ = write!(out, ", \"attrs\": {}", attrs_json(&n.attrs));
        }
        let _ = write!(out, ", \"inputs\": {}", list(&n.inputs));
        if !n.updates.is_empty() {
            let _ = write!(out, ", \"updates\": {}", list(&n.updates));
        }
        let sep = if i + 1 < decl.nodes.len() { "," } else { "" };
        let _ = writeln!(out, ", \"outputs\": {}}}{sep}", list(&n.outputs));
    }
    out.push_str("  ]");
    if let Some(schedule) = &decl.schedule {
        let _ = write!(out, ",\n  \"schedule\": {}", list(schedule));
    }
    out.push_str("\n}\n");
    out
}

impl Model {
    pub fn to_json(&self) -> String {
        decl_to_json(&self.to_decl())
    }

    /// A stable hash of everything that affects execution: tensors, nodes with their
    /// attributes, and the schedule. The name and `meta` are left out, and so is the
    /// file's layout, so reformatting or renaming a model keeps its hash.
    pub fn content_hash(&self) -> String {
        let mut h = Sha256::new();
        h.update(format!("{FORMAT_NAME} v{FORMAT_VERSION}\n"));
        for t in &self.tensors {
            h.update(format!("T {}|{:?}|{}|{}\n", quote(&t.name), t.shape, t.dtype, t.role));
        }
        for n in &self.nodes {
            let names =
                |ids: &[crate::TensorId]| -> Vec<String> { ids.iter().map(|&t| quote(&self.tensor(t).name)).collect() };
            h.update(format!(
                "N {}|{}|{}|{}|{}|{}\n",
                quote(&n.name),
                n.op,
                attrs_json(&n.attrs),
                names(&n.inputs).join(","),
                names(&n.updates).join(","),
                names(&n.outputs).join(",")
            ));
        }
        let order: Vec<String> = self.schedule.iter().map(|n| n.0.to_string()).collect();
        h.update(format!("S {}\n", order.join(",")));
        let digest = h.finalize();
        let mut hex = String::with_capacity(64);
        for b in digest {
            let _ = write!(hex, "{b:02x}");
        }
        hex
    }
}
