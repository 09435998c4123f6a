//! Test data shared by the kernel tests and benches (`#[path]`-included there).

/// Deterministic pseudo-random values in [−1, 1): xorshift64, the top 24 bits scaled
/// exactly, so every build and machine gets the same numbers.
pub fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}
