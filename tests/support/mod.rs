//! Helpers of the model tests: JSON and `.npy` I/O, ONNX shape inference and paths.

use std::path::{Path, PathBuf};

pub mod json;
pub mod npy;
pub mod onnx_shapes;

/// The workspace root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}
