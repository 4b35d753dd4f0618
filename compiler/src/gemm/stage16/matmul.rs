//! Gemm/MatMul on 16-bit data: `Y[r, j0..j1] = A[r, :] x B[:, j0..j1] (+ C)` a block of A's
//! rows at a time — the block widened into f32 scratch, multiplied by
//! [`crate::gemm::arenac_sgemm`] into f32 scratch, the bias added, narrowed into Y. B is
//! taken a block of columns at a time (a run of its packed panels, [`MmStage::cols`]) small
//! enough to stay in L2 while every row block of A passes over it: without that, each of
//! the many small row blocks streamed all of a large B from L3 (a 128x2048 by 2048x256
//! product ran 1.5x the f32 time). B is either a constant packed at compile time (alpha
//! folded in) and shared by every row, or a run-time 16-bit operand with one `K x N` matrix
//! per batch slice (same batch dims as A), widened and packed into scratch one slice at a
//! time.

use super::split::{Shared, slot_count, task_width};
use super::{N16, narrow, widen};
use crate::gemm::{MC, NR, a_scratch_slot, arenac_pack_b, arenac_sgemm, packed_b_len};

mod tall;
#[cfg(test)]
mod tall_tests;

/// Whether a reduced constant B's product runs in [`tall`] row blocks (`ARENAC_MM_TALL=0`:
/// the planned blocks, for A/B comparisons).
fn tall_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("ARENAC_MM_TALL").map_or(true, |v| v != "0"))
}

/// Bytes of packed f32 B one column block should stay within (half a 1 MiB L2).
const B_BLOCK_BYTES: usize = 512 << 10;

/// Rows of A a block may hold and still run on the small kernels (`crate::gemm::small`: fewer
/// rows than the 12-row AVX-512 micro-kernel; the AVX2 kernel's 6-row one takes such a block
/// in pieces of 5), which read the widened rows in place: no A-packing slot, so a block of
/// this many rows fits the scratch of a packed one of far fewer. A 128x2048 by 2048x256
/// product (user CPU time, 300 runs of two such pairs): 4-11 rows per block 1.05-1.09x the
/// f32 time, 2 rows 1.25x, 12-24 rows (packed, A packed again per column block) 1.16-1.20x.
const SMALL_ROWS: usize = 11;

/// Geometry of one staged product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmStage {
    /// Batch slices (1 with a constant B: A's batch dims are folded into `m`).
    pub batch: usize,
    /// Rows of A per slice.
    pub m: usize,
    /// Inner dimension.
    pub k: usize,
    /// Columns of B and Y.
    pub n: usize,
    /// B is a run-time 16-bit operand (`batch` matrices of `k x n`, row-major).
    pub runtime_b: bool,
    /// Threads the scratch has A-packing slots for.
    pub threads: usize,
}

impl MmStage {
    /// Columns of B and Y per column block: a multiple of [`NR`] (whole packed panels) whose
    /// `k` rows of f32 fit [`B_BLOCK_BYTES`], at least one panel; all of `n` when B fits.
    pub fn cols(&self) -> usize {
        let n = self.n.max(1);
        let fit = (B_BLOCK_BYTES / (self.k.max(1) * 4)) / NR * NR;
        if fit >= n { n } else { fit.max(NR) }
    }

    /// Columns per column block at `block` rows per row block: all of `n` once a row block
    /// holds [`MC`] rows or all of A's (the product's own row blocks then stream B as the
    /// f32 path does, and column blocks would only pack the same rows of A once per block);
    /// else [`Self::cols`].
    pub fn cols_at(&self, block: usize) -> usize {
        let m = self.m.max(1);
        if block.clamp(1, m) >= MC.min(m) {
            self.n.max(1)
        } else {
            self.cols()
        }
    }

