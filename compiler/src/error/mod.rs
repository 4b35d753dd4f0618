//! Typed errors. Every failure of import, inference or folding is a variant here carrying the
//! data a user needs: the node and op, the shapes, the file, and what to do.
//!
//! [`OpError`] is what an op's inference or evaluation reports without knowing its node;
//! the importer wraps it in [`Error::Node`] with the node's name and op type.

use std::path::PathBuf;

pub mod budget;

use crate::ir::types::{DType, Shape, ShapeDisplay};

/// Result alias for compiler operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failure inside one op's conversion, shape inference or reference evaluation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OpError {
    /// Input shapes are incompatible (broadcasting, contraction dims, concat axes...).
    #[error("shape mismatch: {detail} (input shapes {})", fmt_shapes(shapes))]
    ShapeMismatch {
        /// What did not agree.
        detail: String,
        /// The input shapes as seen by the op.
        shapes: Vec<Shape>,
    },
    /// An attribute is missing, of the wrong kind, or out of range.
    #[error("attribute '{attr}': {reason}")]
    InvalidAttribute {
        /// Attribute name.
        attr: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An input has a dtype the op does not accept.
    #[error("input {input} has dtype {dtype}, expected {expected}")]
    DType {
        /// Input position.
        input: usize,
        /// Its dtype.
        dtype: DType,
        /// What the op accepts.
        expected: String,
    },
    /// Wrong number of inputs.
    #[error("expected {expected} inputs, got {actual}")]
    Arity {
        /// What the op accepts, e.g. "2" or "1 to 3".
        expected: String,
        /// Inputs given.
        actual: usize,
    },
    /// An input that decides output shapes (a Reshape target, Slice bounds...) is not known at
    /// compile time.
    #[error(
        "input {input} ('{name}') decides the output shape but is not a constant; make it an \
         initializer, or give its value when compiling"
    )]
    NotConstant {
        /// Input position.
        input: usize,
        /// Input value name.
        name: String,
    },
    /// An input whose *values* decide the output's shape (NonZero, Unique, NonMaxSuppression,
    /// Compress's condition) is not known at compile time: arenac's shapes are static.
    #[error(
        "output shape depends on the input's values (input {input} '{name}' is not known at \
         compile time), so it cannot be static; give that input's value when compiling \
         (`arenac run --input`) or make it an initializer"
    )]
    DataDependent {
        /// Input position.
        input: usize,
        /// Input value name.
        name: String,
    },
    /// A constant index (Gather, GatherElements, GatherND, the scatters) or sequence length
    /// (ReverseSequence) outside its valid range: ONNX calls it an error.
    #[error(
        "input {input}: {what} {value} is out of range (valid: {lo} to {hi}); fix the model's \
         constant"
    )]
    OutOfRange {
        /// Input position.
        input: usize,
        /// What the value is ("index", "sequence length").
        what: &'static str,
        /// The value.
        value: i64,
        /// Lowest valid value.
        lo: i64,
        /// Highest valid value.
        hi: i64,
    },
    /// A valid ONNX construct arenac does not implement (a mode, a dtype, an attribute value).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A size computation overflowed.
    #[error("size overflow: {0}")]
    Overflow(String),
}

impl OpError {
    /// Shorthand for [`OpError::ShapeMismatch`].
    pub fn shape(detail: impl Into<String>, shapes: &[&[usize]]) -> OpError {
        OpError::ShapeMismatch {
            detail: detail.into(),
            shapes: shapes.iter().map(|s| s.to_vec()).collect(),
        }
    }

    /// [`OpError::OutOfRange`] for index `value` (input `input`) into a dim of `dim`: valid
    /// `-dim..=dim-1`.
    pub fn index(input: usize, value: i64, dim: usize) -> OpError {
        let d = i64::try_from(dim).unwrap_or(i64::MAX);
        OpError::OutOfRange {
            input,
            what: "index",
            value,
            lo: -d,
            hi: d - 1,
        }
    }

    /// Shorthand for [`OpError::InvalidAttribute`].
    pub fn attr(attr: &str, reason: impl Into<String>) -> OpError {
        OpError::InvalidAttribute {
            attr: attr.to_string(),
            reason: reason.into(),
        }
    }
}

