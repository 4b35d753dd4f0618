//! Casts from and to the storage types (8-/4-bit floats, 4-/2-bit integers, one element per
//! byte: `crate::ir::lowp`): the kernel is one call of the precompiled Rust helper
//! [`arenac_cast_storage`] over the whole (contiguous) tensor.
//!
//! Why a Rust helper and not Cranelift IR: the conversions are scalar bit manipulation with
//! many cases per format (subnormals, ties to even, saturation, three NaN conventions, E8M0's
//! own rounding), which `ir::lowp` implements once and `compiler/tests/lowp.rs` checks
//! against onnx's values; emitting them again in IR would be a second implementation to get
//! right for code that is rarely hot (a DequantizeLinear of constant weights folds at
//! compile time). The helper reads and writes through raw pointers element by element,
//! allocates nothing and cannot panic.
//!
//! Conversions match the reference evaluation (`ops::elementwise::eval`) and the typed
//! kernels (`super::cast`): values are read into f32 (f32, f16, bf16, the storage floats:
//! exact), f64, or i64 (integers, bools as 0/1; u64 kept unsigned); integers convert to
//! floats through f64; floats to integers truncate toward zero (saturating, NaN → 0) and
//! wrap to the width; `x != 0` gives bool (NaN → true).

use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{AbiParam, InstBuilder, Signature, Value};
use cranelift_frontend::FunctionBuilder;
use half::{bf16, f16};

use crate::ir::lowp::{self, CastMode, E8m0Round};
use crate::ir::types::DType;

/// The helper's description of one cast: source and target ONNX type codes, saturation and
/// E8M0 rounding, in one integer (bits 0-7 `from`, 8-15 `to`, 16 saturate, 17-18 rounding).
pub fn cast_spec(from: DType, to: DType, mode: CastMode) -> u64 {
    let round = match mode.round {
        E8m0Round::Up => 0,
        E8m0Round::Down => 1,
        E8m0Round::Nearest => 2,
    };
    (from.to_onnx() as u64 & 0xff)
        | ((to.to_onnx() as u64 & 0xff) << 8)
        | (u64::from(mode.saturate) << 16)
        | (round << 17)
}

fn parse_spec(spec: u64) -> Option<(DType, DType, CastMode)> {
    let from = DType::from_onnx((spec & 0xff) as i32)?;
    let to = DType::from_onnx(((spec >> 8) & 0xff) as i32)?;
    let round = match (spec >> 17) & 3 {
        0 => E8m0Round::Up,
        1 => E8m0Round::Down,
        2 => E8m0Round::Nearest,
        _ => return None,
    };
    let saturate = spec & (1 << 16) != 0;
    Some((from, to, CastMode { saturate, round }))
}

/// One element in its computation domain.
#[derive(Clone, Copy)]
enum Val {
    F32(f32),
    F64(f64),
    I64(i64),
    U64(u64),
}

impl Val {
    /// As f32 (integers through f64).
    fn f32(self) -> f32 {
        match self {
            Val::F32(x) => x,
            Val::F64(x) => x as f32,
            Val::I64(v) => v as f64 as f32,
            Val::U64(v) => v as f64 as f32,
        }
    }

    fn f64(self) -> f64 {
        match self {
            Val::F32(x) => f64::from(x),
            Val::F64(x) => x,
            Val::I64(v) => v as f64,
            Val::U64(v) => v as f64,
        }
    }

    /// As i64: floats truncated toward zero, saturating, NaN → 0; u64 bits kept.
    fn i64(self) -> i64 {
        match self {
            Val::F32(x) => x as i64,
            Val::F64(x) => x as i64,
            Val::I64(v) => v,
            Val::U64(v) => v as i64,
        }
    }

    fn nonzero(self) -> bool {
        match self {
            Val::F32(x) => x != 0.0,
            Val::F64(x) => x != 0.0,
            Val::I64(v) => v != 0,
            Val::U64(v) => v != 0,
        }
    }
}