    /// The smallest block of A's rows, the one the planner starts from: as many rows as fit
    /// 1/24 of the 16-bit A and Y (between 16 KiB and [`super::STAGE_BYTES`]) with a column
    /// block of Y, at least one.
    /// Where the node's step is below the arena's peak the planner grows it ([`Self::blocks`],
    /// `crate::analysis::liveness::tiles`): a block of a few rows streams all of B through
    /// the micro-kernel for those few rows (a 128x512x1024 product at 2 rows per block ran
    /// 1.4x the f32 time).
    pub fn min_block(&self) -> usize {
        let bytes16 = (self.batch * self.m * (self.k + self.n)).saturating_mul(2);
        let budget = (bytes16 / 24).clamp(16 << 10, super::STAGE_BYTES);
        let m = self.m.max(1);
        let rows = (budget / ((self.k + self.cols()) * 4).max(1)).clamp(1, m);
        if rows > SMALL_ROWS {
            return rows;
        }
        // As many rows as the small kernels take within the scratch those rows would have
        // with an A-packing slot (the arena does not grow).
        let cap = self.scratch_floats(rows, true);
        (rows..=SMALL_ROWS.min(m))
            .rev()
            .find(|&b| self.scratch_floats(b, false) <= cap)
            .unwrap_or(rows)
    }

    /// The blocks worth planning, largest first: all of A's rows, then halves while above
    /// [`Self::min_block`], which is last.
    pub fn blocks(&self) -> Vec<usize> {
        let min = self.min_block();
        let mut out = Vec::new();
        let mut b = self.m.max(1);
        while b > min {
            out.push(b);
            b /= 2;
        }
        out.push(min);
        out
    }

    /// The largest of [`Self::blocks`] whose scratch fits `bytes` ([`Self::min_block`] when
    /// none does): how the lowering reads back the block the planner chose.
    pub fn block_for_scratch(&self, bytes: usize) -> usize {
        self.blocks()
            .into_iter()
            .find(|&b| self.scratch_bytes_at(b) <= bytes)
            .unwrap_or_else(|| self.min_block())
    }

    /// Tasks of one batch slice at `block` rows: row blocks times column blocks.
    fn tasks(&self, block: usize) -> usize {
        let b = block.clamp(1, self.m.max(1));
        self.m.max(1).div_ceil(b) * self.n.max(1).div_ceil(self.cols_at(b))
    }

    /// Floats of the scratch parts at `block` rows: A blocks, Y blocks (one per slot,
    /// [`crate::gemm::stage16::split::slot_count`]), A-packing slots (one per thread; none
    /// for a block of at most [`SMALL_ROWS`]), widened B, packed B.
    fn parts(&self, block: usize) -> [usize; 5] {
        self.parts_with(block, block.clamp(1, self.m.max(1)) > SMALL_ROWS)
    }

    /// Total floats of [`Self::parts_with`].
    fn scratch_floats(&self, block: usize, packing: bool) -> usize {
        self.parts_with(block, packing).iter().sum()
    }

    /// [`Self::parts`], with or without the A-packing slots.
    fn parts_with(&self, block: usize, packing: bool) -> [usize; 5] {
        let b = block.clamp(1, self.m.max(1));
        let cols = self.cols_at(b);
        let up = |f: usize| f.next_multiple_of(16);
        let (bw, bp) = if self.runtime_b {
            (up(self.k * self.n), up(packed_b_len(self.k, self.n)))
        } else {
            (0, 0)
        };
        let slots = slot_count(self.tasks(block), self.threads.max(1));
        let packing = if packing {
            up(a_scratch_slot(b, self.k) * self.threads.max(1))
        } else {
            0
        };
        [
            up(b * self.k) * slots,
            up(b * cols) * slots,
            packing,
            bw,
            bp,
        ]
    }

    /// Scratch bytes [`matmul`] uses at `block` rows per block.
    pub fn scratch_bytes_at(&self, block: usize) -> usize {
        self.parts(block).iter().sum::<usize>().saturating_mul(4)
    }

    /// Scratch bytes at [`Self::min_block`] (what the planner plans first).
    pub fn scratch_bytes(&self) -> usize {
        self.scratch_bytes_at(self.min_block())
    }
}