fn fmt_shapes(shapes: &[Shape]) -> String {
    shapes
        .iter()
        .map(|s| ShapeDisplay(s).to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Any failure of loading, importing or inferring a model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The model or an external-data file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The operating system refused memory arenac asked for (e.g. sealing the weights region
    /// read-only): not a model problem.
    #[error("the system refused {what}: {source}")]
    System {
        /// What was asked.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a valid ONNX protobuf (random, truncated or corrupted file).
    #[error("not a valid ONNX model ({reason}); is the file complete and really a .onnx model?")]
    Decode {
        /// The decoder's description.
        reason: String,
    },
    /// The model is structurally invalid (no graph, bad IR version...).
    #[error("invalid model: {0}")]
    InvalidModel(String),
    /// The model's text form (ONNX textual syntax) does not parse.
    #[error("syntax error at line {line}, column {column}: {reason}")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was expected.
        reason: String,
    },
    /// A node's op is not in arenac's op set (or not for this domain or opset).
    #[error(
        "node '{node}': op {op} (domain '{domain}', opset {opset}) is not supported; `arenac ops` \
         lists what is"
    )]
    UnsupportedOp {
        /// Op type.
        op: String,
        /// Domain ("" is the default ONNX domain).
        domain: String,
        /// The model's opset version for that domain.
        opset: i64,
        /// Node name.
        node: String,
    },
    /// The model imports an opset version arenac does not handle.
    #[error("opset {version} of domain '{domain}' is not supported (supported: {supported})")]
    UnsupportedOpset {
        /// Domain.
        domain: String,
        /// Version the model asks for.
        version: i64,
        /// Supported range.
        supported: String,
    },
    /// A node failed conversion, inference or evaluation.
    #[error("node '{node}' ({op}): {source}")]
    Node {
        /// Node name (or `#index` when the file gives none).
        node: String,
        /// Op type.
        op: String,
        /// What went wrong.
        #[source]
        source: OpError,
    },
    /// A node reads a value that no node, input or initializer defines.
    #[error(
        "node '{node}' ({op}) reads '{value}', which no node, graph input or initializer defines"
    )]
    MissingValue {
        /// Node name.
        node: String,
        /// Op type.
        op: String,
        /// The undefined value.
        value: String,
    },
    /// A graph output names a value nothing defines.
    #[error("graph output '{0}' is not produced by any node, input or initializer")]
    MissingOutput(String),
    /// Two definitions of the same value name (SSA violated).
    #[error("value '{name}' is defined twice (by {first} and by {second})")]
    DuplicateValue {
        /// The name.
        name: String,
        /// First definer.
        first: String,
        /// Second definer.
        second: String,
    },
    /// The graph has a cycle through the named node.
    #[error("the graph has a cycle through node '{node}'; ONNX graphs must be acyclic")]
    Cycle {
        /// A node on the cycle.
        node: String,
    },
    /// A tensor (initializer or constant) is malformed.
    #[error("tensor '{name}': {reason}")]
    InvalidTensor {
        /// Tensor name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A tensor has an element type arenac does not handle.
    #[error(
        "tensor '{name}': element type {} is not supported (strings, complex and 6-bit floats are not)",
        onnx_type_name(*code)
    )]
    UnsupportedDType {
        /// Tensor or value name.
        name: String,
        /// The ONNX data type code.
        code: i32,
    },
    /// An external-data reference is invalid: missing file, out-of-range offset/length, or a
    /// location that escapes the model's folder.
    #[error("tensor '{name}': external data {reason}")]
    ExternalData {
        /// Tensor name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A user-given `NAME=DxD...` shape does not parse or names nothing.
    #[error("--shape {spec}: {reason}")]
    ShapeSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// A graph input's given shape disagrees with the model's declaration.
    #[error(
        "input '{input}': given shape {} but the model declares {declared}",
        ShapeDisplay(given)
    )]
    InputShape {
        /// Input name.
        input: String,
        /// Declared dims, e.g. `[N,3,224,224]`.
        declared: String,
        /// Given dims.
        given: Shape,
    },
    /// The planned memory (arena + weights) exceeds the memory limit (`--memory-limit`, or the
    /// machine's physical RAM when none is given). The message names the limit, the total
    /// needed, the peak step and its node, the largest buffers live there, and what would fit:
    /// the largest value of a symbolic batch dim, or how many bytes over it is.
    #[error("{0}")]
    MemoryBudget(Box<budget::BudgetExceeded>),
    /// A memory limit does not parse (`64MiB`, `1.5GiB`, `500MB`, `123456`, `10%`) or cannot be
    /// resolved (a percentage without a readable `/proc/meminfo`).
    #[error("--memory-limit {spec}: {reason}")]
    MemoryLimitSpec {
        /// The limit as given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// The arena plan broke a rule of the independent plan verifier: an arenac bug.
    #[error("arena plan failed verification (an arenac bug): {0}")]
    PlanInternal(String),
    /// A graph input declares no usable type.
    #[error("graph input '{input}': {reason}")]
    InputType {
        /// Input name.
        input: String,
        /// What is missing.
        reason: String,
    },
}

/// `FLOAT8E4M3FN (17)` for an ONNX `TensorProto.DataType` code, or the bare number when the
/// code is unknown.
fn onnx_type_name(code: i32) -> String {
    match arenac_proto::tensor_proto::DataType::try_from(code) {
        Ok(t) => format!("{} ({code})", t.as_str_name()),
        Err(_) => code.to_string(),
    }
}
