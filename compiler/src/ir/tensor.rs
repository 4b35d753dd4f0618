//! Constant tensors: weights, folded values, and the operands of the reference evaluation.
//!
//! Data is kept as little-endian raw bytes in a [`Bytes`], which may point into a memory-mapped
//! model or external-data file (no copy) or own a heap buffer. arenac supports little-endian
//! hosts only; ONNX's raw data is little-endian.
//!
//! The reference evaluation computes in two domains: floats as `f64` (exact for the basic
//! arithmetic of every narrower float type once rounded back) and integers/bools as `i64`
//! (`u64` values above `i64::MAX` wrap; no supported op produces them). The storage types
//! (`super::lowp`: 8-/4-bit floats, 4-/2-bit integers) take one byte per element; their
//! floats are exact in f64 and values are stored into them with `CastMode::DEFAULT`
//! (saturating, like onnx's `make_tensor`).

use bytes::Bytes;
use half::{bf16, f16};

use super::lowp::{self, CastMode};
use super::types::{DType, Shape, ShapeDisplay, TensorType, checked_numel};

/// An immutable, cheaply clonable constant tensor.
#[derive(Clone, PartialEq)]
pub struct Tensor {
    dtype: DType,
    shape: Shape,
    data: Bytes,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor({}{})", self.dtype, ShapeDisplay(&self.shape))
    }
}

/// Why raw bytes could not form a tensor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TensorDataError {
    /// The shape's element count overflows `usize`.
    #[error("shape {shape:?} has too many elements")]
    Overflow {
        /// The offending shape.
        shape: Shape,
    },
    /// The byte length does not match dtype size times element count.
    #[error(
        "data has {actual} bytes but {dtype}{} needs {expected}",
        ShapeDisplay(shape)
    )]
    Length {
        /// Element type.
        dtype: DType,
        /// Shape.
        shape: Shape,
        /// Bytes needed.
        expected: usize,
        /// Bytes given.
        actual: usize,
    },
}

impl Tensor {
    /// Builds a tensor from raw little-endian bytes, checking the length.
    pub fn from_bytes(dtype: DType, shape: Shape, data: Bytes) -> Result<Tensor, TensorDataError> {
        let expected = checked_numel(&shape)
            .and_then(|n| n.checked_mul(dtype.size()))
            .ok_or_else(|| TensorDataError::Overflow {
                shape: shape.clone(),
            })?;
        if data.len() != expected {
            return Err(TensorDataError::Length {
                dtype,
                shape,
                expected,
                actual: data.len(),
            });
        }
        Ok(Tensor { dtype, shape, data })
    }

    /// Builds a tensor of `dtype` from `f64` values, rounding/converting each element.
    /// Panics if `values.len()` is not the shape's element count (a caller bug).
    pub fn from_f64(dtype: DType, shape: Shape, values: &[f64]) -> Tensor {
        assert_eq!(checked_numel(&shape), Some(values.len()), "from_f64 length");
        let mut out = Vec::with_capacity(values.len() * dtype.size());
        for &v in values {
            push_f64(&mut out, dtype, v);
        }
        Tensor {
            dtype,
            shape,
            data: Bytes::from(out),
        }
    }

    /// Builds a tensor of `dtype` from `i64` values, converting each element.
    /// Panics if `values.len()` is not the shape's element count (a caller bug).
    pub fn from_i64(dtype: DType, shape: Shape, values: &[i64]) -> Tensor {
        assert_eq!(checked_numel(&shape), Some(values.len()), "from_i64 length");
        let mut out = Vec::with_capacity(values.len() * dtype.size());
        for &v in values {
            push_i64(&mut out, dtype, v);
        }
        Tensor {
            dtype,
            shape,
            data: Bytes::from(out),
        }
    }

    /// An `f32` tensor.
    pub fn f32(shape: Shape, values: &[f32]) -> Tensor {
        let v: Vec<f64> = values.iter().map(|&x| f64::from(x)).collect();
        Tensor::from_f64(DType::F32, shape, &v)
    }

    /// An `i64` tensor.
    pub fn i64(shape: Shape, values: &[i64]) -> Tensor {
        Tensor::from_i64(DType::I64, shape, values)
    }

    /// A tensor with every element equal to `value` (given in the f64 or i64 domain).
    pub fn filled(dtype: DType, shape: Shape, value: Scalar) -> Tensor {
        let n = checked_numel(&shape).unwrap_or(0);
        let mut one = Vec::with_capacity(dtype.size());
        match value {
            Scalar::Float(v) => push_f64(&mut one, dtype, v),
            Scalar::Int(v) => push_i64(&mut one, dtype, v),
        }
        let data = one.repeat(n);
        Tensor {
            dtype,
            shape,
            data: Bytes::from(data),
        }
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Type (dtype and shape).
    pub fn ty(&self) -> TensorType {
        TensorType::new(self.dtype, self.shape.clone())
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.data.len() / self.dtype.size()
    }

    /// Raw little-endian bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.data
    }