/// The product on 16-bit A and Y, `block` rows of A at a time (clamped to `1..=m`; the
/// result does not depend on it: each output element is the same sum in the same order):
/// `packed_b` is the constant B packed (f32 when `b_type` is 0, else in the reduced type of
/// that [`crate::gemm::lowp::WeightType::code`] by [`crate::gemm::lowp::pack_b_lowp`]), or
/// `b` the run-time 16-bit B; `bias` null or a row of `n` floats added to every output row.
///
/// # Safety
/// `a` readable for `batch*m*k` values, `y` writable for `batch*m*n`, not overlapping;
/// with `s.runtime_b`, `b` readable for `batch*k*n` values, else `packed_b` for
/// `packed_b_len(k, n)` floats (`lowp_b_bytes(t, k, n)` bytes for a reduced `b_type`); `bias` null or readable for `n` floats; `scratch` writable
/// for [`MmStage::scratch_bytes_at`] `block` bytes, 64-aligned, overlapping nothing else.
#[allow(clippy::too_many_arguments)]
pub unsafe fn matmul(
    t: N16,
    s: &MmStage,
    b_type: u64,
    block: usize,
    a: *const u16,
    b: *const u16,
    packed_b: *const f32,
    bias: *const f32,
    y: *mut u16,
    scratch: *mut f32,
) {
    let ops = (a, b, packed_b, bias, y, scratch);
    // SAFETY: the caller's contract.
    unsafe { matmul_with(t, s, b_type, block, ops, tall_enabled()) }
}

/// The operands of [`matmul`]: A, the run-time B, the packed B, the bias, Y, the scratch.
type Operands = (
    *const u16,
    *const u16,
    *const f32,
    *const f32,
    *mut u16,
    *mut f32,
);

