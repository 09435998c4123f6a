//! Elementwise arithmetic (`add`, `mul`, with a second operand of the same shape or
//! broadcast to the first), its reduction (`sum_to`), and bias (`bias_add`,
//! `bias_grad`), in `f32`.

use super::{ChannelView, PAR_CHUNK, channel_runs, for_row_groups, map_binary, reduce_rows, sum_f64};
use rayon::prelude::*;

/// `c = a + b`, elementwise (all three have one length; [`add_broadcast`] broadcasts).
///
/// # Panics
/// If the lengths differ (here and in every kernel: lengths come from a validated model,
/// so a mismatch is a bug of the caller).
pub fn add(a: &[f32], b: &[f32], c: &mut [f32]) {
    map_binary(a, b, c, |a, b| a + b);
}

/// `c = a · b`, elementwise.
pub fn mul(a: &[f32], b: &[f32], c: &mut [f32]) {
    map_binary(a, b, c, |a, b| a * b);
}

/// How a smaller operand `b` broadcasts over a shape `a` (numpy's rules, aligned from the
/// right): `a`'s dimensions coalesced into runs along which `b` either follows `a`
/// (varies) or repeats (is broadcast). Size-1 dimensions of `a` are dropped and
/// neighbouring runs of one kind merged, so `[8, 16]` over `[16]` is two runs
/// (8 repeated, 16 varying) and `[N, C, H, W]` over `[C, 1, 1]` three.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broadcast {
    /// `(size, b varies along it, stride in a, stride in b)`, outermost first; never
    /// empty (a tensor of one element is one run of 1).
    runs: Vec<Run>,
    a_numel: usize,
    b_numel: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    size: usize,
    varies: bool,
    a_stride: usize,
    b_stride: usize,
}

/// Outputs of [`sum_to`] up to this many are reduced with one accumulator per task over
/// the input (a bias-like gradient); larger ones one output range per task.
const SMALL_OUTPUT: usize = 4096;

impl Broadcast {
    /// `b` over `a`, or `None` when `b` does not broadcast to `a` (more dimensions, or a
    /// dimension that is neither `a`'s nor 1).
    pub fn new(a: &[usize], b: &[usize]) -> Option<Broadcast> {
        let offset = a.len().checked_sub(b.len())?;
        let mut runs: Vec<(usize, bool)> = Vec::new();
        for (i, &size) in a.iter().enumerate() {
            let bd = if i < offset { 1 } else { b[i - offset] };
            if bd != size && bd != 1 {
                return None;
            }
            if size == 1 {
                continue;
            }
            let varies = bd == size;
            match runs.last_mut() {
                Some((s, v)) if *v == varies => *s *= size,
                _ => runs.push((size, varies)),
            }
        }
        if runs.is_empty() {
            runs.push((1, true));
        }
        let (mut a_stride, mut b_stride) = (1, 1);
        let mut out = vec![Run { size: 0, varies: false, a_stride: 0, b_stride: 0 }; runs.len()];
        for (o, &(size, varies)) in out.iter_mut().zip(&runs).rev() {
            *o = Run { size, varies, a_stride, b_stride: if varies { b_stride } else { 0 } };
            a_stride *= size;
            if varies {
                b_stride *= size;
            }
        }
        Some(Broadcast { runs: out, a_numel: a.iter().product(), b_numel: b.iter().product() })
    }

    /// Elements of `a` (and of the output of `add`/`mul`, and the input of `sum_to`).
    pub fn a_numel(&self) -> usize {
        self.a_numel
    }

    /// Elements of `b` (and of the output of `sum_to`).
    pub fn b_numel(&self) -> usize {
        self.b_numel
    }

    /// The innermost run: `a` is a sequence of blocks of this many contiguous elements.
    fn inner(&self) -> Run {
        self.runs[self.runs.len() - 1]
    }

    /// The offset in `b` of the first element of `a`'s block number `block`.
    fn b_offset(&self, mut block: usize) -> usize {
        let mut offset = 0;
        for r in self.runs[..self.runs.len() - 1].iter().rev() {
            offset += (block % r.size) * r.b_stride;
            block /= r.size;
        }
        offset
    }

    /// The offset in `a` of `b`'s element `j` at the first position of every broadcast
    /// run.
    fn a_offset_of_b(&self, mut j: usize) -> usize {
        let mut offset = 0;
        for r in self.runs.iter().rev().filter(|r| r.varies) {
            offset += (j % r.size) * r.a_stride;
            j /= r.size;
        }
        offset
    }