    /// The same data under another shape with the same element count.
    pub fn reshaped(&self, shape: Shape) -> Option<Tensor> {
        (checked_numel(&shape)? == self.numel()).then(|| Tensor {
            dtype: self.dtype,
            shape,
            data: self.data.clone(),
        })
    }

    /// The elements converted to `f64` (integers and bools convert exactly up to 2^53).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        let sz = self.dtype.size();
        self.data
            .chunks_exact(sz)
            .map(|c| read_f64(self.dtype, c))
            .collect()
    }

    /// The elements converted to `i64` (floats truncate toward zero, saturating).
    pub fn to_i64_vec(&self) -> Vec<i64> {
        let sz = self.dtype.size();
        self.data
            .chunks_exact(sz)
            .map(|c| read_i64(self.dtype, c))
            .collect()
    }

    /// The elements as `f32` (converted when the dtype differs).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        if self.dtype == DType::F32 {
            self.data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        } else {
            self.to_f64_vec().into_iter().map(|v| v as f32).collect()
        }
    }

    /// The elements of an `f32` tensor as a borrowed slice, when its bytes are 4-byte aligned
    /// (a weight mapped from a file may sit at any offset; `None` then, and for other dtypes).
    pub fn f32_slice(&self) -> Option<&[f32]> {
        if self.dtype != DType::F32 || !cfg!(target_endian = "little") {
            return None;
        }
        // SAFETY: any 4 initialized bytes are a valid f32; `align_to` only yields the middle
        // part at an aligned address, and the data is immutable for the borrow of `self`.
        let (head, floats, tail) = unsafe { self.data.align_to::<f32>() };
        (head.is_empty() && tail.is_empty()).then_some(floats)
    }

    /// Writes the elements as `f32` (converted when the dtype differs) into `out`, in order,
    /// stopping at the shorter of the two: decoding straight into a destination (the weights
    /// region) without an intermediate vector.
    pub fn write_f32s(&self, out: &mut [f32]) {
        if self.dtype == DType::F32 {
            for (x, c) in out.iter_mut().zip(self.data.chunks_exact(4)) {
                *x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        } else {
            let sz = self.dtype.size();
            for (x, c) in out.iter_mut().zip(self.data.chunks_exact(sz)) {
                *x = read_f64(self.dtype, c) as f32;
            }
        }
    }

    /// Element `i` of an `f32` tensor, read from its little-endian bytes (`None` for another
    /// dtype or an index out of range). For compile-time packing of large weights without a
    /// converted copy.
    pub fn f32_at(&self, i: usize) -> Option<f32> {
        if self.dtype != DType::F32 {
            return None;
        }
        let c = self
            .data
            .get(i.checked_mul(4)?..i.checked_mul(4)?.checked_add(4)?)?;
        Some(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
    }

    /// Element `i` as a scalar in the dtype's computation domain, `None` when out of range.
    pub fn scalar_at(&self, i: usize) -> Option<Scalar> {
        let sz = self.dtype.size();
        let c = self
            .data
            .get(i.checked_mul(sz)?..i.checked_mul(sz)?.checked_add(sz)?)?;
        Some(if self.dtype.is_float() {
            Scalar::Float(read_f64(self.dtype, c))
        } else {
            Scalar::Int(read_i64(self.dtype, c))
        })
    }
}

/// One element in the reference evaluation's computation domain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A float, computed as `f64`.
    Float(f64),
    /// An integer or bool, computed as `i64`.
    Int(i64),
}

impl Scalar {
    /// The value as `f64`.
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Float(v) => v,
            Scalar::Int(v) => v as f64,
        }
    }

    /// The value as `i64` (floats truncate, saturating).
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::Float(v) => v as i64,
            Scalar::Int(v) => v,
        }
    }
}

/// One element of `dtype` from the start of `c` as `f64` (integers converted, bools 0/1).
/// `c` holds at least `dtype.size()` bytes (shorter is a caller bug: it panics).
pub fn read_f64(dtype: DType, c: &[u8]) -> f64 {
    match dtype {
        DType::F32 => f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        DType::F64 => f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        DType::F16 => f16::from_le_bytes([c[0], c[1]]).to_f64(),
        DType::BF16 => bf16::from_le_bytes([c[0], c[1]]).to_f64(),
        dt if dt.is_float() => f64::from(lowp::decode_float(dt, c[0])),
        _ => read_i64(dtype, c) as f64,
    }
}

/// One element of `dtype` at the start of `c` as i64 (floats truncated toward zero; `c` holds at
/// least `dtype.size()` bytes).
pub fn read_i64(dtype: DType, c: &[u8]) -> i64 {
    match dtype {
        DType::I8 => i64::from(c[0] as i8),
        DType::U8 => i64::from(c[0]),
        DType::Bool => i64::from(c[0] != 0),
        DType::I16 => i64::from(i16::from_le_bytes([c[0], c[1]])),
        DType::U16 => i64::from(u16::from_le_bytes([c[0], c[1]])),
        DType::I32 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        DType::U32 => i64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        DType::I64 | DType::U64 => {
            i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
        }
        DType::I4 | DType::U4 | DType::I2 | DType::U2 => lowp::decode_int(dtype, c[0]),
        DType::F32
        | DType::F64
        | DType::F16
        | DType::BF16
        | DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1 => read_f64(dtype, c) as i64,
    }
}