/// [`matmul`], a reduced constant B's product in [`tall`] row blocks where they fit and
/// `tall_ok` (the same bits either way).
///
/// # Safety
/// That of [`matmul`].
unsafe fn matmul_with(
    t: N16,
    s: &MmStage,
    b_type: u64,
    block: usize,
    (a, b, packed_b, bias, y, scratch): Operands,
    tall_ok: bool,
) {
    let block = block.clamp(1, s.m.max(1));
    let [pa, pc, ps, pbw, _] = s.parts(block);
    let (m, k, n) = (s.m, s.k, s.n);
    if m == 0 || n == 0 {
        return;
    }
    let threads = s.threads.max(1);
    let slots = slot_count(s.tasks(block), threads);
    let (a_slot, c_slot) = (pa / slots, pc / slots);
    // A block of at most SMALL_ROWS rows has no A-packing slot: its products run on the
    // small kernels, which read the widened rows in place, in pieces of fewer rows than the
    // micro-kernel's (all of them on AVX-512; 5 at a time on AVX2).
    let aslot = if ps == 0 { 0 } else { a_scratch_slot(block, k) };
    let piece = if ps == 0 {
        crate::gemm::selected_kernel().mr.saturating_sub(1).max(1)
    } else {
        block
    };
    // SAFETY: the scratch parts are disjoint and inside the scratch ([`MmStage::parts`]).
    let (sa, sc, sslot, sbw, sbp) = unsafe {
        (
            scratch,
            scratch.add(pa),
            scratch.add(pa + pc),
            scratch.add(pa + pc + ps),
            scratch.add(pa + pc + ps + pbw),
        )
    };
    let cols = s.cols_at(block);
    let (nrb, ncb) = (m.max(1).div_ceil(block), n.max(1).div_ceil(cols));
    let tasks = nrb * ncb;
    let width = task_width(tasks, slots, crate::par::cost::gemm_ns(s.batch * m * n * k));
    let lowp = b_type != 0 && !s.runtime_b;
    if lowp && tall_ok && nrb > 1 {
        // The A, C and A-packing parts: one run at the scratch's start ([`MmStage::parts`]),
        // planned for `slots` slots.
        let sc = (scratch, pa + pc + ps, slots);
        // SAFETY: the caller's contract; `sc` as above.
        if unsafe { tall::run(t, s, block, b_type, sc, a, packed_b.cast(), bias, y) } {
            return;
        }
    }
    let (a, y, bias) = (Shared::of(a), Shared(y), Shared::of(bias));
    let (sa, sc, sslot) = (Shared(sa), Shared(sc), Shared(sslot));
    for bi in 0..s.batch {
        let pb = if s.runtime_b {
            // SAFETY: slice `bi` of B and the B parts of the scratch.
            unsafe { pack_b16(t, k, n, b.add(bi * k * n), sbw, sbp) };
            Shared(sbp)
        } else {
            Shared::of(packed_b)
        };
        if nrb == 1 {
            // One row block covering every row: A is widened once per slice, into slot 0,
            // which every task reads.
            // SAFETY: the slice's rows of A; slot 0's A part holds `block >= m` rows.
            unsafe {
                let src = std::slice::from_raw_parts(a.get().add(bi * m * k), m * k);
                widen(t, src, std::slice::from_raw_parts_mut(sa.get(), m * k));
            }
        }
        crate::par::for_each(tasks, width, |i, th| {
            let (j0, r0) = ((i / nrb) * cols, (i % nrb) * block);
            let (w, rows) = (cols.min(n - j0), block.min(m - r0));
            let at = bi * m + r0;
            // One slot per thread when spread (each product on one thread), else slot 0
            // with the product on the node's threads (the A-packing slots all of them).
            let (slot, inner) = if width > 1 { (th, 1) } else { (0, threads) };
            // SAFETY: rows `at..at+rows`, columns `j0..j0+w` of Y are this task's alone;
            // A (rows of the slice), the packed B (column block `j0..j0+w`: the
            // `w.div_ceil(NR)` panels from panel `j0 / NR`, `k * NR` floats each, `j0` a
            // multiple of NR; a reduced B is offset by its view instead) and the bias are
            // read; this slot's A/C parts and A-packing slot(s) are written
            // ([`MmStage::parts`]).
            unsafe {
                let sa = if nrb == 1 {
                    sa.get()
                } else {
                    let sa = sa.get().add(slot * a_slot);
                    let src = std::slice::from_raw_parts(a.get().add(at * k), rows * k);
                    widen(t, src, std::slice::from_raw_parts_mut(sa, rows * k));
                    sa
                };
                let sc = sc.get().add(slot * c_slot);
                let sslot = sslot.get().add(slot * aslot);
                // Pieces of `piece` rows (all `rows` with an A-packing slot): the same sums,
                // whatever the piece (the small kernels give the micro-kernel's bits).
                for p0 in (0..rows).step_by(piece) {
                    let h = piece.min(rows - p0);
                    let (sa, sc) = (sa.add(p0 * k), sc.add(p0 * w));
                    if lowp {
                        let mm = (h, w, k);
                        let pb = pb.get().cast_const();
                        crate::gemm::lowp::sgemm_lowp_cols(
                            mm,
                            sa,
                            pb.cast(),
                            (n, j0),
                            sc,
                            (sslot, inner),
                            b_type,
                        );
                    } else {
                        let pbj = pb.get().add(j0 * k);
                        arenac_sgemm(h, w, k, sa, k, pbj, sc, w, 0, sslot, inner);
                    }
                }
                let c = std::slice::from_raw_parts_mut(sc, rows * w);
                let bias = bias.get();
                if bias.is_null() && w == n {
                    // The block's rows are contiguous in Y too: one narrowing pass.
                    let dst = std::slice::from_raw_parts_mut(y.get().add(at * n), rows * n);
                    narrow(t, c, dst);
                    return;
                }
                for (i, row) in c.chunks_exact_mut(w.max(1)).enumerate() {
                    if !bias.is_null() {
                        let bias = std::slice::from_raw_parts(bias.add(j0), w);
                        row.iter_mut().zip(bias).for_each(|(v, &b)| *v += b);
                    }
                    let dst = std::slice::from_raw_parts_mut(y.get().add((at + i) * n + j0), w);
                    narrow(t, row, dst);
                }
            }
        });
    }
}

/// The run-time `b` (`k x n`, row-major 16-bit) packed into `out` as [`arenac_pack_b`] packs
/// its widened values ([`NR`]-column panels of `k` rows, zero-padded past `n`): on AVX-512
/// each whole panel row widened straight into place (one pass over B instead of a widened
/// copy then a packing pass); else, or for a partial last panel, through `wide` (`k * n`
/// floats) as before. The same floats (widening is exact, element by element).
///
/// # Safety
/// `b` readable for `k * n` values; `wide` writable for `k * n` floats; `out` for
/// `packed_b_len(k, n)`; none overlapping.
unsafe fn pack_b16(t: N16, k: usize, n: usize, b: *const u16, wide: *mut f32, out: *mut f32) {
    #[cfg(target_arch = "x86_64")]
    if n.is_multiple_of(NR) && super::convert::isa() == super::convert::Isa::Avx512 {
        // SAFETY: the CPU has AVX-512F (`isa`); the contract passed on.
        return unsafe { pack_b16_avx512(t, k, n, b, out) };
    }
    // SAFETY: by the contract.
    unsafe {
        let src = std::slice::from_raw_parts(b, k * n);
        widen(t, src, std::slice::from_raw_parts_mut(wide, k * n));
        arenac_pack_b(k, n, wide, n, 1, out);
    }
}

