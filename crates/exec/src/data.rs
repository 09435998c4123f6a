//! Deterministic contents for a step's tensors: the same seed gives the same numbers on
//! every run, so losses and timings are comparable.
//!
//! Weights get a He-uniform initialisation from their fan-in (so a ReLU network trains),
//! normalisation scales start at 1 and shifts and biases at 0, index inputs stay inside
//! the range their consumer accepts (class count, embedding rows), a byte tensor fed to
//! the step (a dropout mask) holds 0s and 1s, and everything a node produces starts at
//! zero.

use placer_ir::{AttrValue, DType, Model, Op, Role, TensorId};

/// SplitMix64 (Steele, Lea and Flood, 2014): a small, fast, well-mixed generator. It
/// fills tensors here, and makes every seeded choice of the profiler (samples,
/// validation configurations), so data and plans are the same on every machine.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0; the modulo bias is below 2^-40 for the sizes the
    /// profiler draws from).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// Uniform in [-1, 1).
    pub fn symmetric(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// Writes tensor `t`'s starting contents under `fill` into `bytes` (its buffer), from
/// its own generator (seeded from `seed` and its index), so any subset of tensors can
/// be refilled to exactly its starting contents. Zero-filled tensors are written only
/// when `write_zeros`: fresh buffers are already zero.
pub(crate) fn fill_bytes(fill: Fill, t: TensorId, seed: u64, bytes: &mut [u8], write_zeros: bool) {
    let mut rng = SplitMix64::new(seed ^ (u64::from(t.0) + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let words = bytes.chunks_exact_mut(4);
    match fill {
        Fill::Zero if write_zeros => bytes.fill(0),
        Fill::Zero => {}
        Fill::Index(bound) => {
            words.for_each(|x| x.copy_from_slice(&((rng.next_u64() % bound.max(1)) as i32).to_ne_bytes()));
        }
        Fill::Index64(bound) => bytes
            .chunks_exact_mut(8)
            .for_each(|x| x.copy_from_slice(&((rng.next_u64() % bound.max(1)) as i64).to_ne_bytes())),
        Fill::Constant(c) => words.for_each(|x| x.copy_from_slice(&c.to_ne_bytes())),
        Fill::Uniform(bound) => words.for_each(|x| x.copy_from_slice(&(rng.symmetric() * bound).to_ne_bytes())),
        Fill::Bits => bytes.iter_mut().for_each(|b| *b = (rng.next_u64() >> 63) as u8),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Fill {
    Zero,
    Constant(f32),
    /// Uniform in [-bound, bound).
    Uniform(f32),
    /// Uniform integers in [0, bound), as i32.
    Index(u64),
    /// The same as i64 (torch's index type).
    Index64(u64),
    /// Bytes of 0 or 1, evenly: a mask.
    Bits,
}

/// How to initialise each tensor of `model`.
pub(crate) fn fill_plan(model: &Model) -> Vec<Fill> {
    let mut plan: Vec<Option<Fill>> = vec![None; model.tensors().len()];
    for &n in model.schedule() {
        let node = model.node(n);
        for (slot, &t) in node.inputs.iter().enumerate() {
            let tensor = model.tensor(t);
            if plan[t.index()].is_some() || model.producer(t).is_some() {
                continue;
            }
            plan[t.index()] = match (tensor.role, tensor.dtype) {
                // Only a dropout mask is u8: whatever its role, it holds 0s and 1s.
                (_, DType::U8) => Some(Fill::Bits),
                (Role::Weight, _) => Some(weight_fill(model, node.op, &node.attrs, slot, t)),
                (Role::Input, DType::I32) => index_bound(model, node.op, slot, &node.inputs).map(Fill::Index),
                (Role::Input, DType::I64) => index_bound(model, node.op, slot, &node.inputs).map(Fill::Index64),
                (Role::Input, _) => Some(Fill::Uniform(1.0)),
                _ => None,
            };
        }
    }
    plan.into_iter().map(|f| f.unwrap_or(Fill::Zero)).collect()
}

fn weight_fill(model: &Model, op: Op, attrs: &placer_ir::Attrs, slot: usize, t: TensorId) -> Fill {
    let shape = &model.tensor(t).shape;
    let he = |fan_in: u64| Fill::Uniform((6.0 / fan_in.max(1) as f64).sqrt() as f32);
    match (op, slot) {
        // A weight multiplied in (broadcast) is a learned scale; one added in, a bias.
        (Op::BatchNorm | Op::LayerNorm | Op::RmsNorm, 1) | (Op::Mul, 1) => Fill::Constant(1.0),
        (Op::BatchNorm | Op::LayerNorm, 2) | (Op::BiasAdd | Op::Add, 1) => Fill::Zero,
        (Op::Conv2d, 1) => he(shape[1..].iter().product()),
        (Op::MatMul, 1) => {
            let rank = shape.len();
            let transposed = matches!(attrs.get("transpose_b"), Some(AttrValue::Bool(true)));
            he(if transposed { shape[rank - 1] } else { shape[rank - 2] })
        }
        // BERT initialises embeddings with a standard deviation of 0.02.
        (Op::Embedding, 1) => Fill::Uniform(0.035),
        _ => Fill::Uniform(0.05),
    }
}

/// The exclusive upper bound an index input must respect for its consumer.
fn index_bound(model: &Model, op: Op, slot: usize, inputs: &[TensorId]) -> Option<u64> {
    match (op, slot) {
        (Op::SoftmaxCrossEntropy | Op::SoftmaxCrossEntropyBackward, 1) => Some(model.tensor(inputs[0]).shape[1]),
        (Op::Embedding, 0) => Some(model.tensor(inputs[1]).shape[0]),
        _ => Some(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_is_deterministic_and_in_range() {
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        for _ in 0..1000 {
            let x = a.symmetric();
            assert_eq!(x, b.symmetric());
            assert!((-1.0..1.0).contains(&x));
        }
    }

    #[test]
    fn plans_respect_consumers() {
        let model = placer_zoo::build("bert-tiny", 2).expect("zoo");
        let plan = fill_plan(&model);
        let fill = |name: &str| plan[model.tensor_id(name).expect("tensor").index()];
        assert_eq!(fill("token_ids"), Fill::Index(30522));
        assert_eq!(fill("position_ids"), Fill::Index(512));
        assert_eq!(fill("labels"), Fill::Index(2));
        assert_eq!(fill("embeddings.norm.gamma"), Fill::Constant(1.0));
        assert_eq!(fill("layer0.ffn.up.bias"), Fill::Zero);
        assert_eq!(fill("layer0.ffn.up.weight"), Fill::Uniform((6.0f64 / 128.0).sqrt() as f32));
        assert_eq!(fill("layer0.ffn.up.weight.velocity"), Fill::Zero);
    }
}