fn push_f64(out: &mut Vec<u8>, dtype: DType, v: f64) {
    match dtype {
        DType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
        DType::F64 => out.extend_from_slice(&v.to_le_bytes()),
        DType::F16 => out.extend_from_slice(&f16::from_f64(v).to_le_bytes()),
        DType::BF16 => out.extend_from_slice(&bf16::from_f64(v).to_le_bytes()),
        DType::Bool => out.push(u8::from(v != 0.0)),
        dt if dt.is_storage() => out.push(lowp::encode_f64(dt, v, CastMode::DEFAULT)),
        // Float to int conversion truncates toward zero and saturates, like a C cast on
        // in-range values.
        _ => push_i64(out, dtype, v as i64),
    }
}

/// Writes `v` as one element of `dtype` into the first `dtype.size()` bytes of `dst` (nothing
/// when `dst` is shorter), converted as [`Tensor::from_f64`] converts. Allocates nothing: for
/// kernels running inside an arena.
pub fn write_f64(dst: &mut [u8], dtype: DType, v: f64) {
    fn wide<const N: usize>(b: [u8; N]) -> [u8; 8] {
        let mut o = [0u8; 8];
        o[..N].copy_from_slice(&b);
        o
    }
    let i = v as i64;
    let bytes = match dtype {
        DType::F32 => wide((v as f32).to_le_bytes()),
        DType::F64 => v.to_le_bytes(),
        DType::F16 => wide(f16::from_f64(v).to_le_bytes()),
        DType::BF16 => wide(bf16::from_f64(v).to_le_bytes()),
        DType::Bool => wide([u8::from(v != 0.0)]),
        DType::I8 => wide([i as i8 as u8]),
        DType::U8 => wide([i as u8]),
        DType::I16 => wide((i as i16).to_le_bytes()),
        DType::U16 => wide((i as u16).to_le_bytes()),
        DType::I32 => wide((i as i32).to_le_bytes()),
        DType::U32 => wide((i as u32).to_le_bytes()),
        DType::I64 | DType::U64 => i.to_le_bytes(),
        dt => wide([lowp::encode_f64(dt, v, CastMode::DEFAULT)]),
    };
    let n = dtype.size();
    if let (Some(d), Some(s)) = (dst.get_mut(..n), bytes.get(..n)) {
        d.copy_from_slice(s);
    }
}

fn push_i64(out: &mut Vec<u8>, dtype: DType, v: i64) {
    match dtype {
        DType::I8 => out.push(v as i8 as u8),
        DType::U8 => out.push(v as u8),
        DType::Bool => out.push(u8::from(v != 0)),
        DType::I16 => out.extend_from_slice(&(v as i16).to_le_bytes()),
        DType::U16 => out.extend_from_slice(&(v as u16).to_le_bytes()),
        DType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
        DType::U32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
        DType::I64 | DType::U64 => out.extend_from_slice(&v.to_le_bytes()),
        DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1
        | DType::I4
        | DType::U4
        | DType::I2
        | DType::U2 => out.push(lowp::encode_i64(dtype, v, CastMode::DEFAULT)),
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => push_f64(out, dtype, v as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_every_dtype() {
        for dt in DType::ALL {
            let t = Tensor::from_i64(dt, vec![3], &[0, 1, 1]);
            assert_eq!(t.to_i64_vec(), vec![0, 1, 1], "{dt}");
            assert_eq!(t.bytes().len(), 3 * dt.size());
        }
        let t = Tensor::from_f64(DType::F16, vec![2], &[1.5, -2.0]);
        assert_eq!(t.to_f64_vec(), vec![1.5, -2.0]);
    }

    #[test]
    fn write_f64_converts_as_from_f64() {
        for dt in DType::ALL {
            for v in [0.0, 0.75, 1.0, -3.5, 300.25] {
                let t = Tensor::from_f64(dt, vec![], &[v]);
                let mut b = vec![0xAAu8; 9];
                write_f64(&mut b, dt, v);
                assert_eq!(&b[..dt.size()], t.bytes().as_ref(), "{dt} {v}");
                assert!(b[dt.size()..].iter().all(|&x| x == 0xAA));
                assert_eq!(read_f64(dt, &b), t.to_f64_vec()[0]);
            }
        }
    }

    #[test]
    fn length_checked() {
        let err = Tensor::from_bytes(DType::F32, vec![2, 2], Bytes::from(vec![0u8; 15]));
        assert!(matches!(
            err,
            Err(TensorDataError::Length { expected: 16, .. })
        ));
        let err = Tensor::from_bytes(DType::F32, vec![usize::MAX, 3], Bytes::new());
        assert!(matches!(err, Err(TensorDataError::Overflow { .. })));
    }
}
