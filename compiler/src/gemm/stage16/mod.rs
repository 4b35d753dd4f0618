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
//! - [`convt`]: ConvTranspose in bands of output rows, GEMM + col2im into an f32 band;
//! - [`ew`]: element-wise programs (Add/Sub/Mul/Div with broadcasting, fused SiLU) in
//!   chunks through stack buffers;
//! - [`math`]: vectorizable `erf` and `exp` (Erf nodes, fused GELU chains, Softmax);
//! - [`rows`]: Softmax and LayerNormalization, a row at a time;
//! - [`matmul`]: Gemm/MatMul with a constant B, a block of A's rows at a time through
//!   [`super::arenac_sgemm`];
//! - [`split`]: how a node's tasks (bands, runs, blocks, rows, pieces of chunks) go to the
//!   session's threads, each in the scratch slot of its thread: bit-identical to one thread.
//!
//! Every staged kernel's f32 scratch is planned in the arena (`crate::ops::Op::scratch_bytes`
//! asks the functions here), so the arena printed is what runs.

pub mod conv;
pub mod convert;
pub mod convt;
pub mod ew;
pub mod math;
pub mod matmul;
pub mod pool;
pub mod rows;
pub mod split;

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
/// each chunk is read whole before it is written); pieces of whole chunks spread over the
/// threads ([`split::for_pieces`]).
///
/// # Safety
/// `x` readable and `y` writable for `n` 16-bit values; either equal or not overlapping.
pub unsafe fn unary(t: N16, n: usize, x: *const u16, y: *mut u16, f: &(dyn Fn(&mut [f32]) + Sync)) {
    let (xs, ys) = (split::Shared::of(x), split::Shared(y));
    let cost = crate::par::cost::elems_ns(n);
    split::for_pieces(n, CHUNK, crate::par::threads(), cost, |e0, e1, _| {
        // SAFETY: elements `e0..e1` of `x` and `y` (this piece's alone), by the contract.
        unsafe { unary_range(t, e0, e1, xs.get(), ys.get(), f) }
    });
}

