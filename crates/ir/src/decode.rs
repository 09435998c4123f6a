//! model.json text -> [`ModelDecl`], keeping the position of every element so that
//! validation can point at it. Decoding never stops at the first problem: a bad field is
//! reported, the element is marked as damaged, and the rest of the file is still read.

use crate::diag::{DiagnosticKind as K, Diagnostics, Location, Subject};
use crate::json::{self, Json, LineIndex, Spanned};
use crate::model::{FORMAT_NAME, FORMAT_VERSION, ModelDecl, NodeDecl, TensorDecl};
use crate::ops::Op;
use crate::types::{AttrValue, Attrs, DType, Role};
use std::collections::{BTreeMap, HashSet};

#[derive(Debug, Default, Clone)]
pub(crate) struct TensorSpans {
    pub name: usize,
    pub shape: usize,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct NodeSpans {
    pub name: usize,
    pub op: usize,
    pub attrs: BTreeMap<String, usize>,
    pub inputs: Vec<usize>,
    pub updates: Vec<usize>,
    pub outputs: Vec<usize>,
}

/// Where each declared element sits in the source text.
#[derive(Debug)]
pub(crate) struct SourceMap<'a> {
    src: &'a str,
    index: LineIndex,
    pub tensors: Vec<TensorSpans>,
    pub nodes: Vec<NodeSpans>,
    pub schedule: Vec<usize>,
}

impl SourceMap<'_> {
    pub fn locate(&self, pos: usize) -> Location {
        let (line, column) = self.index.locate(self.src, pos);
        Location { line, column }
    }
}

/// Elements that already failed to decode: later checks skip them rather than report
/// the same damage again in other words.
#[derive(Debug, Default)]
pub(crate) struct Damaged {
    pub tensors: HashSet<usize>,
    pub nodes: HashSet<usize>,
}

pub(crate) struct Decoded<'a> {
    pub decl: ModelDecl,
    pub spans: SourceMap<'a>,
    pub damaged: Damaged,
}

/// Decodes model.json text. Returns `Err` only when nothing useful can be read (broken
/// JSON, not an object, wrong format or version); otherwise the problems found so far
/// are in `diags` and decoding carries on.
pub(crate) fn decode<'a>(src: &'a str, diags: &mut Diagnostics) -> Option<Decoded<'a>> {
    let mut d = Decoder {
        diags,
        spans: SourceMap {
            src,
            index: LineIndex::new(src),
            tensors: Vec::new(),
            nodes: Vec::new(),
            schedule: Vec::new(),
        },
        damaged: Damaged::default(),
    };
    let doc = match json::parse(src) {
        Ok(doc) => doc,
        Err(e) => {
            d.report(K::Syntax, e.pos, Subject::Model, format!("malformed JSON: {}", e.message));
            return None;
        }
    };
    let decl = d.model(&doc)?;
    Some(Decoded { decl, spans: d.spans, damaged: d.damaged })
}

struct Decoder<'a, 'd> {
    diags: &'d mut Diagnostics,
    spans: SourceMap<'a>,
    damaged: Damaged,
}

type Members<'j> = [(Spanned<String>, Spanned<Json>)];

impl Decoder<'_, '_> {
    fn report(&mut self, kind: K, pos: usize, subject: Subject, message: String) {
        let location = Some(self.spans.locate(pos));
        self.diags.push(kind, location, subject, message);
    }

