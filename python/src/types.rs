//! Element types between arenac and numpy / ONNX Runtime: arenac's [`DType`], numpy's dtype
//! names and ONNX Runtime's `tensor(...)` spellings.

use arenac::DType;

/// ONNX Runtime's `NodeArg.type` for a dtype (`"tensor(float)"`...).
pub fn ort_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "tensor(float)",
        DType::F64 => "tensor(double)",
        DType::F16 => "tensor(float16)",
        DType::BF16 => "tensor(bfloat16)",
        DType::I8 => "tensor(int8)",
        DType::I16 => "tensor(int16)",
        DType::I32 => "tensor(int32)",
        DType::I64 => "tensor(int64)",
        DType::U8 => "tensor(uint8)",
        DType::U16 => "tensor(uint16)",
        DType::U32 => "tensor(uint32)",
        DType::U64 => "tensor(uint64)",
        DType::Bool => "tensor(bool)",
        DType::F8E4M3FN => "tensor(float8e4m3fn)",
        DType::F8E4M3FNUZ => "tensor(float8e4m3fnuz)",
        DType::F8E5M2 => "tensor(float8e5m2)",
        DType::F8E5M2FNUZ => "tensor(float8e5m2fnuz)",
        DType::F8E8M0 => "tensor(float8e8m0)",
        DType::F4E2M1 => "tensor(float4e2m1)",
        DType::I4 => "tensor(int4)",
        DType::U4 => "tensor(uint4)",
        DType::I2 => "tensor(int2)",
        DType::U2 => "tensor(uint2)",
    }
}

/// The numpy dtype name that holds a dtype's elements as arenac stores them: the same type
/// where numpy has one; bfloat16 as its `uint16` bit patterns; the 8-, 4- and 2-bit storage
/// types as one `uint8` code per element (4-/2-bit integers sign- or zero-extended in
/// outputs, read by their low bits in inputs).
pub fn numpy_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::F64 => "float64",
        DType::F16 => "float16",
        DType::BF16 | DType::U16 => "uint16",
        DType::I8 => "int8",
        DType::I16 => "int16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
        DType::Bool => "bool",
        DType::I4 | DType::I2 => "int8",
        DType::U8
        | DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ
        | DType::F8E8M0
        | DType::F4E2M1
        | DType::U4
        | DType::U2 => "uint8",
    }
}

/// ONNX Runtime's spelling of a numpy dtype name, for messages (`float64` → `tensor(double)`);
/// the numpy name itself when arenac has no such type.
pub fn ort_type_of_numpy(name: &str) -> String {
    match dtype_of_numpy(name) {
        Some(d) => ort_type(d).to_string(),
        None => format!("numpy {name}"),
    }
}

/// The dtype a numpy array of dtype `name` (native byte order) is read as.
pub fn dtype_of_numpy(name: &str) -> Option<DType> {
    Some(match name {
        "float32" => DType::F32,
        "float64" => DType::F64,
        "float16" => DType::F16,
        "int8" => DType::I8,
        "int16" => DType::I16,
        "int32" => DType::I32,
        "int64" => DType::I64,
        "uint8" => DType::U8,
        "uint16" => DType::U16,
        "uint32" => DType::U32,
        "uint64" => DType::U64,
        "bool" => DType::Bool,
        _ => return None,
    })
}

/// Whether an input of dtype `slot` accepts a numpy array of dtype `given`: the same type, or
/// the carrier numpy dtype of a type numpy lacks ([`numpy_name`]).
pub fn accepts(slot: DType, given: &str) -> bool {
    match dtype_of_numpy(given) {
        Some(d) if d == slot => true,
        _ => numpy_name(slot) == given && dtype_of_numpy(given) != Some(slot) && !is_native(slot),
    }
}

/// Whether numpy has this dtype itself.
fn is_native(d: DType) -> bool {
    dtype_of_numpy(numpy_name(d)) == Some(d)
}
