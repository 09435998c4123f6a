//! What hwloc 2.9's own XML reader (Debian builds hwloc without libxml2) trusts and does
//! not check, refused here before hwloc sees it. Each rule stops one way a file killed
//! placer inside hwloc (found by scripts/fuzz.sh; the minimised files are in
//! tests/fixtures), and nothing else: every export in the real corpus
//! (tests/data/hwloc-corpus) passes.
//!
//! - malformed XML, or an object with a `cpuset` and no `complete_cpuset`: a NULL read;
//! - a bitmap whose first character is a comma: hwloc counts the words after the first
//!   character, so that comma is one word more than it counted (an assertion). Empty
//!   words (`0xffffffff,,0xffffffff`, a zero word as hwloc writes it), `0xf...f` and
//!   anything else hwloc's `hwloc_bitmap_sscanf` reads are accepted;
//! - an object type hwloc does not write: it matches the first letters, so `MemCa;he` was
//!   a memory-side cache to it;
//! - a memory-side cache with no NUMA node below it, or a NUMA node whose sets are not
//!   within its parent's (hwloc drops it, then asserts that the machine has NUMA nodes);
//! - an object with a cpuset and no nodeset in a file that has NUMA nodes or nodesets (a
//!   NULL compared). hwloc 1.x exports of machines without NUMA nodes write no nodesets
//!   at all, and hwloc adds them; those are fine;
//! - a NUMA node whose nodeset does not hold its own index (an assertion while guessing
//!   memory tiers).

/// Checks `text`; the error says what and where (line and column).
pub(crate) fn check_xml(text: &str) -> Result<(), String> {
    // Exports name hwloc's DTD (`<!DOCTYPE topology SYSTEM "hwloc2.dtd">`).
    let options = roxmltree::ParsingOptions { allow_dtd: true, ..roxmltree::ParsingOptions::default() };
    let doc =
        roxmltree::Document::parse_with_options(text, options).map_err(|e| format!("not well-formed XML: {e}"))?;
    let at = |node: roxmltree::Node<'_, '_>| {
        let pos = doc.text_pos_at(node.range().start);
        format!("the <{}> at line {}, column {}", node.tag_name().name(), pos.row, pos.col)
    };
    for node in doc.descendants() {
        for attr in node.attributes().filter(|a| a.name().ends_with("cpuset") || a.name().ends_with("nodeset")) {
            if let Err(why) = Bitmap::parse(attr.value()) {
                let value: String = attr.value().chars().take(40).collect();
                return Err(format!("{}: {}=\"{value}\" {why}", at(node), attr.name()));
            }
        }
    }
    let set = |node: roxmltree::Node<'_, '_>, name: &str| node.attribute(name).and_then(|v| Bitmap::parse(v).ok());
    let is_type =
        |node: roxmltree::Node<'_, '_>, ty: &str| node.has_tag_name("object") && node.attribute("type") == Some(ty);
    let objects = || doc.descendants().filter(|n| n.has_tag_name("object"));
    let has_nodesets = objects().any(|o| is_type(o, "NUMANode") || o.has_attribute("nodeset"));
    for object in objects() {
        match object.attribute("type") {
            Some(ty) if OBJECT_TYPES.contains(&ty) => {}
            Some(ty) => {
                let ty: String = ty.chars().take(40).collect();
                return Err(format!("{}: type \"{ty}\" is not an hwloc object type", at(object)));
            }
            None => return Err(format!("{}: no type", at(object))),
        }
        if is_type(object, "MemCache") && !object.descendants().any(|n| is_type(n, "NUMANode")) {
            return Err(format!("{}: a memory-side cache with no NUMA node below it", at(object)));
        }
        let parent = object.ancestors().skip(1).find(|n| n.has_tag_name("object"));
        for (name, complete) in [("cpuset", "complete_cpuset"), ("nodeset", "complete_nodeset")] {
            let Some(own) = set(object, name) else { continue };
            let Some(whole) = set(object, complete) else {
                return Err(format!("{}: a {name} and no {complete}", at(object)));
            };
            if !own.within(&whole) {
                return Err(format!("{}: its {name} is not within its {complete}", at(object)));
            }
            // Only a NUMA node: in 1.x exports a cache below a NUMA node may span more
            // nodes than it (hwloc writes them so, and reads them back).
            if is_type(object, "NUMANode")
                && let Some(parent) = parent
                && let Some(theirs) = set(parent, name)
                && !own.within(&theirs)
            {
                return Err(format!("{}: its {name} is not within its parent's ({})", at(object), at(parent)));
            }
        }
        let (cpuset, nodeset) = (object.has_attribute("cpuset"), object.has_attribute("nodeset"));
        if nodeset && !cpuset || cpuset && !nodeset && has_nodesets {
            return Err(format!("{}: a cpuset without a nodeset, or a nodeset without a cpuset", at(object)));
        }
        if is_type(object, "NUMANode") {
            let index = object.attribute("os_index").and_then(|i| i.parse::<usize>().ok());
            let holds = |i: usize| set(object, "nodeset").is_some_and(|own| own.bit(i));
            if !index.is_some_and(holds) {
                return Err(format!("{}: a NUMA node whose nodeset does not hold its os_index", at(object)));
            }
        }
    }
    Ok(())
}