    /// The offsets in `a` of every combination of positions along the broadcast runs
    /// other than the innermost run, in row-major order.
    fn repeats(&self) -> Vec<usize> {
        let mut offsets = vec![0];
        for r in self.runs[..self.runs.len() - 1].iter().filter(|r| !r.varies) {
            offsets = offsets.iter().flat_map(|&o| (0..r.size).map(move |k| o + k * r.a_stride)).collect();
        }
        offsets
    }
}

/// `c = a ⊙ b` with `b` broadcast over `a` (`c` has `a`'s shape), block by block.
fn broadcast_binary(bc: &Broadcast, a: &[f32], b: &[f32], c: &mut [f32], f: impl Fn(f32, f32) -> f32 + Sync) {
    assert_eq!(a.len(), bc.a_numel, "a does not match the broadcast");
    assert_eq!(c.len(), bc.a_numel, "c does not match the broadcast");
    assert_eq!(b.len(), bc.b_numel, "b does not match the broadcast");
    let inner = bc.inner();
    let n = inner.size;
    for_row_groups(c, n, |block0, cs| {
        let xs = &a[block0 * n..][..cs.len()];
        for (k, (cr, ar)) in cs.chunks_exact_mut(n).zip(xs.chunks_exact(n)).enumerate() {
            let at = bc.b_offset(block0 + k);
            if inner.varies {
                for ((c, &a), &b) in cr.iter_mut().zip(ar).zip(&b[at..at + n]) {
                    *c = f(a, b);
                }
            } else {
                let b = b[at];
                for (c, &a) in cr.iter_mut().zip(ar) {
                    *c = f(a, b);
                }
            }
        }
    });
}

/// `c = a + b` with `b` broadcast over `a`. For identical shapes [`add`] is the same
/// and faster.
pub fn add_broadcast(bc: &Broadcast, a: &[f32], b: &[f32], c: &mut [f32]) {
    broadcast_binary(bc, a, b, c, |a, b| a + b);
}

/// `c = a · b` with `b` broadcast over `a`.
pub fn mul_broadcast(bc: &Broadcast, a: &[f32], b: &[f32], c: &mut [f32]) {
    broadcast_binary(bc, a, b, c, |a, b| a * b);
}

/// `y` (of `b`'s shape) `= dy` (of `a`'s shape) summed over the dimensions `bc`
/// broadcasts: the gradient of a broadcast operand. Sums are accumulated in f64, in an
/// order that depends on the shapes only (deterministic on any thread count). An empty
/// `dy` gives zeros.
pub fn sum_to(bc: &Broadcast, dy: &[f32], y: &mut [f32]) {
    assert_eq!(dy.len(), bc.a_numel, "dy does not match the broadcast");
    assert_eq!(y.len(), bc.b_numel, "y does not match the broadcast");
    if bc.a_numel == 0 || bc.b_numel == 0 {
        y.fill(0.0);
        return;
    }
    let inner = bc.inner();
    let n = inner.size;
    if bc.b_numel <= SMALL_OUTPUT {
        // Few outputs: each task sums its blocks of dy into an accumulator of all of y.
        let sums = reduce_rows(bc.a_numel / n, n, bc.b_numel, |acc, blocks| {
            for block in blocks {
                let (at, row) = (bc.b_offset(block), &dy[block * n..][..n]);
                if inner.varies {
                    for (s, &v) in acc[at..at + n].iter_mut().zip(row) {
                        *s += f64::from(v);
                    }
                } else {
                    acc[at] += sum_f64(row);
                }
            }
        });
        for (y, s) in y.iter_mut().zip(sums) {
            *y = s as f32;
        }
        return;
    }
    // Many outputs: each task owns a range of y and gathers its sums from dy.
    let repeats = bc.repeats();
    let run = |j0: usize, ys: &mut [f32]| {
        if inner.varies {
            // Segments of y that are contiguous in dy too (within one innermost run).
            let mut acc = vec![0.0f64; n.min(ys.len())];
            let mut done = 0;
            while done < ys.len() {
                let j = j0 + done;
                let len = (n - j % n).min(ys.len() - done);
                let base = bc.a_offset_of_b(j);
                let acc = &mut acc[..len];
                acc.fill(0.0);
                for &r in &repeats {
                    for (s, &v) in acc.iter_mut().zip(&dy[base + r..][..len]) {
                        *s += f64::from(v);
                    }
                }
                for (y, &s) in ys[done..done + len].iter_mut().zip(acc.iter()) {
                    *y = s as f32;
                }
                done += len;
            }
        } else {
            // Each element of y sums contiguous runs of n in dy.
            for (k, y) in ys.iter_mut().enumerate() {
                let base = bc.a_offset_of_b(j0 + k);
                *y = repeats.iter().map(|&r| sum_f64(&dy[base + r..][..n])).sum::<f64>() as f32;
            }
        }
    };
    if y.len() <= PAR_CHUNK {
        run(0, y);
    } else {
        y.par_chunks_mut(PAR_CHUNK).enumerate().for_each(|(t, ys)| run(t * PAR_CHUNK, ys));
    }
}

