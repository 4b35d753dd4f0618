//! The typed graph IR: element types and shapes, constant tensors, the graph, its printer and
//! its verifier. Knows nothing of ONNX files, planning or code generation.

pub mod eval;
pub mod graph;
pub mod lowp;
pub mod print;
pub mod tensor;
pub mod types;
pub mod verify;
