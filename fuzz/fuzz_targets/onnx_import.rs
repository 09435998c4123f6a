//! An ONNX file's bytes through the whole import (`placer_onnx::import_bytes`) at batch 2:
//! the protobuf decode, the graph checks, the lowering and the derived backward pass.
#![no_main]

use libfuzzer_sys::fuzz_target;
use placer_onnx::ImportOptions;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let options = ImportOptions { batch: Some(2), ..ImportOptions::default() };
    let _ = placer_onnx::import_bytes(Path::new("fuzz.onnx"), data.to_vec(), &options);
});