/// [`unary`] of elements `e0..e1`.
///
/// # Safety
/// As [`unary`], for those elements.
unsafe fn unary_range(
    t: N16,
    e0: usize,
    e1: usize,
    x: *const u16,
    y: *mut u16,
    f: &(dyn Fn(&mut [f32]) + Sync),
) {
    let mut buf = [0f32; CHUNK];
    let mut at = e0;
    while at < e1 {
        let len = CHUNK.min(e1 - at);
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
/// (on AVX-512 in registers, [`pool::gap`]: f32 lane sums added in a tree; elsewhere f32
/// running sums in lanes added in f64: as exact as the f32 kernel or better) and rounded
/// once. Whole planes are widened together, up to [`CHUNK`] elements per call, and
/// the means narrowed a block at a time; pieces of planes spread over the threads (each
/// mean is its plane's alone: the same bits however the planes are cut).
pub fn gap(t: N16, planes: usize, len: usize, x: &[u16], y: &mut [u16]) {
    let per = (CHUNK / len.max(1)).clamp(1, CHUNK);
    let cost = crate::par::cost::elems_ns(planes * len);
    let ys = split::Shared(y.as_mut_ptr());
    let ny = y.len();
    split::for_pieces(planes, per, crate::par::threads(), cost, |p0, p1, _| {
        let xs = x.get(p0 * len..p1 * len).unwrap_or_default();
        // SAFETY: means `p0..p1` of `y` (inside it: clamped to its length) are this
        // piece's alone.
        let yp = unsafe {
            std::slice::from_raw_parts_mut(ys.get().add(p0.min(ny)), p1.min(ny) - p0.min(ny))
        };
        gap_planes(t, p1 - p0, len, xs, yp);
    });
}

/// [`gap`] of the planes `x` holds, on this thread.
fn gap_planes(t: N16, planes: usize, len: usize, x: &[u16], y: &mut [u16]) {
    let mut means = [0f32; CHUNK];
    if len > 0 && pool::gap::available() {
        // The means in registers ([`pool::gap`]), up to [`CHUNK`] planes at a time.
        let mut p0 = 0;
        while p0 < planes {
            let np = CHUNK.min(planes - p0);
            let block = x.get(p0 * len..(p0 + np) * len).unwrap_or_default();
            pool::gap::means(t, len, block, &mut means[..np]);
            if let Some(dst) = y.get_mut(p0..p0 + np) {
                narrow(t, &means[..np], dst);
            }
            p0 += np;
        }
        return;
    }
    let mut buf = [0f32; CHUNK];
    let len1 = len.max(1);
    // Planes per block: as many whole planes as the buffer holds (at least one).
    let per = (CHUNK / len1).clamp(1, CHUNK);
    let mut p0 = 0;
    while p0 < planes {
        let np = per.min(planes - p0);
        for (j, m) in means.iter_mut().enumerate().take(np) {
            let p = p0 + j;
            let mut sum = 0f64;
            if len >= 512 && pool::sums16() {
                // The same sums read straight from the 16-bit plane, a chunk at a time
                // (from 512 values: EfficientNet-B0's 28x28 planes 12% faster so, its
                // 14x14 ones 12% slower than from a widened block of planes).
                let plane = x.get(p * len..(p + 1) * len).unwrap_or_default();
                for c in plane.chunks(CHUNK) {
                    sum += pool::sum64_16(t, c);
                }
            } else if len <= CHUNK {
                if j == 0 {
                    let block = x.get(p0 * len..(p0 + np) * len).unwrap_or_default();
                    widen(t, block, &mut buf[..block.len()]);
                }
                sum = sum64(buf.get(j * len..(j + 1) * len).unwrap_or_default());
            } else {
                let plane = x.get(p * len..(p + 1) * len).unwrap_or_default();
                for c in plane.chunks(CHUNK) {
                    widen(t, c, &mut buf[..c.len()]);
                    sum += sum64(&buf[..c.len()]);
                }
            }
            *m = (sum / len1 as f64) as f32;
        }
        if let Some(dst) = y.get_mut(p0..p0 + np) {
            narrow(t, &means[..np], dst);
        }
        p0 += np;
    }
}

/// The sum of `v`: 64 running f32 sums (lanes the compiler vectorizes, enough vectors to
/// hide the add latency; each sums a 64th of the plane) folded into 8, the rest (all of a
/// small plane: 7x7 is 49) in those 8 lanes, then the 8 and the last few added in f64.
fn sum64(v: &[f32]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked above).
        return unsafe { sum64_avx2(v) };
    }
    sum64_lanes(v)
}

/// [`sum64_lanes`] compiled for AVX2: 8-lane vectors for the running sums, the same adds in
/// the same order (the same bits).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum64_avx2(v: &[f32]) -> f64 {
    sum64_lanes(v)
}

/// The body of [`sum64`].
#[inline(always)]
fn sum64_lanes(v: &[f32]) -> f64 {
    let mut acc8 = [0f32; 8];
    let mut it = v.chunks_exact(64);
    if it.len() > 0 {
        let mut acc = [0f32; 64];
        for c in &mut it {
            for (a, &e) in acc.iter_mut().zip(c) {
                *a += e;
            }
        }
        for c in acc.chunks_exact(8) {
            for (a, &e) in acc8.iter_mut().zip(c) {
                *a += e;
            }
        }
    }
    sum_tail(acc8, it.remainder())
}

/// The end of [`sum64_lanes`]: `rest` (the last values, fewer than 64) added into the 8
/// lanes `acc8` a group of 8 at a time, the lanes added in f64, then the last few.
#[inline(always)]
fn sum_tail(mut acc8: [f32; 8], rest: &[f32]) -> f64 {
    let mut rest = rest.chunks_exact(8);
    for c in &mut rest {
        for (a, &e) in acc8.iter_mut().zip(c) {
            *a += e;
        }
    }
    let mut s: f64 = acc8.iter().map(|&a| f64::from(a)).sum();
    for &e in rest.remainder() {
        s += f64::from(e);
    }
    s
}

#[cfg(test)]
mod par_tests;
#[cfg(test)]
mod tests;
