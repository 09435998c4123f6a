//! The corpus of real exports (tests/data/onnx-corpus, made by scripts/onnx/corpus/):
//! torchvision and transformers models written by both torch exporters, and
//! onnxruntime-training graphs, with their weights stripped. Every file either imports
//! with exactly the framework's parameter count, or fails with the one-line error
//! recorded in `EXPECTED_FAILURES` (and listed in docs/importing.md). A file that
//! starts to import, or fails differently, fails this test until the list is updated.

use placer_ir::Role;
use placer_onnx::{ImportOptions, import};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Files that do not import yet, and a part of the error each one gives.
const EXPECTED_FAILURES: &[(&str, &str)] = &[];

/// Files whose graph is not the framework's network parameter for parameter, with the
/// count they must have and why. The dynamo exporter folds every batch norm into the
/// convolution before it, even for a module in training mode: each batch norm's scale
/// and shift (2·C) leave the graph and the convolution gains a bias (C).
const PARAMETER_EXCEPTIONS: &[(&str, u64, &str)] = &[
    ("resnet50.dynamo.onnx", 25_557_032 - 26_560, "batch norms folded into convolutions (ΣC = 26,560)"),
    ("mobilenet_v2.dynamo.onnx", 3_504_872 - 17_056, "batch norms folded into convolutions (ΣC = 17,056)"),
    // The dynamo exporter stores Llama's rotary cos/sin cache as two float initializers
    // [1, 1, 16, 32], unnamed and read by Mul like a layer scale: the importer cannot
    // tell them from parameters, and counts them (2 · 512).
    // GPT-2 ties its output layer to the token embedding. The TorchScript exporter's
    // constant folding writes the output layer's weight as a transposed copy, a second
    // initializer: the tie is not in the file (the dynamo export keeps it).
    ("gpt2.ts.onnx", 6_960_768 + 50_257 * 128, "tied output weight written as a transposed copy"),
    ("gpt2_sdpa.ts.onnx", 6_960_768 + 50_257 * 128, "tied output weight written as a transposed copy"),
    ("llama.dynamo.onnx", 8_587_904 + 1_024, "rotary cos/sin cache stored as initializers, counted as weights"),
    ("llama_sdpa.dynamo.onnx", 8_587_904 + 1_024, "rotary cos/sin cache stored as initializers, counted as weights"),
];

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/onnx-corpus")
}

fn manifest() -> Vec<Value> {
    let text = std::fs::read_to_string(corpus_dir().join("manifest.json")).expect("the corpus manifest is committed");
    let Value::Array(entries) = serde_json::from_str(&text).expect("manifest.json is JSON") else {
        panic!("manifest.json is not a list");
    };
    entries
}

fn options(entry: &Value) -> ImportOptions {
    let how = &entry["import"];
    let dims: BTreeMap<String, u64> = how["dims"]
        .as_object()
        .map(|d| d.iter().map(|(k, v)| (k.clone(), v.as_u64().expect("a dim size"))).collect())
        .unwrap_or_default();
    ImportOptions { batch: how["batch"].as_u64(), dims, ..Default::default() }
}

fn parameters(model: &placer_ir::Model) -> u64 {
    model.tensors().iter().filter(|t| t.role == Role::Weight).map(|t| t.shape.iter().product::<u64>()).sum()
}

#[test]
fn every_corpus_file_imports_at_its_batch_and_another_with_the_frameworks_parameter_count() {
    let entries = manifest();
    assert!(entries.len() >= 25, "the corpus has {} files", entries.len());
    let mut report = Vec::new();
    let mut wrong = Vec::new();
    for entry in &entries {
        let file = entry["file"].as_str().expect("a file name");
        let framework = entry["framework_params"].as_u64().expect("a parameter count");
        let expected_params =
            PARAMETER_EXCEPTIONS.iter().find(|(f, ..)| *f == file).map_or(framework, |&(_, count, _)| count);
        let expected_failure = EXPECTED_FAILURES.iter().find(|(f, _)| *f == file).map(|(_, e)| *e);
        match (import(&corpus_dir().join(file), &options(entry)), expected_failure) {
            (Ok(imported), None) => {
                let params = parameters(&imported.model);
                report.push(format!("{file}: imported, {params} parameters"));
                if params != expected_params {
                    wrong.push(format!("{file}: {params} parameters where {expected_params} are expected"));
                }
                // At a batch the file does not fix: shapes a static export computed from
                // its own batch (masks, Reshape targets, position ids) follow `--batch`.
                let other = ImportOptions { batch: Some(3), ..options(entry) };
                match import(&corpus_dir().join(file), &other) {
                    Ok(m) if parameters(&m.model) == params => {}
                    Ok(m) => wrong.push(format!("{file} at batch 3: {} parameters", parameters(&m.model))),
                    Err(e) => wrong.push(format!("{file} at batch 3: {e}")),
                }
            }
            (Ok(_), Some(_)) => wrong.push(format!("{file}: imports now; take it off EXPECTED_FAILURES")),
            (Err(e), Some(part)) if e.to_string().contains(part) => report.push(format!("{file}: fails as recorded")),
            (Err(e), _) => wrong.push(format!("{file}: {e}")),
        }
    }
    assert!(wrong.is_empty(), "{}\n\nall:\n{}", wrong.join("\n"), report.join("\n"));
}

