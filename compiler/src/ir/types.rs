//! Element types and shapes of IR values.

use std::fmt;

/// Element type of a tensor. Discriminants are not ONNX's; use [`DType::from_onnx`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 64-bit IEEE float.
    F64,
    /// 16-bit IEEE float.
    F16,
    /// bfloat16.
    BF16,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// Boolean, one byte per element (0 or 1).
    Bool,
    /// 8-bit float E4M3, finite only (`FLOAT8E4M3FN`): NaN is `S.1111.111`, max 448.
    F8E4M3FN,
    /// 8-bit float E4M3, finite only, no negative zero (`FLOAT8E4M3FNUZ`): NaN is `0x80`.
    F8E4M3FNUZ,
    /// 8-bit float E5M2 with infinities (`FLOAT8E5M2`), max 57344.
    F8E5M2,
    /// 8-bit float E5M2, finite only, no negative zero (`FLOAT8E5M2FNUZ`): NaN is `0x80`.
    F8E5M2FNUZ,
    /// 8-bit unsigned power of two `2^(e - 127)` (`FLOAT8E8M0`): NaN is `0xff`.
    F8E8M0,
    /// 4-bit float E2M1, finite only (`FLOAT4E2M1`): max 6.
    F4E2M1,
    /// Signed 4-bit integer (`INT4`), -8..=7.
    I4,
    /// Unsigned 4-bit integer (`UINT4`), 0..=15.
    U4,
    /// Signed 2-bit integer (`INT2`), -2..=1.
    I2,
    /// Unsigned 2-bit integer (`UINT2`), 0..=3.
    U2,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 23] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::Bool,
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::F8E8M0,
        DType::F4E2M1,
        DType::I4,
        DType::U4,
        DType::I2,
        DType::U2,
    ];

    /// Maps an ONNX `TensorProto.DataType` code to a dtype; `None` for types arenac does not
    /// handle (strings, complex, 6-bit floats).
    pub fn from_onnx(code: i32) -> Option<DType> {
        Some(match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            4 => DType::U16,
            5 => DType::I16,
            6 => DType::I32,
            7 => DType::I64,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            12 => DType::U32,
            13 => DType::U64,
            16 => DType::BF16,
            17 => DType::F8E4M3FN,
            18 => DType::F8E4M3FNUZ,
            19 => DType::F8E5M2,
            20 => DType::F8E5M2FNUZ,
            21 => DType::U4,
            22 => DType::I4,
            23 => DType::F4E2M1,
            24 => DType::F8E8M0,
            25 => DType::U2,
            26 => DType::I2,
            _ => return None,
        })
    }

    /// The ONNX `TensorProto.DataType` code of this dtype.
    pub fn to_onnx(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::BF16 => 16,
            DType::F8E4M3FN => 17,
            DType::F8E4M3FNUZ => 18,
            DType::F8E5M2 => 19,
            DType::F8E5M2FNUZ => 20,
            DType::U4 => 21,
            DType::I4 => 22,
            DType::F4E2M1 => 23,
            DType::F8E8M0 => 24,
            DType::U2 => 25,
            DType::I2 => 26,
        }
    }

    /// Bytes per element in memory: in the arena, the weights, constants and the tensors a
    /// `Session` reads and writes. The 4- and 2-bit types take one byte per element there
    /// (the low bits; see [`crate::ir::lowp`]) and are packed only in files
    /// ([`DType::packed_bits`]).
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::F4E2M1
            | DType::I4
            | DType::U4
            | DType::I2
            | DType::U2 => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// True for the floating-point dtypes, the 8- and 4-bit storage floats included.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::F32
                | DType::F64
                | DType::F16
                | DType::BF16
                | DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1
        )
    }

    /// True for the signed and unsigned integer dtypes (not bool), the 4- and 2-bit ones
    /// included.
    pub fn is_int(self) -> bool {
        !self.is_float() && self != DType::Bool
    }

    /// True for the storage types: the 8- and 4-bit floats and the 4- and 2-bit integers.
    /// Values of these types are only stored, cast and moved (`Cast`, views, `Transpose`...):
    /// `ops::Op::infer` refuses them elsewhere. Quantize/DequantizeLinear reach them through
    /// `Cast`.
    pub fn is_storage(self) -> bool {
        matches!(
            self,
            DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1
                | DType::I4
                | DType::U4
                | DType::I2
                | DType::U2
        )
    }

    /// Bits per element in an ONNX `TensorProto` (and `.pb` files), where 4-bit types pack two
    /// elements per byte and 2-bit types four (low bits first): `Some(4)` or `Some(2)` for
    /// those, `None` for the byte-sized and wider types.
    pub fn packed_bits(self) -> Option<usize> {
        match self {
            DType::I4 | DType::U4 | DType::F4E2M1 => Some(4),
            DType::I2 | DType::U2 => Some(2),
            _ => None,
        }
    }

    /// Short lower-case name used by the printer and in messages: `f32`, `i64`, `bool`...
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::Bool => "bool",
            DType::F8E4M3FN => "f8e4m3fn",
            DType::F8E4M3FNUZ => "f8e4m3fnuz",
            DType::F8E5M2 => "f8e5m2",
            DType::F8E5M2FNUZ => "f8e5m2fnuz",
            DType::F8E8M0 => "f8e8m0",
            DType::F4E2M1 => "f4e2m1",
            DType::I4 => "i4",
            DType::U4 => "u4",
            DType::I2 => "i2",
            DType::U2 => "u2",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A static shape: every dimension known. Rank 0 is a scalar.
pub type Shape = Vec<usize>;

/// The type of a value: element type and static shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Static shape.
    pub shape: Shape,
}

impl TensorType {
    /// Builds a type.
    pub fn new(dtype: DType, shape: Shape) -> Self {
        TensorType { dtype, shape }
    }

    /// Number of elements, or `None` when the product overflows `usize`.
    pub fn numel(&self) -> Option<usize> {
        checked_numel(&self.shape)
    }

    /// Size in bytes, or `None` on overflow.
    pub fn bytes(&self) -> Option<usize> {
        self.numel()?.checked_mul(self.dtype.size())
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, ShapeDisplay(&self.shape))
    }
}

/// Product of the dimensions, `None` on overflow.
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Displays a shape as `[1,3,224,224]`.
pub struct ShapeDisplay<'a>(pub &'a [usize]);

impl fmt::Display for ShapeDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// Row-major strides (in elements) of a shape.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}
