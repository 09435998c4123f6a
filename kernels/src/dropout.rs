//! Dropout and its backward pass. The mask holds 0 (dropped) or 1 (kept) per element,
//! either as one byte, as onnxruntime's boolean mask, or as an `f32`, as eager torch
//! keeps its noise on a CPU (four bytes an element: what a plan must make room for).
//!
//! The mask is drawn from a counter-based generator: element `i`'s draw is the `i`-th
//! output of SplitMix64 seeded with the op's `seed`, a pure function of `(seed, i)`. So
//! the same seed gives the same mask on every run, machine and thread count, and any
//! range of elements can be drawn without the ones before it (the parallel chunks need
//! no shared state). A node draws the same mask at every step: placer measures memory,
//! and the mask's values change nothing about what a step reads and writes.

use crate::tensor_ops::PAR_CHUNK;
use rayon::prelude::*;

/// The parameters of [`dropout`] and [`dropout_backward`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dropout {
    /// The probability of dropping an element, in `[0, 1)`.
    pub ratio: f64,
    /// The generator's seed (only the forward reads it).
    pub seed: u64,
}

impl Dropout {
    /// `1 / (1 − ratio)`, the scale of a kept element.
    pub fn scale(self) -> f32 {
        (1.0 / (1.0 - self.ratio)) as f32
    }

    /// Draws at or above this (a 32-bit draw) keep their element: `ratio · 2^32`,
    /// rounded to the nearest integer, so ratio 0 keeps everything.
    fn threshold(self) -> u64 {
        (self.ratio.clamp(0.0, 1.0) * 4_294_967_296.0).round() as u64
    }
}

/// The `i`-th output of SplitMix64 (Steele, Lea and Flood, 2014) seeded with `seed`:
/// the state after `i + 1` steps, mixed.
#[inline(always)]
fn splitmix64(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add(i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A dropout mask's element: `u8` or `f32`, holding 0 or 1.
pub trait MaskElem: Copy + Send + Sync {
    fn of(keep: bool) -> Self;
    /// 1.0 for a kept element, 0.0 for a dropped one (any nonzero value is kept).
    fn kept(self) -> f32;
}

impl MaskElem for u8 {
    fn of(keep: bool) -> Self {
        u8::from(keep)
    }
    fn kept(self) -> f32 {
        f32::from(u8::from(self != 0))
    }
}

impl MaskElem for f32 {
    fn of(keep: bool) -> Self {
        f32::from(u8::from(keep))
    }
    fn kept(self) -> f32 {
        f32::from(u8::from(self != 0.0))
    }
}

/// `mask[i] = 1` with probability `1 − ratio` (else 0), and `y = x · mask / (1 − ratio)`.
///
/// # Panics
/// If the three lengths differ.
pub fn dropout<M: MaskElem>(p: Dropout, x: &[f32], y: &mut [f32], mask: &mut [M]) {
    assert_eq!(x.len(), y.len(), "x and y lengths differ");
    assert_eq!(x.len(), mask.len(), "x and mask lengths differ");
    let (scale, threshold, seed) = (p.scale(), p.threshold(), p.seed);
    let run = |first: usize, x: &[f32], y: &mut [f32], mask: &mut [M]| {
        for (k, ((y, m), &v)) in y.iter_mut().zip(mask.iter_mut()).zip(x).enumerate() {
            let keep = splitmix64(seed, (first + k) as u64) >> 32 >= threshold;
            *m = M::of(keep);
            *y = v * (f32::from(u8::from(keep)) * scale);
        }
    };
    if x.len() <= PAR_CHUNK {
        run(0, x, y, mask);
    } else {
        y.par_chunks_mut(PAR_CHUNK)
            .zip(mask.par_chunks_mut(PAR_CHUNK))
            .zip(x.par_chunks(PAR_CHUNK))
            .enumerate()
            .for_each(|(t, ((y, m), x))| run(t * PAR_CHUNK, x, y, m));
    }
}

/// `dx = dy · mask / (1 − ratio)`, from the forward's `mask` (any nonzero element is a
/// kept one: the forward writes only 0 and 1).
pub fn dropout_backward<M: MaskElem>(p: Dropout, dy: &[f32], mask: &[M], dx: &mut [f32]) {
    assert_eq!(dy.len(), dx.len(), "dy and dx lengths differ");
    assert_eq!(dy.len(), mask.len(), "dy and mask lengths differ");
    let scale = p.scale();
    let run = |dy: &[f32], mask: &[M], dx: &mut [f32]| {
        for ((o, &g), &m) in dx.iter_mut().zip(dy).zip(mask) {
            *o = g * (m.kept() * scale);
        }
    };
    if dy.len() <= PAR_CHUNK {
        run(dy, mask, dx);
    } else {
        dx.par_chunks_mut(PAR_CHUNK)
            .zip(dy.par_chunks(PAR_CHUNK))
            .zip(mask.par_chunks(PAR_CHUNK))
            .for_each(|((o, g), m)| run(g, m, o));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_draws_are_splitmix64() {
        // The first outputs of SplitMix64 seeded with 0 (the reference implementation's).
        assert_eq!(splitmix64(0, 0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(0, 1), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn ratio_zero_keeps_everything_and_the_scale_is_one() {
        let p = Dropout { ratio: 0.0, seed: 3 };
        let x = [1.0, -2.0, 3.5];
        let (mut y, mut mask) = ([0.0; 3], [9u8; 3]);
        dropout(p, &x, &mut y, &mut mask);
        assert_eq!((y, mask), (x, [1; 3]));
    }

    #[test]
    fn an_f32_mask_drops_the_same_elements_as_a_byte_mask() {
        let p = Dropout { ratio: 0.3, seed: 11 };
        let x: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 7.0).collect();
        let (mut y8, mut m8) = (vec![0.0; 1000], vec![0u8; 1000]);
        let (mut y32, mut m32) = (vec![0.0; 1000], vec![0f32; 1000]);
        dropout(p, &x, &mut y8, &mut m8);
        dropout(p, &x, &mut y32, &mut m32);
        assert_eq!(y8, y32);
        assert!(m8.iter().zip(&m32).all(|(&a, &b)| f32::from(a) == b), "same elements kept");
        assert!(m8.contains(&0) && m8.contains(&1));
        let dy: Vec<f32> = (0..1000).map(|i| (i % 7) as f32 - 3.0).collect();
        let (mut dx8, mut dx32) = (vec![0.0; 1000], vec![0.0; 1000]);
        dropout_backward(p, &dy, &m8, &mut dx8);
        dropout_backward(p, &dy, &m32, &mut dx32);
        assert_eq!(dx8, dx32);
    }
}