/// The object types hwloc writes, as it writes them (hwloc 2.x, and 1.x's `Cache`,
/// `Socket` and `System`). hwloc reads a type by its first letters, whatever follows.
const OBJECT_TYPES: [&str; 23] = [
    "Machine", "Package", "Die", "Core", "PU", "L1Cache", "L2Cache", "L3Cache", "L4Cache", "L5Cache", "L1iCache",
    "L2iCache", "L3iCache", "Group", "NUMANode", "MemCache", "Bridge", "PCIDev", "OSDev", "Misc", "Cache", "Socket",
    "System",
];

/// A bitmap as hwloc reads it: 64-bit words, lowest first, and whether every bit above
/// them is set.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Bitmap {
    ulongs: Vec<u64>,
    infinite: bool,
}

impl Bitmap {
    /// Reads `value` the way `hwloc_bitmap_sscanf` (hwloc 2.9, 64-bit longs) does:
    /// comma-separated 32-bit words, highest first, each read by `strtoul(.., 16)` (so an
    /// empty word is zero, and `0x` is optional), after an optional `0xf...f,` (every bit
    /// above them set); `0xf...f` alone is the full set. The error completes "VALUE ...".
    pub(crate) fn parse(value: &str) -> Result<Bitmap, &'static str> {
        if value.starts_with(',') {
            return Err("starts with a comma, which hwloc 2.9 aborts on (hwloc never writes one)");
        }
        let cannot = "is not a bitmap hwloc can read (comma-separated hex words such as 0xffffffff,,0x0000000f)";
        let (words, infinite) = match value.strip_prefix("0xf...f") {
            Some(rest) => match rest.strip_prefix(',') {
                Some(words) => (words, true),
                None => return Ok(Bitmap { ulongs: Vec::new(), infinite: true }),
            },
            None => (value, false),
        };
        let mut ulongs = vec![0u64; words.split(',').count().div_ceil(2)];
        if words.is_empty() {
            return Ok(Bitmap { ulongs, infinite });
        }
        let mut count = words.split(',').count();
        let mut accum = 0u64;
        for word in words.split(',') {
            let (val, rest) = strtoul_hex(word);
            if !rest.is_empty() {
                return Err(cannot);
            }
            count -= 1;
            // C's `val << shift` on an unsigned long: high bits fall off.
            accum |= val.checked_shl(((count * 32) % 64) as u32).unwrap_or(0);
            if count % 2 == 0 {
                ulongs[count / 2] = accum;
                accum = 0;
            }
        }
        Ok(Bitmap { ulongs, infinite })
    }

    pub(crate) fn bit(&self, i: usize) -> bool {
        self.ulongs.get(i / 64).map_or(self.infinite, |w| w >> (i % 64) & 1 == 1)
    }

    pub(crate) fn within(&self, other: &Bitmap) -> bool {
        (!self.infinite || other.infinite)
            && (0..self.ulongs.len().max(other.ulongs.len()) * 64).all(|i| !self.bit(i) || other.bit(i))
    }
}