#[test]
fn the_manifest_matches_the_committed_files() {
    for entry in manifest() {
        let file = entry["file"].as_str().expect("a file name");
        let bytes = std::fs::read(corpus_dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let digest: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(entry["sha256"].as_str(), Some(digest.as_str()), "{file} differs from the file the manifest lists");
    }
}

/// Corpus files of networks the zoo also generates, and that zoo model.
const ZOO_TWINS: &[(&str, &str)] = &[
    ("resnet50.ts.onnx", "resnet50"),
    ("resnet50.ort.onnx", "resnet50"),
    ("densenet121.ts.onnx", "densenet121"),
    ("densenet121.ort.onnx", "densenet121"),
    ("vgg16.ts.onnx", "vgg16"),
    ("inception_v3.ts.onnx", "inception-v3"),
];

#[test]
fn corpus_files_of_zoo_networks_match_the_zoo_in_macs_and_peak() {
    let entries = manifest();
    let mut rows = Vec::new();
    for &(file, zoo) in ZOO_TWINS {
        let entry = entries.iter().find(|e| e["file"] == file).unwrap_or_else(|| panic!("{file} not in the manifest"));
        let batch = entry["import"]["batch"].as_u64().expect("a batch");
        let ours = placer_ir::Summary::new(&import(&corpus_dir().join(file), &options(entry)).expect(file).model, 2, 0);
        let twin = placer_ir::Summary::new(&placer_zoo::build(zoo, batch).expect(zoo), 2, 0);
        let off = |a: u64, b: u64| (a as f64 - b as f64).abs() / b as f64;
        rows.push(format!(
            "{file} / zoo {zoo}: MACs {} / {} ({:+.3}%), peak {} / {} ({:+.2}%)",
            ours.forward_macs,
            twin.forward_macs,
            100.0 * (ours.forward_macs as f64 / twin.forward_macs as f64 - 1.0),
            ours.peak_live_bytes,
            twin.peak_live_bytes,
            100.0 * (ours.peak_live_bytes as f64 / twin.peak_live_bytes as f64 - 1.0),
        ));
        assert!(off(ours.forward_macs, twin.forward_macs) < 0.001, "{}", rows.join("\n"));
        assert!(off(ours.peak_live_bytes, twin.peak_live_bytes) < 0.01, "{}", rows.join("\n"));
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!("{}", rows.join("\n"));
    }
}

/// A bare Erf (outside a GELU) is placer's `erf`, in the forward export and in the
/// training graph, where onnxruntime's written-out gradient becomes one `erf_backward`.
#[test]
fn a_bare_erf_and_its_gradient_import_as_erf_ops() {
    for (file, backward_from) in [("erf_mlp.ts.onnx", "the builder"), ("erf_mlp.ort.onnx", "the file")] {
        let opts = ImportOptions { batch: Some(2), ..Default::default() };
        let imported = import(&corpus_dir().join(file), &opts).unwrap_or_else(|e| panic!("{file}: {e}"));
        let ops: Vec<&str> = imported.model.nodes().iter().map(|n| n.op.as_str()).collect();
        for op in ["erf", "erf_backward", "gelu", "gelu_backward"] {
            assert_eq!(
                ops.iter().filter(|&&o| o == op).count(),
                1,
                "{file}: one {op} (backward from {backward_from}): {ops:?}"
            );
        }
    }
}