    /// Reports unknown members and returns a lookup over the known ones.
    fn members<'j>(
        &mut self,
        value: &'j Spanned<Json>,
        what: &str,
        known: &[&str],
        subject: &Subject,
    ) -> Option<&'j Members<'j>> {
        let members = self.object(value, what, subject)?;
        self.unknown_fields(members, what, known, subject);
        Some(members)
    }

    fn object<'j>(&mut self, value: &'j Spanned<Json>, what: &str, subject: &Subject) -> Option<&'j Members<'j>> {
        match &value.value {
            Json::Object(members) => Some(members),
            other => {
                self.report(
                    K::BadValue,
                    value.pos,
                    subject.clone(),
                    format!("{what} must be an object, found {}", other.kind()),
                );
                None
            }
        }
    }

    fn unknown_fields(&mut self, members: &Members<'_>, what: &str, known: &[&str], subject: &Subject) {
        for (key, _) in members {
            if !known.contains(&key.value.as_str()) {
                self.report(
                    K::UnknownField,
                    key.pos,
                    subject.clone(),
                    format!("unknown field \"{}\" in {what}; expected one of: {}", key.value, known.join(", ")),
                );
            }
        }
    }

    fn required<'j>(
        &mut self,
        members: &'j Members<'j>,
        obj_pos: usize,
        key: &str,
        what: &str,
        subject: &Subject,
    ) -> Option<&'j Spanned<Json>> {
        let found = field(members, key);
        if found.is_none() {
            self.report(K::MissingField, obj_pos, subject.clone(), format!("{what} has no \"{key}\" field"));
        }
        found
    }

    fn string(&mut self, value: &Spanned<Json>, what: &str, subject: &Subject) -> Option<String> {
        match &value.value {
            Json::String(s) => Some(s.clone()),
            other => {
                self.report(
                    K::BadValue,
                    value.pos,
                    subject.clone(),
                    format!("{what} must be a string, found {}", other.kind()),
                );
                None
            }
        }
    }

    fn strings(&mut self, value: &Spanned<Json>, what: &str, subject: &Subject) -> Option<(Vec<String>, Vec<usize>)> {
        let Json::Array(items) = &value.value else {
            self.report(
                K::BadValue,
                value.pos,
                subject.clone(),
                format!("{what} must be an array of names, found {}", value.value.kind()),
            );
            return None;
        };
        let mut names = Vec::with_capacity(items.len());
        let mut positions = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in items {
            match self.string(item, &format!("each entry of {what}"), subject) {
                Some(s) => {
                    names.push(s);
                    positions.push(item.pos);
                }
                None => ok = false,
            }
        }
        ok.then_some((names, positions))
    }

    fn model(&mut self, doc: &Spanned<Json>) -> Option<ModelDecl> {
        let known = ["format", "version", "name", "meta", "tensors", "nodes", "schedule"];
        let members = self.members(doc, "the model", &known, &Subject::Model)?;
        let format = self.required(members, doc.pos, "format", "the model", &Subject::Model);
        let format_ok = match format.map(|f| (f, &f.value)) {
            Some((_, Json::String(s))) if s == FORMAT_NAME => true,
            Some((f, _)) => {
                self.report(
                    K::BadValue,
                    f.pos,
                    Subject::Model,
                    format!("\"format\" must be \"{FORMAT_NAME}\": this is not a placer model file"),
                );
                false
            }
            None => false,
        };
        let version = self.required(members, doc.pos, "version", "the model", &Subject::Model);
        let version_ok = match version.map(|v| (v.pos, &v.value)) {
            Some((_, Json::Number(n))) if n.parse::<u64>() == Ok(FORMAT_VERSION) => true,
            Some((pos, Json::Number(n))) if n.parse::<u64>().is_ok_and(|v| v > FORMAT_VERSION) => {
                self.report(
                    K::BadValue,
                    pos,
                    Subject::Model,
                    format!(
                        "format version {n} is newer than this placer understands ({FORMAT_VERSION}); upgrade placer"
                    ),
                );
                false
            }
            Some((pos, _)) => {
                self.report(K::BadValue, pos, Subject::Model, format!("\"version\" must be {FORMAT_VERSION}"));
                false
            }
            None => false,
        };
        if !(format_ok && version_ok) {
            // Reading on would only produce noise about a file of another kind.
            return None;
        }
        let name = self
            .required(members, doc.pos, "name", "the model", &Subject::Model)
            .and_then(|v| self.string(v, "\"name\"", &Subject::Model))
            .unwrap_or_default();
        let meta = field(members, "meta").map(|m| self.meta(m)).unwrap_or_default();
        let mut decl = ModelDecl { name, meta, ..ModelDecl::default() };
        if let Some(tensors) = self.required(members, doc.pos, "tensors", "the model", &Subject::Model) {
            self.each(tensors, "\"tensors\"", |d, item, i| {
                let t = d.tensor(item, i);
                decl.tensors.push(t);
            });
        }
        if let Some(nodes) = self.required(members, doc.pos, "nodes", "the model", &Subject::Model) {
            self.each(nodes, "\"nodes\"", |d, item, i| {
                let n = d.node(item, i);
                decl.nodes.push(n);
            });
        }
        if let Some(schedule) = field(members, "schedule")
            && let Some((names, positions)) = self.strings(schedule, "\"schedule\"", &Subject::Model)
        {
            decl.schedule = Some(names);
            self.spans.schedule = positions;
        }
        Some(decl)
    }

    fn each(&mut self, value: &Spanned<Json>, what: &str, mut f: impl FnMut(&mut Self, &Spanned<Json>, usize)) {
        match &value.value {
            Json::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    f(self, item, i);
                }
            }
            other => self.report(
                K::BadValue,
                value.pos,
                Subject::Model,
                format!("{what} must be an array, found {}", other.kind()),
            ),
        }
    }

    fn meta(&mut self, value: &Spanned<Json>) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let Json::Object(members) = &value.value else {
            self.report(K::BadValue, value.pos, Subject::Model, "\"meta\" must be an object".into());
            return out;
        };
        for (key, v) in members {
            match &v.value {
                Json::String(s) | Json::Number(s) => {
                    out.insert(key.value.clone(), s.clone());
                }
                other => self.report(
                    K::BadValue,
                    v.pos,
                    Subject::Model,
                    format!("\"meta\" values must be strings or numbers, found {}", other.kind()),
                ),
            }
        }
        out
    }

    fn tensor(&mut self, value: &Spanned<Json>, index: usize) -> TensorDecl {
        let mut spans = TensorSpans { name: value.pos, shape: value.pos };
        let mut t = TensorDecl { name: String::new(), shape: Vec::new(), dtype: DType::F32, role: Role::Activation };
        let before = self.diags.len();
        let anon = Subject::Tensor(format!("#{index}"));
        if let Some(members) = self.object(value, "a tensor", &anon) {
            if let Some(v) = self.required(members, value.pos, "name", "a tensor", &anon) {
                spans.name = v.pos;
                t.name = self.string(v, "\"name\"", &anon).unwrap_or_default();
            }
            let subject = if t.name.is_empty() { anon } else { Subject::Tensor(t.name.clone()) };
            self.unknown_fields(members, "a tensor", &["name", "shape", "dtype", "role"], &subject);
            if let Some(v) = self.required(members, value.pos, "shape", "a tensor", &subject) {
                spans.shape = v.pos;
                t.shape = self.shape(v, &subject).unwrap_or_default();
            }
            if let Some(v) = field(members, "dtype") {
                t.dtype = self.named(v, "dtype", DType::parse, DType::names, &subject).unwrap_or(DType::F32);
            }
            if let Some(v) = self.required(members, value.pos, "role", "a tensor", &subject) {
                t.role = self.named(v, "role", Role::parse, Role::names, &subject).unwrap_or(Role::Activation);
            }
        }
        if self.diags.len() > before {
            self.damaged.tensors.insert(index);
        }
        self.spans.tensors.push(spans);
        t
    }

    fn named<T>(
        &mut self,
        value: &Spanned<Json>,
        what: &str,
        parse: fn(&str) -> Option<T>,
        names: fn() -> String,
        subject: &Subject,
    ) -> Option<T> {
        let text = self.string(value, &format!("\"{what}\""), subject)?;
        let parsed = parse(&text);
        if parsed.is_none() {
            self.report(
                K::BadValue,
                value.pos,
                subject.clone(),
                format!("unknown {what} \"{text}\"; expected one of: {}", names()),
            );
        }
        parsed
    }

    fn shape(&mut self, value: &Spanned<Json>, subject: &Subject) -> Option<Vec<u64>> {
        let Json::Array(items) = &value.value else {
            self.report(
                K::BadValue,
                value.pos,
                subject.clone(),
                format!("\"shape\" must be an array of dimensions, found {}", value.value.kind()),
            );
            return None;
        };
        let mut dims = Vec::with_capacity(items.len());
        for item in items {
            match &item.value {
                Json::Number(n) if n.parse::<u64>().is_ok() => dims.push(n.parse::<u64>().ok()?),
                Json::Number(n) => {
                    self.report(
                        K::Size,
                        item.pos,
                        subject.clone(),
                        format!("dimension {n} is not a non-negative integer that fits in 64 bits"),
                    );
                    return None;
                }
                other => {
                    self.report(
                        K::BadValue,
                        item.pos,
                        subject.clone(),
                        format!("a dimension must be a number, found {}", other.kind()),
                    );
                    return None;
                }
            }
        }
        Some(dims)
    }

    fn node(&mut self, value: &Spanned<Json>, index: usize) -> NodeDecl {
        let mut spans = NodeSpans { name: value.pos, op: value.pos, ..NodeSpans::default() };
        let mut n = NodeDecl {
            name: String::new(),
            op: Op::Add,
            attrs: Attrs::new(),
            inputs: Vec::new(),
            updates: Vec::new(),
            outputs: Vec::new(),
        };
        let before = self.diags.len();
        let anon = Subject::Node(format!("#{index}"));
        let known = ["name", "op", "attrs", "inputs", "updates", "outputs"];
        if let Some(members) = self.object(value, "a node", &anon) {
            if let Some(v) = self.required(members, value.pos, "name", "a node", &anon) {
                spans.name = v.pos;
                n.name = self.string(v, "\"name\"", &anon).unwrap_or_default();
            }
            let subject = if n.name.is_empty() { anon } else { Subject::Node(n.name.clone()) };
            self.unknown_fields(members, "a node", &known, &subject);
            if let Some(v) = self.required(members, value.pos, "op", "a node", &subject) {
                spans.op = v.pos;
                if let Some(op) = self.named(v, "op", Op::parse, Op::names, &subject) {
                    n.op = op;
                }
            }
            if let Some(v) = field(members, "attrs") {
                n.attrs = self.attrs(v, &subject, &mut spans.attrs);
            }
            for (key, names, positions) in [
                ("inputs", &mut n.inputs, &mut spans.inputs),
                ("outputs", &mut n.outputs, &mut spans.outputs),
                ("updates", &mut n.updates, &mut spans.updates),
            ] {
                let v = if key == "updates" {
                    field(members, key)
                } else {
                    self.required(members, value.pos, key, "a node", &subject)
                };
                if let Some((found, pos)) = v.and_then(|v| self.strings(v, &format!("\"{key}\""), &subject)) {
                    *names = found;
                    *positions = pos;
                }
            }
        }
        if self.diags.len() > before {
            self.damaged.nodes.insert(index);
        }
        self.spans.nodes.push(spans);
        n
    }

    fn attrs(&mut self, value: &Spanned<Json>, subject: &Subject, positions: &mut BTreeMap<String, usize>) -> Attrs {
        let mut attrs = Attrs::new();
        let Json::Object(members) = &value.value else {
            self.report(
                K::BadValue,
                value.pos,
                subject.clone(),
                format!("\"attrs\" must be an object, found {}", value.value.kind()),
            );
            return attrs;
        };
        for (key, v) in members {
            let parsed = match &v.value {
                Json::Bool(b) => Some(AttrValue::Bool(*b)),
                Json::String(s) => Some(AttrValue::Str(s.clone())),
                Json::Number(n) => number_attr(n),
                Json::Array(items) => items
                    .iter()
                    .map(|i| match &i.value {
                        Json::Number(n) => n.parse::<i64>().ok(),
                        _ => None,
                    })
                    .collect::<Option<Vec<i64>>>()
                    .map(AttrValue::Ints),
                Json::Null | Json::Object(_) => None,
            };
            match parsed {
                Some(a) => {
                    attrs.insert(key.value.clone(), a);
                    positions.insert(key.value.clone(), v.pos);
                }
                None => self.report(
                    K::Attribute,
                    v.pos,
                    subject.clone(),
                    format!("attribute \"{}\" must be a number, a boolean, a string or a list of integers", key.value),
                ),
            }
        }
        attrs
    }
}

fn field<'j>(members: &'j Members<'j>, key: &str) -> Option<&'j Spanned<Json>> {
    members.iter().find(|(k, _)| k.value == key).map(|(_, v)| v)
}

fn number_attr(text: &str) -> Option<AttrValue> {
    if let Ok(i) = text.parse::<i64>() {
        return Some(AttrValue::Int(i));
    }
    text.parse::<f64>().ok().filter(|f| f.is_finite()).map(AttrValue::Float)
}
