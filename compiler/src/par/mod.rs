//! Intra-op parallelism: the thread pool of a session and how kernels reach it.
//!
//! A [`Pool`] belongs to one session (created once, workers parked between runs). While the
//! session runs its program, the pool is *current* on the calling thread ([`with_pool`]); the
//! precompiled kernels (GEMM, convolution, pooling...) split their work into tasks with
//! [`for_each`], which runs them on the current pool, or inline when there is none. The
//! thread index a task gets selects its slice of per-thread scratch, which the planner sized
//! for the thread count the model was compiled for ([`crate::arena::PlanOptions::threads`]):
//! kernels pass that count as the job's width, so a task never gets a thread index past the
//! scratch it has.
//!
//! Same answers at every thread count: kernels cut work into tasks that do not depend on the
//! thread count (output tiles, rows, channel planes) and never split a sum across threads, so
//! every output element is computed by the same instructions in the same order whatever
//! thread runs it: outputs are bit-identical between 1 and N threads.

pub mod cost;
mod pool;

pub use pool::{Pool, SPIN};

use std::cell::Cell;

thread_local! {
    /// The pool kernels called on this thread may use (null: none).
    static CURRENT: Cell<*const Pool> = const { Cell::new(std::ptr::null()) };
}

/// Runs `f` with `pool` current on this thread (kernels called inside spread their work on
/// it), marking the pool hot for the duration (idle workers spin between jobs instead of
/// parking). With `None`, kernels run single-threaded.
pub fn with_pool<R>(pool: Option<&Pool>, f: impl FnOnce() -> R) -> R {
    let ptr = pool.map_or(std::ptr::null(), |p| p as *const Pool);
    let prev = CURRENT.with(|c| c.replace(ptr));
    if let Some(p) = pool {
        p.heat();
    }
    struct Restore(*const Pool, Option<*const Pool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
            if let Some(p) = self.1 {
                // SAFETY: the pool outlives `with_pool`'s call (borrowed for it).
                unsafe { (*p).cool() };
            }
        }
    }
    let _restore = Restore(prev, pool.map(|p| p as *const Pool));
    f()
}

/// Threads a job started now on this thread would run on (1 without a current pool).
pub fn threads() -> usize {
    CURRENT.with(|c| {
        let p = c.get();
        if p.is_null() {
            1
        } else {
            // SAFETY: a non-null current pool is borrowed by an enclosing `with_pool`.
            unsafe { (*p).threads() }
        }
    })
}

/// Threads worth giving a job of `cost_ns` (its estimated single-thread time, see
/// [`cost`]) on the current pool, at most `width`: `width` (capped by the pool) when the
/// saving clearly exceeds the dispatch cost — that of a wake-up if a worker it needs is
/// parked, of a hand-over to spinning workers otherwise — else 1 (inline on this thread).
/// A job worth spinning workers but not a wake-up also wakes the parked ones for the run's
/// next jobs ([`Pool::wake_for_later`]). 1 without a pool or inside a task.
pub fn width(cost_ns: u64, width: usize) -> usize {
    let pool = CURRENT.with(|c| c.get());
    if pool.is_null() {
        return 1;
    }
    // SAFETY: a non-null current pool is borrowed by an enclosing `with_pool`.
    let pool = unsafe { &*pool };
    let w = width.min(pool.threads());
    if pool.eager() {
        return w;
    }
    if !cost::worth(cost_ns, w, cost::HOT_NS) {
        return 1;
    }
    if pool.asleep(w) && !cost::worth(cost_ns, w, cost::WAKE_NS) {
        pool.note_wanted();
        pool.wake_for_later(w);
        return 1;
    }
    w
}

/// Runs `f(task, thread)` for each task in `0..tasks` on at most `width` threads of the
/// current pool (inline on this thread, `thread == 0`, without one). `thread < width`.
/// A task that itself calls `for_each` runs that inner job inline. Allocates nothing.
pub fn for_each(tasks: usize, width: usize, f: impl Fn(usize, usize) + Sync) {
    let pool = CURRENT.with(|c| c.replace(std::ptr::null()));
    if pool.is_null() || tasks <= 1 || width <= 1 {
        CURRENT.with(|c| c.set(pool));
        (0..tasks).for_each(|t| f(t, 0));
        return;
    }
    struct Restore(*const Pool);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(pool);
    // SAFETY: a non-null current pool is borrowed by an enclosing `with_pool` on this thread.
    unsafe { (*pool).run(tasks, width, &f) };
}

/// The default thread count: the CPUs this process may run on
/// (`std::thread::available_parallelism`, which honours affinity masks and cgroup quotas).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests;
