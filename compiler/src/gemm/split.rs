//! One product spread over the threads of the current pool ([`crate::par`]).
//!
//! The output `C` (`m x n`) is cut into a grid of blocks: rows in multiples of the kernel's
//! `MR`, columns in multiples of two packed panels (`2 * NR`, the widest micro-kernel's tile),
//! so every element of `C` is computed by the same micro-kernel call shape, over the same K
//! blocks in the same order, as in the single-threaded product: the result is bit-identical
//! at every thread count. K is never split.
//!
//! A grid is worth its dispatch only with enough work per block: at least [`MIN_TASK_MACS`]
//! multiply-adds (ONNX Runtime's MLAS uses the same 64 Ki per thread); and the product goes
//! parallel at all only when [`crate::par::width`] finds its estimated time worth the
//! dispatch (a wake-up when the workers are parked). Rows are split first
//! when there are more row units than column units (each block then packs only its own rows
//! of A), columns otherwise (MLAS's rule); a second dimension is split only when the first
//! has fewer units than blocks wanted.

use std::ops::Range;

use super::{AView, BView, Kernel, NR, sgemm_core};

/// Fewest multiply-adds a block of a split product gets.
pub const MIN_TASK_MACS: usize = 64 * 1024;

/// Columns of one unit of a column split (two packed panels).
pub const N_UNIT: usize = 2 * NR;

/// Blocks wanted per thread (more than one evens out blocks of unequal cost).
const BLOCKS_PER_THREAD: usize = 2;

/// How a product's output is cut into blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grid {
    m: usize,
    n: usize,
    mr: usize,
    /// Row parts.
    pub(crate) m_parts: usize,
    /// Column parts.
    pub(crate) n_parts: usize,
}

impl Grid {
    /// The grid for an `m x n x k` product on up to `threads` threads with row unit `mr`.
    pub(crate) fn new(m: usize, n: usize, k: usize, mr: usize, threads: usize) -> Grid {
        let one = Grid {
            m,
            n,
            mr,
            m_parts: 1,
            n_parts: 1,
        };
        if threads <= 1 || m == 0 || n == 0 {
            return one;
        }
        let macs = m.saturating_mul(n).saturating_mul(k);
        let want = (macs / MIN_TASK_MACS).min(threads * BLOCKS_PER_THREAD);
        if want < 2 {
            return one;
        }
        let (mu, nu) = (m.div_ceil(mr), n.div_ceil(N_UNIT));
        let (m_parts, n_parts) = if mu >= nu {
            let mp = mu.min(want);
            (mp, (want / mp).clamp(1, nu))
        } else {
            let np = nu.min(want);
            ((want / np).clamp(1, mu), np)
        };
        Grid {
            m_parts,
            n_parts,
            ..one
        }
    }

    /// Number of blocks.
    pub(crate) fn blocks(&self) -> usize {
        self.m_parts * self.n_parts
    }

    /// Rows and columns of block `b` (`b < blocks()`).
    pub(crate) fn block(&self, b: usize) -> (Range<usize>, Range<usize>) {
        let (i, j) = (b / self.n_parts, b % self.n_parts);
        let cut = |len: usize, unit: usize, parts: usize, i: usize| {
            let units = len.div_ceil(unit);
            let at = |p: usize| (units * p / parts * unit).min(len);
            at(i)..at(i + 1)
        };
        (
            cut(self.m, self.mr, self.m_parts, i),
            cut(self.n, N_UNIT, self.n_parts, j),
        )
    }
}

/// A raw pointer that may cross to the pool's threads (each block writes disjoint memory).
#[derive(Clone, Copy)]
pub(crate) struct SyncPtr<T>(pub(crate) *mut T);
// SAFETY: used only to hand the blocks of one product (disjoint parts of C, per-thread
// scratch slots) to the threads that compute them, under the entry points' contracts.
unsafe impl<T> Send for SyncPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SyncPtr<T> {}

impl<T> SyncPtr<T> {
    /// The pointer (a method, so closures capture the whole `SyncPtr`, not its field).
    pub(crate) fn get(&self) -> *mut T {
        self.0
    }
}

/// `C = A * B (+ C)` over the current pool, then `after(rows, cols)` on each block of C (an
/// epilogue on data still in cache). Block `b` runs with the A scratch of its thread:
/// `scratch + thread * slot` (`slot` floats each, `width` slots).
///
/// # Safety
/// That of [`sgemm_core`] for the whole product with A and B as `a` and `b` describe, and
/// `scratch` writable for `width * slot` floats with `slot` at least the A scratch the core
/// needs for `m x k` (unused with a packed A); `after` touches only its block of C.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn sgemm_split(
    kernel: Kernel,
    (m, n, k): (usize, usize, usize),
    a: AView,
    b: BView,
    (c, ldc): (*mut f32, usize),
    accumulate: bool,
    (scratch, slot, width): (*mut f32, usize, usize),
    after: &(dyn Fn(Range<usize>, Range<usize>) + Sync),
) {
    let macs = m.saturating_mul(n).saturating_mul(k);
    let threads = crate::par::width(crate::par::cost::gemm_ns(macs), width.max(1));
    let grid = Grid::new(m, n, k, kernel.mr, threads);
    let (c, scratch) = (SyncPtr(c), SyncPtr(scratch));
    crate::par::for_each(grid.blocks(), threads, |blk, t| {
        let (rows, cols) = grid.block(blk);
        if rows.is_empty() || cols.is_empty() {
            return;
        }
        // SAFETY: block (rows, cols) of the product: A from row rows.start (a multiple of
        // MR), B from column cols.start (a multiple of 2 NR), C at that corner with the same
        // stride; blocks are disjoint, so no two threads write the same part of C; thread t
        // < width uses its own scratch slot.
        unsafe {
            sgemm_core(
                kernel,
                rows.len(),
                cols.len(),
                k,
                a.at_row(rows.start),
                b.at_col(cols.start),
                c.get().wrapping_add(rows.start * ldc + cols.start),
                ldc,
                accumulate,
                scratch.get().wrapping_add(t * slot),
            )
        };
        after(rows, cols);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_covers_output_exactly_once() {
        for &(m, n, k, mr, th) in &[
            (1, 1000, 512, 12, 2),
            (1000, 1, 512, 12, 2),
            (64, 256, 576, 12, 2),
            (512, 49, 4608, 12, 3),
            (37, 91, 300, 6, 4),
            (7, 7, 7, 12, 2),
            (128, 128, 128, 4, 8),
        ] {
            let g = Grid::new(m, n, k, mr, th);
            let mut hit = vec![0u8; m * n];
            for b in 0..g.blocks() {
                let (r, c) = g.block(b);
                assert!(r.start.is_multiple_of(mr) && c.start.is_multiple_of(N_UNIT));
                for i in r.clone() {
                    for j in c.clone() {
                        hit[i * n + j] += 1;
                    }
                }
            }
            assert!(hit.iter().all(|&h| h == 1), "{m}x{n}x{k} on {th}");
            assert!(g.blocks() <= th * BLOCKS_PER_THREAD);
        }
    }

    #[test]
    fn small_products_are_not_split() {
        assert_eq!(Grid::new(16, 16, 16, 12, 2).blocks(), 1);
        assert_eq!(Grid::new(1024, 1024, 1024, 12, 1).blocks(), 1);
        assert!(Grid::new(1024, 1024, 1024, 12, 2).blocks() >= 2);
    }
}
