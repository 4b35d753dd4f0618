//! ONNX protobuf types, generated at build time by prost from `proto/onnx.proto`, the file
//! shipped with ONNX release 1.23.2 (IR version 11, opsets up to 23).
//!
//! This crate holds nothing else: decoding into an IR lives in `arenac-compiler`.

#![allow(missing_docs, clippy::all, clippy::pedantic)]

include!(concat!(env!("OUT_DIR"), "/onnx.rs"));

pub use prost::Message;

/// The ONNX release whose `onnx.proto` these types come from.
pub const ONNX_RELEASE: &str = "1.23.2";