/// Reads element `i` of `dt` at `p`.
///
/// # Safety
/// `p` must point to at least `(i + 1) * dt.size()` readable bytes.
unsafe fn read(dt: DType, p: *const u8, i: usize) -> Val {
    /// The `N` bytes at `q`.
    ///
    /// # Safety
    /// `q` must point to `N` readable bytes (any alignment).
    unsafe fn le<const N: usize>(q: *const u8) -> [u8; N] {
        // SAFETY: by the caller; `[u8; N]` has no alignment or validity requirement.
        unsafe { std::ptr::read_unaligned(q.cast::<[u8; N]>()) }
    }
    // SAFETY: the caller guarantees the `dt.size()` bytes of element `i` are readable.
    unsafe {
        let q = p.add(i * dt.size());
        match dt {
            DType::F32 => Val::F32(f32::from_le_bytes(le(q))),
            DType::F64 => Val::F64(f64::from_le_bytes(le(q))),
            DType::F16 => Val::F32(f16::from_le_bytes(le(q)).to_f32()),
            DType::BF16 => Val::F32(bf16::from_le_bytes(le(q)).to_f32()),
            DType::I8 => Val::I64(i64::from(*q as i8)),
            DType::U8 => Val::I64(i64::from(*q)),
            DType::Bool => Val::I64(i64::from(*q != 0)),
            DType::I16 => Val::I64(i64::from(i16::from_le_bytes(le(q)))),
            DType::U16 => Val::I64(i64::from(u16::from_le_bytes(le(q)))),
            DType::I32 => Val::I64(i64::from(i32::from_le_bytes(le(q)))),
            DType::U32 => Val::I64(i64::from(u32::from_le_bytes(le(q)))),
            DType::I64 => Val::I64(i64::from_le_bytes(le(q))),
            DType::U64 => Val::U64(u64::from_le_bytes(le(q))),
            DType::I4 | DType::U4 | DType::I2 | DType::U2 => Val::I64(lowp::decode_int(dt, *q)),
            DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::F4E2M1 => Val::F32(lowp::decode_float(dt, *q)),
        }
    }
}

/// Stores the `N` bytes `b` as element `i` of an `N`-byte type at `p`.
///
/// # Safety
/// `p` must point to at least `(i + 1) * N` writable bytes.
#[inline]
unsafe fn put<const N: usize>(p: *mut u8, i: usize, b: [u8; N]) {
    // SAFETY: by the caller; `[u8; N]` has no alignment requirement.
    unsafe { std::ptr::write_unaligned(p.add(i * N).cast::<[u8; N]>(), b) }
}

/// Writes `v` as element `i` of `dt` at `p`.
///
/// # Safety
/// `p` must point to at least `(i + 1) * dt.size()` writable bytes.
unsafe fn write(dt: DType, mode: CastMode, v: Val, p: *mut u8, i: usize) {
    // SAFETY: each arm writes `dt.size()` bytes of element `i`, writable by the caller.
    unsafe {
        match dt {
            DType::F32 => put(p, i, v.f32().to_le_bytes()),
            DType::F64 => put(p, i, v.f64().to_le_bytes()),
            DType::F16 => put(p, i, f16::from_f32(v.f32()).to_le_bytes()),
            DType::BF16 => put(p, i, bf16::from_f32(v.f32()).to_le_bytes()),
            DType::Bool => put(p, i, [u8::from(v.nonzero())]),
            DType::F8E4M3FN
            | DType::F8E4M3FNUZ
            | DType::F8E5M2
            | DType::F8E5M2FNUZ
            | DType::F8E8M0
            | DType::F4E2M1 => put(p, i, [lowp::encode_float(dt, v.f32(), mode)]),
            DType::I4 | DType::U4 | DType::I2 | DType::U2 => {
                put(p, i, [lowp::encode_int(dt, v.i64())])
            }
            DType::I8 | DType::U8 => put(p, i, [v.i64() as u8]),
            DType::I16 | DType::U16 => put(p, i, (v.i64() as u16).to_le_bytes()),
            DType::I32 | DType::U32 => put(p, i, (v.i64() as u32).to_le_bytes()),
            DType::I64 | DType::U64 => put(p, i, v.i64().to_le_bytes()),
        }
    }
}

