//! 16-bit activations (`--activations f16|bf16`, `crate::analysis::act_type`): kernels that
//! read and write f16/bf16 data while computing in f32 with the f32 kernels, staging small
//! blocks so no full-size f32 copy exists:
//! - [`widen`] / [`narrow`]: a run of elements between the two forms ([`convert`]: AVX-512
//!   or AVX2+F16C loops, `half`'s conversions elsewhere; round to nearest even);
//! - [`unary`]: a one-input activation in chunks of [`CHUNK`] elements through a stack buffer
//!   (safe in place);
//! - [`gap`]: GlobalAveragePool, plane by plane;
//! - [`pool`]: Max/AveragePool, a block of whole planes at a time through
//!   [`super::pool::arenac_pool2d`];
//! - [`conv`]: Conv in bands of output rows through [`super::conv::arenac_conv2d`];
//! - [`rows`]: Softmax and LayerNormalization, a row at a time;
//! - [`matmul`]: Gemm/MatMul with a constant B, a block of A's rows at a time through
//!   [`super::arenac_sgemm`].
//!
//! Every staged kernel's f32 scratch is planned in the arena (`crate::ops::Op::scratch_bytes`
//! asks the functions here), so the arena printed is what runs.

pub mod conv;
pub mod convert;
pub mod matmul;
pub mod pool;
pub mod rows;

/// A 16-bit storage type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum N16 {
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
}

/// Elements per chunk of the element-wise kernels' stack buffer.
pub const CHUNK: usize = 1024;

/// Bytes of f32 staging a block should stay within (input and output together): small
/// enough to stay in L2 and out of the arena's peak.
pub const STAGE_BYTES: usize = 128 << 10;

/// Writes `src` (16-bit values as bits) widened into `dst` (`src.len()` floats): AVX-512 or
/// AVX2+F16C loops, else `half`'s conversions ([`convert`]).
pub fn widen(t: N16, src: &[u16], dst: &mut [f32]) {
    convert::widen_with(convert::isa(), t, src, dst);
}

/// Writes `src` rounded (to nearest even) into `dst` (`src.len()` 16-bit values as bits).
pub fn narrow(t: N16, src: &[f32], dst: &mut [u16]) {
    convert::narrow_with(convert::isa(), t, src, dst);
}

/// `y[i] = f(x[i])` for `n` elements, computed in f32 a chunk at a time (`x == y` allowed:
/// each chunk is read whole before it is written).
///
/// # Safety
/// `x` readable and `y` writable for `n` 16-bit values; either equal or not overlapping.
pub unsafe fn unary(t: N16, n: usize, x: *const u16, y: *mut u16, f: &dyn Fn(&mut [f32])) {
    let mut buf = [0f32; CHUNK];
    let mut at = 0;
    while at < n {
        let len = CHUNK.min(n - at);
        {
            // SAFETY: inside `x`'s `n` elements; dropped before `y` is written.
            let src = unsafe { std::slice::from_raw_parts(x.add(at), len) };
            widen(t, src, &mut buf[..len]);
        }
        f(&mut buf[..len]);
        // SAFETY: inside `y`'s `n` elements; no other live reference to them.
        let dst = unsafe { std::slice::from_raw_parts_mut(y.add(at), len) };
        narrow(t, &buf[..len], dst);
        at += len;
    }
}

/// GlobalAveragePool over `planes` planes of `len` elements: each mean computed in f32
/// (summed in f64 blocks of [`CHUNK`], as exact as the f32 kernel or better) and rounded once.
pub fn gap(t: N16, planes: usize, len: usize, x: &[u16], y: &mut [u16]) {
    let mut buf = [0f32; CHUNK];
    let mut out = [0f32; 1];
    for (p, yv) in y.iter_mut().enumerate().take(planes) {
        let plane = x.get(p * len..(p + 1) * len).unwrap_or_default();
        let mut sum = 0f64;
        for c in plane.chunks(CHUNK) {
            widen(t, c, &mut buf[..c.len()]);
            sum += buf[..c.len()].iter().map(|&v| f64::from(v)).sum::<f64>();
        }
        out[0] = (sum / len.max(1) as f64) as f32;
        narrow(t, &out, std::slice::from_mut(yv));
    }
}

#[cfg(test)]
mod tests;
