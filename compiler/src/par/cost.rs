//! When a job is worth spreading: its estimated single-thread time against what dispatching
//! it costs, which depends on whether the workers are awake.
//!
//! A job on `w` threads saves about `cost * (w - 1) / w` and costs the dispatch: publishing,
//! a worker noticing, the close — [`HOT_NS`] with the workers spinning (inside a run, right
//! after another job) — or, with a parked worker, its wake-up ([`WAKE_NS`]: a futex and, on a
//! VM, a halted virtual CPU; the wake can also land the worker on the caller's own CPU and
//! preempt it). A job goes parallel only when the saving is at least [`MARGIN`] times that
//! cost, so "parallel" never means slower on average; below it, the job runs inline on the
//! calling thread. ONNX Runtime's anchors: MLAS splits a GEMM only at 64 Ki multiply-adds per
//! thread; Eigen's cost model wants about 100 k cycles per extra thread.
//!
//! A job worth spreading to awake workers but not worth a wake-up runs inline and wakes the
//! parked workers for the next jobs of the run ([`super::Pool::wake_for_later`]), so a model
//! of many medium kernels (a transformer decoder) still runs on every thread once the
//! workers are up, while a run of a few small kernels never waits for a wake-up.

/// Dispatch cost with spinning workers, ns: publish, a worker entering, the close (0.5-0.6 µs
/// median overhead measured by `compiler/examples/pool_bench.rs` back to back, rounded up).
pub const HOT_NS: u64 = 1_000;

/// Dispatch cost with a parked worker, ns (`pool_bench` jobs 1 ms apart: ~10 µs over a
/// task's time; per-job timestamps of a model run after a 1 ms pause showed a worker
/// woken onto another CPU up 5-35 µs after the unpark on this 2-vCPU VM).
pub const WAKE_NS: u64 = 10_000;

/// The saving a parallel job must reach, in multiples of its dispatch cost.
pub const MARGIN: u64 = 2;

/// Multiply-adds per ns assumed for a GEMM's single-thread time: a fast estimate (about half
/// the AVX-512 peak here; a one-row GEMV, bound by reading B, runs at about 16), so a job
/// is never thought to be longer than it is. 128 Ki multiply-adds (MLAS's 64 Ki per thread
/// on two threads) are 4 µs: [`HOT_NS`] times `MARGIN` times 2.
pub const GEMM_MACS_PER_NS: u64 = 32;

/// Elements per ns assumed for an element-wise or row kernel (a vectorized loop over f32
/// operands in cache; exp/erf-heavy ones are slower, which errs on the inline side).
pub const ELEMS_PER_NS: u64 = 4;

/// Single-thread time of a GEMM of `macs` multiply-adds, ns (see [`GEMM_MACS_PER_NS`]).
pub fn gemm_ns(macs: usize) -> u64 {
    macs as u64 / GEMM_MACS_PER_NS
}

/// Single-thread time of an element-wise pass over `elems` elements, ns.
pub fn elems_ns(elems: usize) -> u64 {
    elems as u64 / ELEMS_PER_NS
}

/// Whether a job of `cost_ns` is worth `width` threads when dispatching costs
/// `dispatch_ns`: the saving `cost * (width - 1) / width` is at least `MARGIN * dispatch`.
pub fn worth(cost_ns: u64, width: usize, dispatch_ns: u64) -> bool {
    let w = width as u64;
    w >= 2 && cost_ns.saturating_mul(w - 1) / w >= MARGIN.saturating_mul(dispatch_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        // A 512x512 GEMV (256 Ki MACs, ~8 µs estimated) is worth an awake worker only.
        let gemv = gemm_ns(512 * 512);
        assert!(worth(gemv, 2, HOT_NS));
        assert!(!worth(gemv, 2, WAKE_NS));
        // 64 Ki MACs (2 µs) is not worth even a spinning worker; a 3x3 conv of 10 M MACs
        // is worth a wake-up.
        assert!(!worth(gemm_ns(64 * 1024), 2, HOT_NS));
        assert!(worth(gemm_ns(10 << 20), 2, WAKE_NS));
        assert!(!worth(u64::MAX, 1, 0));
    }
}
