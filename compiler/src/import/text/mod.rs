//! A parser for ONNX's textual syntax (the language of `onnx.parser.parse_model`, described in
//! onnx/docs/Syntax.md), producing a [`ModelProto`]. It follows the reference parser
//! (onnx/defs/parser.cc, ONNX 1.23.2) closely, so a text model gives the same protobuf here and
//! there:
//!
//! ```text
//! < ir_version: 8, opset_import: ["" : 13] >
//! mlp (float[N, 4] x) => (float[N, 2] y)
//! < float[4, 2] w = {1, 2, 3, 4, 5, 6, 7, 8} >
//! {
//!     y = MatMul(x, w)   # comments run to the end of the line
//! }
//! ```
//!
//! Differences from the reference: model-local functions after the main graph are rejected,
//! a `-` must be followed directly by its number, and lists mixing attribute kinds the
//! reference silently drops (tensors, graphs) are kept. Errors are [`Error::Syntax`] with the
//! 1-based line and column of the offending token; nothing here panics on any input.

use arenac_proto::attribute_proto::AttributeType;
use arenac_proto::tensor_proto::DataLocation;
use arenac_proto::tensor_shape_proto::{Dimension, dimension};
use arenac_proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto, type_proto,
};

use crate::error::{Error, Result};

/// Deepest nesting of types and graph attributes accepted (guards the stack).
const MAX_DEPTH: usize = 64;

/// Parses a model in ONNX textual syntax.
pub fn parse_model_text(src: &str) -> Result<ModelProto> {
    let mut p = Parser {
        src,
        pos: 0,
        depth: 0,
    };
    p.model()
}

/// ONNX element type names and their `TensorProto.DataType` codes.
const ELEM_TYPES: &[(&str, i32)] = &[
    ("float", 1),
    ("uint8", 2),
    ("int8", 3),
    ("uint16", 4),
    ("int16", 5),
    ("int32", 6),
    ("int64", 7),
    ("string", 8),
    ("bool", 9),
    ("float16", 10),
    ("double", 11),
    ("uint32", 12),
    ("uint64", 13),
    ("complex64", 14),
    ("complex128", 15),
    ("bfloat16", 16),
    ("float8e4m3fn", 17),
    ("float8e4m3fnuz", 18),
    ("float8e5m2", 19),
    ("float8e5m2fnuz", 20),
    ("uint4", 21),
    ("int4", 22),
    ("float4e2m1", 23),
    ("float8e8m0", 24),
    ("uint2", 25),
    ("int2", 26),
    ("float6e2m3", 27),
    ("float6e3m2", 28),
];

fn elem_type(name: &str) -> Option<i32> {
    ELEM_TYPES.iter().find(|(n, _)| *n == name).map(|&(_, c)| c)
}

/// ONNX's name of the element type with `TensorProto.DataType` code `code` (`float`,
/// `bfloat16`, `float8e4m3fn`...), as ONNX Runtime also spells it inside `tensor(...)`.
pub fn elem_type_name(code: i32) -> Option<&'static str> {
    ELEM_TYPES
        .iter()
        .find(|&&(_, c)| c == code)
        .map(|&(n, _)| n)
}

/// Non-tensor type keywords.
const TYPE_KEYWORDS: &[&str] = &["seq", "map", "optional", "sparse_tensor", "opaque"];

/// Attribute type annotations (`name: ints = [...]`).
fn attr_type(name: &str) -> Option<AttributeType> {
    Some(match name {
        "float" => AttributeType::Float,
        "int" => AttributeType::Int,
        "string" => AttributeType::String,
        "tensor" => AttributeType::Tensor,
        "graph" => AttributeType::Graph,
        "sparse_tensor" => AttributeType::SparseTensor,
        "type_proto" => AttributeType::TypeProto,
        "floats" => AttributeType::Floats,
        "ints" => AttributeType::Ints,
        "strings" => AttributeType::Strings,
        "tensors" => AttributeType::Tensors,
        "graphs" => AttributeType::Graphs,
        "sparse_tensors" => AttributeType::SparseTensors,
        "type_protos" => AttributeType::TypeProtos,
        _ => return None,
    })
}

fn singleton(t: AttributeType) -> AttributeType {
    match t {
        AttributeType::Floats => AttributeType::Float,
        AttributeType::Ints => AttributeType::Int,
        AttributeType::Strings => AttributeType::String,
        AttributeType::Tensors => AttributeType::Tensor,
        AttributeType::Graphs => AttributeType::Graph,
        AttributeType::SparseTensors => AttributeType::SparseTensor,
        AttributeType::TypeProtos => AttributeType::TypeProto,
        other => other,
    }
}

fn is_singleton(t: AttributeType) -> bool {
    matches!(
        t,
        AttributeType::Float
            | AttributeType::Int
            | AttributeType::String
            | AttributeType::Tensor
            | AttributeType::Graph
            | AttributeType::SparseTensor
            | AttributeType::TypeProto
    )
}

/// A literal token: its kind and text (strings unescaped).
#[derive(Debug, Clone, PartialEq)]
enum Lit {
    Int(String),
    Float(String),
    Str(String),
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    depth: usize,
}

type PResult<T> = std::result::Result<T, Error>;

mod lexer;
mod parser;

#[cfg(test)]
mod tests;
