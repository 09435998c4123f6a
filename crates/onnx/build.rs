//! Generates the ONNX protobuf types from the vendored `proto/onnx.proto` with `protox`
//! (a pure-Rust protobuf compiler), so the build needs no `protoc` on the machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    let descriptors = protox::compile(["onnx.proto"], ["proto"])?;
    prost_build::Config::new()
        // Tensor payloads stay slices of the file's buffer: weights are never copied or read.
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
