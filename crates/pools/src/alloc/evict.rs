//! Writing a buffer's lines back and out of every cache level, so that the next kernel
//! to read it starts from memory: how the profiler times a kernel alone without the
//! previous repetition's operands still in cache.

/// The cache line every x86-64 part this project runs on has.
const LINE: usize = 64;

/// Flushes every cache line of `bytes` from the whole cache hierarchy, then waits for
/// the flushes to finish (`mfence`), so a timed read that follows misses. Uses
/// `clflushopt` where the processor has it: `clflush` is ordered against every other
/// flush, and on a 100 MB operand took longer than the kernel it prepared. On other
/// architectures it does nothing and says so.
pub fn evict_from_cache(bytes: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if has_clflushopt() {
            // SAFETY: the processor has clflushopt (checked just above).
            unsafe { flush_opt(bytes) };
        } else {
            flush(bytes);
        }
        // SAFETY: mfence has no operands and SSE2 is baseline on x86-64.
        unsafe { std::arch::x86_64::_mm_mfence() };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = bytes;
        false
    }
}

#[cfg(target_arch = "x86_64")]
fn flush(bytes: &[u8]) {
    let base = bytes.as_ptr();
    for offset in (0..bytes.len()).step_by(LINE) {
        // SAFETY: `base + offset` lies within `bytes` (offset < len), a live borrow;
        // clflush reads no data through the pointer and is SSE2, baseline on x86-64.
        unsafe { std::arch::x86_64::_mm_clflush(base.add(offset)) };
    }
}

/// CPUID leaf 7, EBX bit 23 (Intel SDM vol. 2A, CPUID): the processor has clflushopt.
/// Stable Rust's feature detection does not know the name, so it is asked directly.
#[cfg(target_arch = "x86_64")]
fn has_clflushopt() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        // Leaf 0 says which leaves exist; leaf 7 is asked only where it does.
        let max = std::arch::x86_64::__cpuid(0).eax;
        max >= 7 && std::arch::x86_64::__cpuid_count(7, 0).ebx & (1 << 23) != 0
    })
}

/// # Safety
/// The processor must have `clflushopt` ([`has_clflushopt`]).
#[cfg(target_arch = "x86_64")]
unsafe fn flush_opt(bytes: &[u8]) {
    let base = bytes.as_ptr();
    for offset in (0..bytes.len()).step_by(LINE) {
        // SAFETY: `base + offset` lies within `bytes` (offset < len), a live borrow;
        // clflushopt only writes the line back and invalidates it, touching no register
        // or memory the compiler knows of, and the caller vouches for the instruction.
        unsafe {
            std::arch::asm!("clflushopt [{}]", in(reg) base.add(offset), options(nostack, preserves_flags));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicting_leaves_the_bytes_as_they_were() {
        #[cfg(target_arch = "x86_64")]
        assert!(
            has_clflushopt() || !std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default().contains("clflushopt")
        );
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let before = data.clone();
        assert_eq!(evict_from_cache(&data), cfg!(target_arch = "x86_64"));
        assert_eq!(data, before);
        assert_eq!(evict_from_cache(&[]), cfg!(target_arch = "x86_64"));
    }
}
