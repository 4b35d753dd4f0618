//! Generates the ONNX protobuf types from `onnx.proto` (ONNX 1.23.2, proto2) with prost.
//! `protox` is a pure-Rust protobuf compiler, so no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=onnx.proto");
    let fds = protox::compile(["onnx.proto"], ["."])?;
    let mut config = prost_build::Config::new();
    // Tensor payloads decode as `bytes::Bytes`: decoding from a memory-mapped buffer is then
    // zero-copy, so embedded weights are never duplicated on the heap.
    config.bytes([".onnx.TensorProto.raw_data"]);
    config.compile_fds(fds)?;
    Ok(())
}
