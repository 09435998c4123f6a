//! A BERT encoder (Devlin et al. 2019) trained with a token-classification head.
//!
//! The head is per token rather than BERT's [CLS] pooler because selecting one token
//! needs a slicing op the op set does not have; the pooler's 0.6M parameters are
//! therefore absent (BERT-base: 108.9M here against 109.5M with the pooler).

use crate::ZooError;
use crate::builder::{GraphBuilder, T};
use crate::layers::{classify, linear};
use placer_ir::DType;

#[derive(Debug, Clone, Copy)]
struct Config {
    layers: usize,
    hidden: u64,
    heads: u64,
    ffn: u64,
    seq: u64,
}

const VOCAB: u64 = 30522;
const MAX_POSITIONS: u64 = 512;
const TOKEN_TYPES: u64 = 2;
const LABELS: u64 = 2;
const EPS: f64 = 1e-12;

fn encoder_layer(g: &mut GraphBuilder, name: &str, x: T, n: u64, c: Config) -> Result<T, ZooError> {
    let (s, d, h) = (c.seq, c.hidden, c.heads);
    let dh = d / h;
    // [N*S, D] -> [N, H, S, D/H]
    let heads = |g: &mut GraphBuilder, which: &str| -> Result<T, ZooError> {
        let p = linear(g, &format!("{name}.attn.{which}"), x, d)?;
        let p = g.reshape(&format!("{name}.attn.{which}.split"), p, &[n, s, h, dh]);
        Ok(g.transpose(&format!("{name}.attn.{which}.heads"), p, &[0, 2, 1, 3]))
    };
    let q = heads(g, "query")?;
    let k = heads(g, "key")?;
    let v = heads(g, "value")?;
    let scores = g.matmul(&format!("{name}.attn.scores"), q, k, true, 1.0 / (dh as f64).sqrt())?;
    let probs = g.softmax(&format!("{name}.attn.softmax"), scores);
    let ctx = g.matmul(&format!("{name}.attn.context"), probs, v, false, 1.0)?;
    let ctx = g.transpose(&format!("{name}.attn.merge"), ctx, &[0, 2, 1, 3]);
    let ctx = g.reshape(&format!("{name}.attn.flatten"), ctx, &[n * s, d]);
    let out = linear(g, &format!("{name}.attn.output"), ctx, d)?;
    let out = g.add(&format!("{name}.attn.residual"), out, x);
    let x = g.layer_norm(&format!("{name}.attn.norm"), out, EPS);
    let f = linear(g, &format!("{name}.ffn.up"), x, c.ffn)?;
    let f = g.gelu(&format!("{name}.ffn.gelu"), f);
    let f = linear(g, &format!("{name}.ffn.down"), f, d)?;
    let f = g.add(&format!("{name}.ffn.residual"), f, x);
    Ok(g.layer_norm(&format!("{name}.ffn.norm"), f, EPS))
}

fn bert(g: &mut GraphBuilder, n: u64, c: Config) -> Result<T, ZooError> {
    let (s, d) = (c.seq, c.hidden);
    let tokens = g.input("token_ids", &[n, s], DType::I32);
    let positions = g.input("position_ids", &[n, s], DType::I32);
    let types = g.input("token_type_ids", &[n, s], DType::I32);
    let word = g.weight("embeddings.word", &[VOCAB, d]);
    let pos = g.weight("embeddings.position", &[MAX_POSITIONS, d]);
    let typ = g.weight("embeddings.token_type", &[TOKEN_TYPES, d]);
    let e = g.embedding("embeddings.word.lookup", tokens, word);
    let p = g.embedding("embeddings.position.lookup", positions, pos);
    let t = g.embedding("embeddings.token_type.lookup", types, typ);
    let e = g.add("embeddings.sum1", e, p);
    let e = g.add("embeddings.sum2", e, t);
    let e = g.reshape("embeddings.flatten", e, &[n * s, d]);
    let mut x = g.layer_norm("embeddings.norm", e, EPS);
    for l in 0..c.layers {
        x = encoder_layer(g, &format!("layer{l}"), x, n, c)?;
    }
    let logits = linear(g, "classifier", x, LABELS)?;
    Ok(classify(g, logits))
}

pub(crate) fn bert_base(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    bert(g, n, Config { layers: 12, hidden: 768, heads: 12, ffn: 3072, seq: 128 })
}

pub(crate) fn bert_tiny(g: &mut GraphBuilder, n: u64) -> Result<T, ZooError> {
    bert(g, n, Config { layers: 2, hidden: 128, heads: 2, ffn: 512, seq: 128 })
}
