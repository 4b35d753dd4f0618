//! Reading and writing tensors: NumPy `.npy` files ([`npy`]) and ONNX `TensorProto` `.pb`
//! files ([`pb`]), both into an owned [`TensorBuf`]. Every arenac dtype reads and writes:
//! `.npy` for those numpy has, `.pb` for bf16 ([`write_output_file`] picks).

use std::path::{Path, PathBuf};

use arenac_compiler::ir::types::{DType, TensorType};

use crate::session::{RunError, TensorRef};

pub mod input_spec;
pub mod npy;
pub mod pb;

/// An owned tensor: dtype, shape and little-endian C-order bytes (always exactly
/// `numel * dtype.size()` of them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorBuf {
    dtype: DType,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl TensorBuf {
    /// Builds a tensor from raw little-endian bytes, checking their length.
    pub fn new(dtype: DType, shape: Vec<usize>, data: Vec<u8>) -> Result<TensorBuf, RunError> {
        TensorRef::from_bytes(dtype, &shape, &data)?;
        Ok(TensorBuf { dtype, shape, data })
    }

    /// Copies a view.
    pub fn from_view(t: TensorRef<'_>) -> TensorBuf {
        TensorBuf {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            data: t.bytes().to_vec(),
        }
    }

    /// A borrowed view for [`crate::Session::run`].
    pub fn view(&self) -> TensorRef<'_> {
        TensorRef::new_unchecked(self.dtype, &self.shape, &self.data)
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Raw little-endian bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// Dtype and shape.
    pub fn ty(&self) -> TensorType {
        TensorType::new(self.dtype, self.shape.clone())
    }
}

/// Reads a tensor from `.npy` or, for any other extension, a `TensorProto` `.pb` file. The
/// second value is the name stored in a `.pb` file (if any).
pub fn read_tensor_file(path: &Path) -> Result<(TensorBuf, Option<String>), IoError> {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
    {
        Ok((npy::read_npy(path)?, None))
    } else {
        pb::read_pb(path)
    }
}

/// Writes `t` as `DIR/STEM.npy`, or, for a dtype numpy lacks (bf16), as `DIR/STEM.pb`: a
/// `TensorProto` named `name` (read it with `onnx.numpy_helper.to_array`). Returns the path
/// written.
pub fn write_output_file(
    dir: &Path,
    stem: &str,
    name: &str,
    t: TensorRef<'_>,
) -> Result<PathBuf, IoError> {
    if npy::descr(t.dtype()).is_some() {
        let path = dir.join(format!("{stem}.npy"));
        npy::write_npy(&path, t)?;
        Ok(path)
    } else {
        let path = dir.join(format!("{stem}.pb"));
        pb::write_pb(&path, name, t)?;
        Ok(path)
    }
}

/// Why a tensor file could not be read or written. Messages are one line naming the file.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// The file could not be read or written.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        /// "read" or "write".
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file's content is not what it should be.
    #[error("{}: {reason}", path.display())]
    Format {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        reason: String,
    },
}
