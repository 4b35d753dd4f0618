//! ONNX `TensorProto` files (`.pb`, as in the ONNX test data folders), decoded with
//! `arenac-proto` and converted by the compiler's own `tensor_from_proto` (raw data or typed
//! fields; external data is refused). The tensor formats of the storage types: 4- and 2-bit
//! elements are packed in the file and one per byte in the `TensorBuf`.

use std::path::Path;

use arenac_compiler::import::tensor_proto::tensor_from_proto;
use arenac_compiler::ir::lowp;
use arenac_proto::{Message, TensorProto};

use super::{IoError, TensorBuf};
use crate::session::TensorRef;

/// Reads a `TensorProto` file: the tensor and its stored name (`None` when empty).
pub fn read_pb(path: &Path) -> Result<(TensorBuf, Option<String>), IoError> {
    let bytes = std::fs::read(path).map_err(|source| IoError::Io {
        what: "read",
        path: path.to_path_buf(),
        source,
    })?;
    decode_pb(&bytes).map_err(|reason| IoError::Format {
        path: path.to_path_buf(),
        reason,
    })
}

/// Decodes the bytes of a `TensorProto`; the error is a one-line reason.
pub fn decode_pb(bytes: &[u8]) -> Result<(TensorBuf, Option<String>), String> {
    let proto = TensorProto::decode(bytes).map_err(|e| {
        format!("not a valid ONNX TensorProto ({e}); use .npy or a TensorProto .pb")
    })?;
    let t = tensor_from_proto(&proto, None).map_err(|e| e.to_string())?;
    let name = Some(proto.name().to_string()).filter(|n| !n.is_empty());
    let buf = TensorBuf::new(t.dtype(), t.shape().to_vec(), t.bytes().to_vec())
        .map_err(|e| e.to_string())?;
    Ok((buf, name))
}

/// Encodes a tensor as a `TensorProto` with raw data (for tests and tools).
pub fn encode_pb(name: &str, t: &TensorBuf) -> Vec<u8> {
    encode_pb_view(name, t.view())
}

/// Encodes a borrowed tensor (a session output) as a `TensorProto` with raw data (4- and 2-bit
/// types packed, as ONNX stores them).
pub fn encode_pb_view(name: &str, t: TensorRef<'_>) -> Vec<u8> {
    let proto = TensorProto {
        name: Some(name.to_string()),
        data_type: Some(t.dtype().to_onnx()),
        dims: t.shape().iter().map(|&d| d as i64).collect(),
        raw_data: Some(lowp::pack(t.dtype(), t.bytes()).into()),
        ..TensorProto::default()
    };
    proto.encode_to_vec()
}

/// Writes a tensor as a `TensorProto` file named `name` (every dtype, bf16 included).
pub fn write_pb(path: &Path, name: &str, t: TensorRef<'_>) -> Result<(), IoError> {
    std::fs::write(path, encode_pb_view(name, t)).map_err(|source| IoError::Io {
        what: "write",
        path: path.to_path_buf(),
        source,
    })
}
