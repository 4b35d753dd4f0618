//! Gemm/MatMul on 16-bit data: `Y[r, :] = A[r, :] x B (+ C)` a block of A's rows at a time —
//! the block widened into f32 scratch, multiplied by [`crate::gemm::arenac_sgemm`] into f32
//! scratch, the bias row added, narrowed into Y. B is either a constant packed at compile
//! time (alpha folded in) and shared by every row, or a run-time 16-bit operand with one
//! `K x N` matrix per batch slice (same batch dims as A), widened and packed into scratch
//! one slice at a time.

use super::{N16, narrow, widen};
use crate::gemm::{a_scratch_slot, arenac_pack_b, arenac_sgemm, packed_b_len};

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
    /// Rows of A per block: as many as fit the staging budget (1/24 of the 16-bit A and Y,
    /// between 16 KiB and [`super::STAGE_BYTES`]), at least one.
    pub fn block(&self) -> usize {
        let bytes16 = (self.batch * self.m * (self.k + self.n)).saturating_mul(2);
        let budget = (bytes16 / 24).clamp(16 << 10, super::STAGE_BYTES);
        (budget / ((self.k + self.n) * 4).max(1)).clamp(1, self.m.max(1))
    }

    /// Floats of the scratch parts: A block, Y block, A-packing slots, widened B, packed B.
    fn parts(&self) -> [usize; 5] {
        let b = self.block();
        let up = |f: usize| f.next_multiple_of(16);
        let (bw, bp) = if self.runtime_b {
            (up(self.k * self.n), up(packed_b_len(self.k, self.n)))
        } else {
            (0, 0)
        };
        [
            up(b * self.k),
            up(b * self.n),
            up(a_scratch_slot(b, self.k) * self.threads.max(1)),
            bw,
            bp,
        ]
    }

    /// Scratch bytes [`matmul`] uses.
    pub fn scratch_bytes(&self) -> usize {
        self.parts().iter().sum::<usize>().saturating_mul(4)
    }
}

/// The product on 16-bit A and Y: `packed_b` is the constant B packed (f32 when `b_type` is
/// 0, else in the reduced type of that [`crate::gemm::lowp::WeightType::code`] by
/// [`crate::gemm::lowp::pack_b_lowp`]), or `b` the run-time 16-bit B; `bias` null or a row of
/// `n` floats added to every output row.
///
/// # Safety
/// `a` readable for `batch*m*k` values, `y` writable for `batch*m*n`, not overlapping;
/// with `s.runtime_b`, `b` readable for `batch*k*n` values, else `packed_b` for
/// `packed_b_len(k, n)` floats (`lowp_b_bytes(t, k, n)` bytes for a reduced `b_type`); `bias` null or readable for `n` floats; `scratch` writable
/// for [`MmStage::scratch_bytes`] bytes, 64-aligned, overlapping nothing else.
#[allow(clippy::too_many_arguments)]
pub unsafe fn matmul(
    t: N16,
    s: &MmStage,
    b_type: u64,
    a: *const u16,
    b: *const u16,
    packed_b: *const f32,
    bias: *const f32,
    y: *mut u16,
    scratch: *mut f32,
) {
    let [pa, pc, ps, pbw, _] = s.parts();
    let block = s.block();
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
        let mut r0 = 0;
        while r0 < m {
            let rows = block.min(m - r0);
            let at = bi * m + r0;
            // SAFETY: rows `at..at+rows` of A and Y; the A/C/slot parts of the scratch.
            unsafe {
                let src = std::slice::from_raw_parts(a.add(at * k), rows * k);
                widen(t, src, std::slice::from_raw_parts_mut(sa, rows * k));
                if b_type != 0 && !s.runtime_b {
                    crate::gemm::lowp::arenac_sgemm_lowp(
                        rows,
                        n,
                        k,
                        sa,
                        k,
                        pb.cast::<u8>(),
                        sc,
                        n,
                        0,
                        sslot,
                        s.threads.max(1),
                        b_type,
                    );
                } else {
                    arenac_sgemm(rows, n, k, sa, k, pb, sc, n, 0, sslot, s.threads.max(1));
                }
                let c = std::slice::from_raw_parts_mut(sc, rows * n);
                if let Some(bias) = bias {
                    for row in c.chunks_exact_mut(n.max(1)) {
                        row.iter_mut().zip(bias).for_each(|(v, &b)| *v += b);
                    }
                }
                narrow(
                    t,
                    c,
                    std::slice::from_raw_parts_mut(y.add(at * n), rows * n),
                );
            }
            r0 += rows;
        }
    }
}