/// [`pack_b16`] of whole panels (`n` a multiple of [`NR`] = 16) on AVX-512F.
///
/// # Safety
/// As [`pack_b16`]; the CPU has AVX-512F; `n % 16 == 0`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pack_b16_avx512(t: N16, k: usize, n: usize, b: *const u16, out: *mut f32) {
    use super::convert::x86::load16;
    const { assert!(NR == 16) };
    for jp in 0..n / NR {
        for i in 0..k {
            // SAFETY: row `i`, columns `jp * 16..+16` of B (inside `k * n`); row `i` of
            // panel `jp` of the packed B (inside `packed_b_len(k, n) = k * n`).
            unsafe {
                let v = load16(t, b.add(i * n + jp * NR));
                std::arch::x86_64::_mm512_storeu_ps(out.add((jp * k + i) * NR), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::packed_b_len;

    /// A run-time B (widened straight into its panels where `n` is a multiple of 16, the
    /// attention products' shapes) gives, slice by slice, the bits of the same B widened,
    /// packed and passed as a constant: f16 and bf16, no bias (Y's rows narrowed at once).
    #[test]
    fn runtime_b_packed_from_16_bits_matches_the_packed_constant() {
        for t in [N16::F16, N16::Bf16] {
            for (batch, m, k, n) in [
                (4, 64, 32, 64),
                (4, 64, 64, 32),
                (3, 19, 37, 48),
                (2, 5, 9, 70),
            ] {
                let s = MmStage {
                    batch,
                    m,
                    k,
                    n,
                    runtime_b: true,
                    threads: 1,
                };
                let vals = |len: usize, seed: usize| {
                    let f: Vec<f32> = (0..len)
                        .map(|i| ((i * seed % 101) as f32 - 50.0) / 16.0)
                        .collect();
                    let mut h = vec![0u16; len];
                    narrow(t, &f, &mut h);
                    h
                };
                let (a, b) = (vals(batch * m * k, 7), vals(batch * k * n, 13));
                let block = s.min_block();
                let mut y = vec![0u16; batch * m * n];
                let mut scratch = vec![0f32; s.scratch_bytes_at(block) / 4 + 16];
                let off = scratch.as_ptr().align_offset(64);
                // SAFETY: operands of the sizes the contract asks; the scratch 64-aligned.
                unsafe {
                    matmul(
                        t,
                        &s,
                        0,
                        block,
                        a.as_ptr(),
                        b.as_ptr(),
                        std::ptr::null(),
                        std::ptr::null(),
                        y.as_mut_ptr(),
                        scratch.as_mut_ptr().add(off),
                    )
                };
                let c = MmStage {
                    batch: 1,
                    runtime_b: false,
                    ..s
                };
                for bi in 0..batch {
                    let mut b32 = vec![0f32; k * n];
                    widen(t, &b[bi * k * n..(bi + 1) * k * n], &mut b32);
                    let mut packed = vec![0f32; packed_b_len(k, n)];
                    // SAFETY: `b32` is `k x n` row-major; `packed` holds its packed size.
                    unsafe { arenac_pack_b(k, n, b32.as_ptr(), n, 1, packed.as_mut_ptr()) };
                    let cb = c.min_block();
                    let mut want = vec![0u16; m * n];
                    let mut scratch = vec![0f32; c.scratch_bytes_at(cb) / 4 + 16];
                    let off = scratch.as_ptr().align_offset(64);
                    // SAFETY: as above, slice `bi` of A.
                    unsafe {
                        matmul(
                            t,
                            &c,
                            0,
                            cb,
                            a[bi * m * k..].as_ptr(),
                            std::ptr::null(),
                            packed.as_ptr(),
                            std::ptr::null(),
                            want.as_mut_ptr(),
                            scratch.as_mut_ptr().add(off),
                        )
                    };
                    assert_eq!(
                        &y[bi * m * n..(bi + 1) * m * n],
                        &want[..],
                        "{t:?} {s:?} slice {bi}"
                    );
                }
            }
        }
    }
}