/// C's `strtoul(word, &end, 16)`: leading white space, a sign, an optional `0x`, then hex
/// digits (none: 0, and nothing consumed). Returns the value and what is left of `word`.
fn strtoul_hex(word: &str) -> (u64, &str) {
    let body = word.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, body) = match body.as_bytes().first() {
        Some(b'-') => (true, &body[1..]),
        Some(b'+') => (false, &body[1..]),
        _ => (false, body),
    };
    let has_prefix =
        (body.starts_with("0x") || body.starts_with("0X")) && body.as_bytes().get(2).is_some_and(u8::is_ascii_hexdigit);
    let digits = if has_prefix { &body[2..] } else { body };
    let len = digits.bytes().take_while(u8::is_ascii_hexdigit).count();
    if len == 0 {
        return (0, word);
    }
    let value = u64::from_str_radix(&digits[..len], 16).unwrap_or(u64::MAX);
    (if negative { value.wrapping_neg() } else { value }, &digits[len..])
}

#[cfg(test)]
mod tests {
    use super::Bitmap;

    fn bits(value: &str) -> Vec<usize> {
        let map = Bitmap::parse(value).expect(value);
        (0..200).filter(|&i| map.bit(i)).collect()
    }

    #[test]
    fn bitmaps_read_as_hwloc_writes_them() {
        assert_eq!(bits("0x0000000f"), vec![0, 1, 2, 3]);
        assert_eq!(bits("0x0"), Vec::<usize>::new());
        // An empty word between commas is a zero word: bits 0 and 64 here.
        assert_eq!(bits("0x00000001,,0x00000001"), vec![0, 64]);
        let xeon_max = bits("0xffffffff,,0xffffffff");
        assert_eq!(xeon_max, (0..32).chain(64..96).collect::<Vec<_>>());
        assert_eq!(bits("0x00000001,0x00000000,0x00000002"), vec![1, 64]);
        assert_eq!(bits("f"), vec![0, 1, 2, 3], "strtoul takes hex without 0x");
        // Infinite sets: everything, or everything above the words given.
        assert_eq!(bits("0xf...f").len(), 200);
        // As hwloc writes bits 4 and up: the infinite part starts at a 64-bit word.
        assert_eq!(bits("0xf...f,0xffffffff,0xfffffff0"), (4..200).collect::<Vec<_>>());
        assert_eq!(bits("0xf...f,,0x1"), [0].into_iter().chain(64..200).collect::<Vec<_>>());
        assert_eq!(bits(""), Vec::<usize>::new());
    }

    #[test]
    fn what_hwloc_aborts_on_or_cannot_read_is_refused() {
        assert!(Bitmap::parse(",0x00000001").expect_err("leading comma").contains("aborts"));
        assert!(Bitmap::parse("0x1z").expect_err("junk").contains("not a bitmap"));
        assert!(Bitmap::parse("0x00000001 0x2").is_err());
    }

    #[test]
    fn containment_counts_every_word_and_the_infinite_tail() {
        let p = |v| Bitmap::parse(v).expect(v);
        assert!(p("0x00000001,,0x0").within(&p("0xffffffff,,0xffffffff")));
        assert!(!p("0x00000001,0x0").within(&p("0xffffffff,,0xffffffff")));
        assert!(p("0xf...f,0x0").within(&p("0xf...f")));
        assert!(!p("0xf...f").within(&p("0xffffffff")));
    }
}
