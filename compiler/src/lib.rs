//! arenac's compiler: ONNX import into a typed graph IR with static shapes, shape and type
//! inference, constant folding, and (later) planning and code generation.
//!
//! Data flows one way: [`import`] decodes a model and builds an [`ir::graph::Graph`] using the
//! [`ops`] converters, inference and reference evaluation.

#![deny(missing_docs)]

pub mod analysis;
pub mod arena;
pub mod codegen;
pub mod error;
pub mod gemm;
pub mod import;
pub mod ir;
pub mod ops;
pub mod plan;

pub use error::{Error, OpError, Result};
