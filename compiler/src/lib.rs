//! arenac's compiler: ONNX import into a typed graph IR with static shapes, shape and type
//! inference, constant folding, and (later) planning and code generation.
//!
//! Data flows one way: [`import`] decodes a model and builds an [`ir::graph::Graph`] using the
//! [`ops`] converters, inference and reference evaluation.

#![deny(missing_docs)]

// Constants, the weights region and the generated code all read and write little-endian.
#[cfg(not(target_endian = "little"))]
compile_error!("arenac supports little-endian targets only");

pub mod analysis;
pub mod arena;
pub mod codegen;
pub mod error;
pub mod fft;
pub mod gemm;
pub mod import;
pub mod ir;
pub mod ops;
pub mod par;
pub mod plan;

pub use error::{Error, OpError, Result};
