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

use super::{N16, narrow, widen};
use crate::gemm::{NR, a_scratch_slot, arenac_pack_b, arenac_sgemm, packed_b_len};

/// Bytes of packed f32 B one column block should stay within (half a 1 MiB L2).
const B_BLOCK_BYTES: usize = 512 << 10;

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
        (budget / ((self.k + self.cols()) * 4).max(1)).clamp(1, self.m.max(1))
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

    /// Floats of the scratch parts at `block` rows: A block, Y block, A-packing slots,
    /// widened B, packed B.
    fn parts(&self, block: usize) -> [usize; 5] {
        let b = block.clamp(1, self.m.max(1));
        let up = |f: usize| f.next_multiple_of(16);
        let (bw, bp) = if self.runtime_b {
            (up(self.k * self.n), up(packed_b_len(self.k, self.n)))
        } else {
            (0, 0)
        };
        [
            up(b * self.k),
            up(b * self.cols()),
            up(a_scratch_slot(b, self.k) * self.threads.max(1)),
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
    let block = block.clamp(1, s.m.max(1));
    let [pa, pc, ps, pbw, _] = s.parts(block);
    let (m, k, n) = (s.m, s.k, s.n);
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
    // SAFETY: by the contract.
    let bias = (!bias.is_null()).then(|| unsafe { std::slice::from_raw_parts(bias, n) });
    for bi in 0..s.batch {
        let pb = if s.runtime_b {
            // SAFETY: slice `bi` of B and the B parts of the scratch.
            unsafe {
                let src = std::slice::from_raw_parts(b.add(bi * k * n), k * n);
                widen(t, src, std::slice::from_raw_parts_mut(sbw, k * n));
                arenac_pack_b(k, n, sbw, n, 1, sbp);
            }
            sbp.cast_const()
        } else {
            packed_b
        };
        let cols = s.cols();
        let lowp = b_type != 0 && !s.runtime_b;
        let mut j0 = 0;
        while j0 < n {
            let w = cols.min(n - j0);
            // SAFETY: column block `j0..j0+w` of the packed f32 B is the `w.div_ceil(NR)`
            // panels from panel `j0 / NR` (`j0` a multiple of NR), `k * NR` floats each (a
            // reduced B is offset by its view instead).
            let pbj = if lowp { pb } else { unsafe { pb.add(j0 * k) } };
            let mut r0 = 0;
            while r0 < m {
                let rows = block.min(m - r0);
                let at = bi * m + r0;
                // SAFETY: rows `at..at+rows` of A and Y; the A/C/slot parts of the scratch.
                unsafe {
                    // One row block covering every row: A is widened once per slice.
                    if block < m || j0 == 0 {
                        let src = std::slice::from_raw_parts(a.add(at * k), rows * k);
                        widen(t, src, std::slice::from_raw_parts_mut(sa, rows * k));
                    }
                    if lowp {
                        let mm = (rows, w, k);
                        let slots = (sslot, s.threads.max(1));
                        crate::gemm::lowp::sgemm_lowp_cols(
                            mm,
                            sa,
                            pbj.cast(),
                            (n, j0),
                            sc,
                            slots,
                            b_type,
                        );
                    } else {
                        arenac_sgemm(rows, w, k, sa, k, pbj, sc, w, 0, sslot, s.threads.max(1));
                    }
                    let c = std::slice::from_raw_parts_mut(sc, rows * w);
                    for (i, row) in c.chunks_exact_mut(w.max(1)).enumerate() {
                        if let Some(bias) = bias {
                            let bias = bias.get(j0..j0 + w).unwrap_or_default();
                            row.iter_mut().zip(bias).for_each(|(v, &b)| *v += b);
                        }
                        let dst = std::slice::from_raw_parts_mut(y.add((at + i) * n + j0), w);
                        narrow(t, row, dst);
                    }
                }
                r0 += rows;
            }
            j0 += w;
        }
    }
}