/// Converts `n` contiguous elements at `src` into `dst` as [`cast_spec`] `spec` describes (an
/// invalid spec does nothing: the code generator only emits valid ones). Element `i` is read
/// before it is written, so `dst == src` is allowed when both types have the same size.
/// f32 to and from the storage types take loops of their own (a storage source of 256
/// elements or more through a table of its 256 codes); every other pair reads and writes
/// through [`Val`].
///
/// # Safety
/// `src` must hold `n` readable elements of the source type and `dst` `n` writable elements
/// of the target type; the two ranges overlap only as said above.
pub unsafe extern "C" fn arenac_cast_storage(src: *const u8, dst: *mut u8, n: u64, spec: u64) {
    let Some((from, to, mode)) = parse_spec(spec) else {
        return;
    };
    let n = n as usize;
    if from == DType::F32
        && let Some(codec) = lowp::FloatCodec::new(to, mode)
    {
        for i in 0..n {
            // SAFETY: `i < n`: element `i` lies within both buffers (the contract above).
            unsafe {
                let x = f32::from_le_bytes(std::ptr::read_unaligned(src.add(4 * i).cast()));
                put(dst, i, [codec.encode(x)]);
            }
        }
        return;
    }
    if from == DType::F32 && to.is_storage() {
        for i in 0..n {
            // SAFETY: `i < n`: element `i` lies within both buffers (the contract above).
            unsafe {
                let x = f32::from_le_bytes(std::ptr::read_unaligned(src.add(4 * i).cast()));
                put(dst, i, [lowp::encode_int(to, x as i64)]);
            }
        }
        return;
    }
    if to == DType::F32 && from.is_storage() && n >= 256 {
        let table: [f32; 256] = std::array::from_fn(|c| {
            let code = c as u8;
            // SAFETY: `code` is one readable byte, element 0 of a one-byte type.
            unsafe { read(from, &code, 0) }.f32()
        });
        for i in 0..n {
            // SAFETY: `i < n`: element `i` lies within both buffers (the contract above).
            unsafe {
                let c = *src.add(i);
                put(dst, i, table[usize::from(c)].to_le_bytes());
            }
        }
        return;
    }
    for i in 0..n {
        // SAFETY: `i < n`: element `i` lies within both buffers (the contract above).
        unsafe {
            let v = read(from, src, i);
            write(to, mode, v, dst, i);
        }
    }
}

/// Emits the call of [`arenac_cast_storage`] converting `n` elements from `ptrs[0]` into
/// `ptrs[1]`.
pub(crate) fn emit_cast(b: &mut FunctionBuilder<'_>, ptrs: &[Value], n: usize, spec: u64) {
    let mut sig = Signature::new(b.func.signature.call_conv);
    sig.params.extend([AbiParam::new(I64); 4]);
    let sref = b.import_signature(sig);
    let f = arenac_cast_storage as unsafe extern "C" fn(*const u8, *mut u8, u64, u64);
    let addr = b.ins().iconst(I64, f as usize as i64);
    let n = b.ins().iconst(I64, n as i64);
    let spec = b.ins().iconst(I64, spec as i64);
    b.ins()
        .call_indirect(sref, addr, &[ptrs[0], ptrs[1], n, spec]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips() {
        let mode = CastMode {
            saturate: false,
            round: E8m0Round::Nearest,
        };
        for from in DType::ALL {
            for to in DType::ALL {
                assert_eq!(
                    parse_spec(cast_spec(from, to, mode)),
                    Some((from, to, mode))
                );
            }
        }
        assert_eq!(parse_spec(0), None);
    }
}