/// `y[o, c, i] = x[o, c, i] + bias[c]` over `view` (the op's `axis` is the channel axis).
pub fn bias_add(view: ChannelView, x: &[f32], bias: &[f32], y: &mut [f32]) {
    let ChannelView { channels, inner, .. } = view;
    assert_eq!(x.len(), view.numel(), "x does not match the view");
    assert_eq!(y.len(), view.numel(), "y does not match the view");
    assert_eq!(bias.len(), channels, "bias length is not the channel count");
    if inner == 1 {
        // [rows, channels]: add the bias vector to each row.
        for_row_groups(y, channels, |row0, ys| {
            let xs = &x[row0 * channels..][..ys.len()];
            for (yr, xr) in ys.chunks_exact_mut(channels).zip(xs.chunks_exact(channels)) {
                for ((y, &x), &b) in yr.iter_mut().zip(xr).zip(bias) {
                    *y = x + b;
                }
            }
        });
    } else {
        for_row_groups(y, inner, |row0, ys| {
            let xs = &x[row0 * inner..][..ys.len()];
            for (r, (yr, xr)) in ys.chunks_exact_mut(inner).zip(xs.chunks_exact(inner)).enumerate() {
                let b = bias[(row0 + r) % channels];
                for (y, &x) in yr.iter_mut().zip(xr) {
                    *y = x + b;
                }
            }
        });
    }
}

/// `dbias[c] = Σ_{o, i} dy[o, c, i]`, accumulated in f64: the backward of [`bias_add`].
pub fn bias_grad(view: ChannelView, dy: &[f32], dbias: &mut [f32]) {
    let ChannelView { outer, channels, inner } = view;
    assert_eq!(dy.len(), view.numel(), "dy does not match the view");
    assert_eq!(dbias.len(), channels, "dbias length is not the channel count");
    if channels == 0 {
        return;
    }
    let sums = reduce_rows(outer * channels, inner, channels, |acc, range| {
        channel_runs(channels, range, |c0, row, count| {
            let acc = &mut acc[c0..c0 + count];
            if inner == 1 {
                for (a, &v) in acc.iter_mut().zip(&dy[row..row + count]) {
                    *a += f64::from(v);
                }
            } else {
                for (k, a) in acc.iter_mut().enumerate() {
                    *a += sum_f64(&dy[(row + k) * inner..][..inner]);
                }
            }
        });
    });
    for (d, s) in dbias.iter_mut().zip(sums) {
        *d = s as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(a: &[usize], b: &[usize]) -> Vec<(usize, bool, usize, usize)> {
        let bc = Broadcast::new(a, b).expect("broadcasts");
        bc.runs.iter().map(|r| (r.size, r.varies, r.a_stride, r.b_stride)).collect()
    }

    #[test]
    fn broadcasts_coalesce_into_runs() {
        assert_eq!(runs(&[8, 16], &[16]), [(8, false, 16, 0), (16, true, 1, 1)]);
        assert_eq!(runs(&[2, 3, 4], &[2, 3, 4]), [(24, true, 1, 1)]);
        assert_eq!(runs(&[2, 16, 5, 5], &[16, 1, 1]), [(2, false, 400, 0), (16, true, 25, 1), (25, false, 1, 0)]);
        // Size-1 dimensions of a disappear; so does a b of one element's structure.
        assert_eq!(runs(&[1, 6, 1, 7], &[6, 1, 1]), [(6, true, 7, 1), (7, false, 1, 0)]);
        assert_eq!(runs(&[3, 4], &[1]), [(12, false, 1, 0)]);
        assert_eq!(runs(&[], &[]), [(1, true, 1, 1)]);
        let bc = Broadcast::new(&[2, 3, 4], &[2, 1, 4]).expect("broadcasts");
        assert_eq!((bc.b_offset(0), bc.b_offset(2), bc.b_offset(3), bc.b_offset(5)), (0, 0, 4, 4));
        assert_eq!(bc.repeats(), [0, 4, 8]);
        assert_eq!((bc.a_offset_of_b(5), bc.a_offset_of_b(3)), (13, 3));
    }
}
