//! Packing B into the GEMM's column panels ([`NR`] wide, `k` rows each, zero-padded past `n`):
//! at compile time from a weight (f32 values, little-endian bytes, or any element source) and at
//! run time from arena memory ([`arenac_pack_b`]). The layout is the contract in `gemm/mod.rs`.

use super::NR;

/// Length in floats of B (`k x n`) once packed: `k` rows of `n` rounded up to [`NR`].
pub fn packed_b_len(k: usize, n: usize) -> usize {
    k.saturating_mul(n.div_ceil(NR).saturating_mul(NR))
}

/// Packs B given by element strides (`b[i * rs + j * cs]` is row i, column j of the `k x n`
/// matrix) into `out`, which must hold [`packed_b_len`]`(k, n)` floats.
///
/// # Panics
/// If `b` is too short for the strides or `out` too short (caller bugs; the code generator
/// sizes both from checked types).
pub fn pack_b(k: usize, n: usize, b: &[f32], rs: usize, cs: usize, out: &mut [f32]) {
    if cs == 1 && k > 0 && n > 0 {
        // Rows contiguous in B: each panel row is a slice copy.
        let out = &mut out[..packed_b_len(k, n)];
        for (jp, panel) in out.chunks_exact_mut(k * NR).enumerate() {
            let j0 = jp * NR;
            let w = NR.min(n - j0);
            for (i, row) in panel.chunks_exact_mut(NR).enumerate() {
                row[..w].copy_from_slice(&b[i * rs + j0..i * rs + j0 + w]);
                row[w..].fill(0.0);
            }
        }
        return;
    }
    pack_b_from(k, n, |i| b[i], rs, cs, out);
}

/// [`pack_b`] of an f32 matrix stored as little-endian bytes at any alignment (a weight in a
/// mapped file): no converted copy, each element read once (rows contiguous in B are copied
/// as bytes on a little-endian host).
///
/// # Panics
/// If `b` holds fewer than `(k - 1) * rs + (n - 1) * cs + 1` floats or `out` fewer than
/// [`packed_b_len`]`(k, n)` (caller bugs, as for [`pack_b`]).
pub fn pack_b_le(k: usize, n: usize, b: &[u8], rs: usize, cs: usize, out: &mut [f32]) {
    if k == 0 || n == 0 {
        return;
    }
    let floats = (k - 1) * rs + (n - 1) * cs + 1;
    assert!(b.len() >= floats * 4, "pack_b_le: B too short");
    let out = &mut out[..packed_b_len(k, n)];
    if cs == 1 && cfg!(target_endian = "little") {
        for (jp, panel) in out.chunks_exact_mut(k * NR).enumerate() {
            let j0 = jp * NR;
            let w = NR.min(n - j0);
            for (i, row) in panel.chunks_exact_mut(NR).enumerate() {
                let src = &b[(i * rs + j0) * 4..(i * rs + j0 + w) * 4];
                // SAFETY: `row` holds NR >= w floats, `src` exactly 4 * w bytes (checked by
                // the slicing); the two are distinct allocations; any bytes are a valid f32 and
                // the host stores floats little-endian, as B is.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        src.as_ptr(),
                        row.as_mut_ptr().cast::<u8>(),
                        w * 4,
                    )
                };
                row[w..].fill(0.0);
            }
        }
        return;
    }
    let read = |i: usize| {
        // SAFETY: every index pack_b_from asks for is at most `floats - 1` (row < k, column
        // < n), and `b` holds `floats * 4` bytes (asserted above).
        let c = unsafe { b.get_unchecked(i * 4..i * 4 + 4) };
        f32::from_le_bytes([c[0], c[1], c[2], c[3]])
    };
    pack_b_from(k, n, read, rs, cs, out);
}

/// [`pack_b`] over any source: `b(i)` is element `i` of B's storage (`i = row * rs + col * cs`).
/// Compile-time packing reads a weight's little-endian bytes through this, without first
/// converting the whole matrix to a `Vec<f32>`.
pub fn pack_b_from(
    k: usize,
    n: usize,
    b: impl Fn(usize) -> f32,
    rs: usize,
    cs: usize,
    out: &mut [f32],
) {
    let out = &mut out[..packed_b_len(k, n)];
    for (jp, panel) in out.chunks_exact_mut((k * NR).max(1)).enumerate() {
        let j0 = jp * NR;
        let w = NR.min(n - j0);
        for (i, row) in panel.chunks_exact_mut(NR).enumerate() {
            for (jj, x) in row[..w].iter_mut().enumerate() {
                *x = b(i * rs + (j0 + jj) * cs);
            }
            row[w..].fill(0.0);
        }
    }
}

/// Run-time packing of B from arena memory (for a product of two activations).
///
/// # Safety
/// `b` must be valid for reads of every `b[i * rs + j * cs]` (`i < k`, `j < n`) and `out` for
/// writes of [`packed_b_len`]`(k, n)` floats; the two must not overlap.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn arenac_pack_b(
    k: usize,
    n: usize,
    b: *const f32,
    rs: usize,
    cs: usize,
    out: *mut f32,
) {
    for jp in 0..n.div_ceil(NR) {
        let j0 = jp * NR;
        let w = NR.min(n - j0);
        for i in 0..k {
            // SAFETY: `(jp * k + i) * NR + NR <= packed_b_len(k, n)`, writable by the contract.
            let row = unsafe { std::slice::from_raw_parts_mut(out.add((jp * k + i) * NR), NR) };
            for (jj, x) in row[..w].iter_mut().enumerate() {
                // SAFETY: `i < k` and `j0 + jj < n`: readable by the contract; `b` and `out` do
                // not overlap, so the slice `row` aliases nothing read here.
                *x = unsafe { *b.add(i * rs + (j0 + jj) * cs) };
            }
            row[w..].fill(0.0);
        }
    }
}
