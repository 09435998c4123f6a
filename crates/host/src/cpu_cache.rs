//! The size of this host's last-level CPU cache, from Linux's sysfs: what decides which
//! of a kernel's operands a training step leaves in cache and which in memory.

use std::path::Path;

/// The largest data or unified cache of CPU 0's highest cache level, in bytes (one
/// instance: on a host with several, each core sees its own). None where sysfs does not
/// say (not Linux, or a VM that hides its caches).
pub fn last_level_cache_bytes() -> Option<u64> {
    last_level_in(Path::new("/sys/devices/system/cpu/cpu0/cache"))
}

fn last_level_in(dir: &Path) -> Option<u64> {
    let read = |index: &Path, name: &str| std::fs::read_to_string(index.join(name)).ok();
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .filter_map(|e| {
            let index = e.path();
            if read(&index, "type")?.trim() == "Instruction" {
                return None;
            }
            let level: u32 = read(&index, "level")?.trim().parse().ok()?;
            Some((level, parse_size(read(&index, "size")?.trim())?))
        })
        .max()
        .map(|(_, bytes)| bytes)
}

/// sysfs writes cache sizes as `32768K` (and, on some kernels, `1M`).
fn parse_size(text: &str) -> Option<u64> {
    let (digits, unit) = text.find(|c: char| !c.is_ascii_digit()).map_or((text, ""), |i| text.split_at(i));
    let shift = match unit {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_level_that_holds_data_is_the_last() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (i, level, kind, size) in [
            (0, 1, "Data", "32K"),
            (1, 1, "Instruction", "32K"),
            (2, 2, "Unified", "1024K"),
            (3, 3, "Unified", "32768K"),
        ] {
            let index = dir.path().join(format!("index{i}"));
            std::fs::create_dir(&index).expect("mkdir");
            for (name, text) in [("level", level.to_string()), ("type", kind.into()), ("size", format!("{size}\n"))] {
                std::fs::write(index.join(name), text).expect("write");
            }
        }
        assert_eq!(last_level_in(dir.path()), Some(32 << 20));
        // An instruction cache, however large, is not where operands live.
        std::fs::write(dir.path().join("index1/level"), "4").expect("write");
        std::fs::write(dir.path().join("index1/size"), "1G").expect("write");
        assert_eq!(last_level_in(dir.path()), Some(32 << 20));
        assert_eq!(last_level_in(&dir.path().join("absent")), None);
    }

    #[test]
    fn sizes_read_in_every_unit_sysfs_writes_and_nothing_else() {
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("12Q"), None);
        assert_eq!(parse_size("K"), None);
    }
}
