//! How a staged 16-bit kernel spreads its node over the session's threads
//! ([`crate::par`]): the node is cut into tasks that do not depend on the thread count (row
//! bands, pixel runs, channel blocks, row blocks, chunks), so every output element is
//! computed by the same instructions whatever thread runs it (bit-identical at every thread
//! count). A kernel with scratch plans one slot per thread ([`slot_count`]); a task uses the
//! slot of the thread running it.

/// A raw pointer the tasks of one job share, each touching only its own part of what it
/// points to (its rows, its scratch slot).
#[derive(Clone, Copy)]
pub struct Shared<T>(pub *mut T);

// SAFETY: the tasks sharing a `Shared` touch disjoint parts of its memory (each user's
// contract), and the memory outlives the job (`par::for_each` returns after every task).
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as for `Send`.
unsafe impl<T> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// A read-only pointer shared so.
    pub fn of(p: *const T) -> Self {
        Self(p.cast_mut())
    }

    /// The pointer (a method, so a closure captures the whole `Shared`, which is `Sync`).
    pub fn get(self) -> *mut T {
        self.0
    }
}

/// Scratch slots a staged node of `tasks` tasks plans at `threads` threads: one per thread
/// when the tasks can fill them (at least as many tasks as threads), else one (the tasks
/// run one after the other, each inner kernel spreading its own product).
pub fn slot_count(tasks: usize, threads: usize) -> usize {
    if threads >= 2 && tasks >= threads {
        threads
    } else {
        1
    }
}

/// Threads a node of `tasks` tasks with `slots` scratch slots (or no scratch: `slots` the
/// planned thread count) and an estimated single-thread time of `cost_ns` runs on now:
/// `par::width` of the whole node, 1 when there are fewer than two tasks or slots.
pub fn task_width(tasks: usize, slots: usize, cost_ns: u64) -> usize {
    if tasks < 2 || slots < 2 {
        return 1;
    }
    crate::par::width(cost_ns, slots.min(tasks))
}

/// Fewest elements each thread of a spread element-wise pass gets: the f32 lowering's rule
/// (`codegen::lower`'s `PAR_MIN_CHUNK_ELEMS`), below which dispatching the pass costs more
/// than it saves (a 16-bit `Add+Add` of 8 Ki elements ran 4-7 µs spread over 2 threads,
/// its f32 kernel 1.2 µs on one).
pub const PAR_MIN_ELEMS: usize = 16 * 1024;

/// Threads an element-wise pass over `n` elements may spread over ([`for_pieces`]'s
/// `slots`): the pool's, at most one per `min_per_thread` elements (0: no such bound; the
/// 16-bit passes give [`PAR_MIN_ELEMS`]), at least 1.
pub fn ew_slots(n: usize, min_per_thread: usize) -> usize {
    let threads = crate::par::threads();
    match n.checked_div(min_per_thread) {
        Some(most) => most.min(threads).max(1),
        None => threads,
    }
}

/// Runs `f(start, end, thread)` over `0..n` cut into pieces of whole `chunk`s (the chunks a
/// sequential pass takes, so every element is computed as there), spread over at most
/// `slots` threads of the current pool when `par::width` finds the whole pass (`cost_ns`)
/// worth it (`thread < slots` selects a scratch slot); one piece `0..n` on thread 0
/// otherwise. Kernels without scratch pass the pool's threads (`crate::par::threads`).
pub fn for_pieces(
    n: usize,
    chunk: usize,
    slots: usize,
    cost_ns: u64,
    f: impl Fn(usize, usize, usize) + Sync,
) {
    let chunk = chunk.max(1);
    let width = task_width(n.div_ceil(chunk), slots, cost_ns);
    if width < 2 {
        f(0, n, 0);
        return;
    }
    // A few pieces per thread: a thread slowed (another process) takes fewer.
    let piece = n.div_ceil(4 * width).next_multiple_of(chunk);
    crate::par::for_each(n.div_ceil(piece), width, |i, th| {
        f(i * piece, ((i + 1) * piece).min(n), th);
    });
}

/// `f(i)` for each `i` in `0..count` (a pass over `count` channels of `elems` elements in
/// all), spread over the current pool in contiguous pieces when [`crate::par::width`] finds
/// the pass worth it: inline inside a task or without a pool. Each `i` is done the same way
/// wherever it runs. Staged Convs whose one band has the pool to itself widen their input
/// and narrow their output so instead of on one thread.
pub fn for_each_spread(count: usize, elems: usize, f: impl Fn(usize) + Sync) {
    let cost = crate::par::cost::elems_ns(elems);
    for_pieces(count, 1, crate::par::threads(), cost, |a, b, _| {
        (a..b).for_each(&f)
    });
}

/// [`super::widen`] of `src` into `dst` (equal lengths) in pieces of whole chunks spread as
/// [`for_each_spread`] spreads: the same values (the conversion is element by element).
pub fn widen_spread(t: super::N16, src: &[u16], dst: &mut [f32]) {
    convert_spread(t, src, dst, super::widen);
}

/// [`super::narrow`] of `src` into `dst` (equal lengths), spread as [`widen_spread`].
pub fn narrow_spread(t: super::N16, src: &[f32], dst: &mut [u16]) {
    convert_spread(t, src, dst, super::narrow);
}

/// `convert(t, src, dst)` in pieces of whole chunks over the current pool (see
/// [`widen_spread`]); `convert` works element by element.
fn convert_spread<S: Copy, D: Copy>(
    t: super::N16,
    src: &[S],
    dst: &mut [D],
    convert: fn(super::N16, &[S], &mut [D]),
) {
    let n = src.len().min(dst.len());
    let (s, d) = (Shared::of(src.as_ptr()), Shared(dst.as_mut_ptr()));
    let cost = crate::par::cost::elems_ns(n);
    for_pieces(n, super::CHUNK, crate::par::threads(), cost, |a, b, _| {
        // SAFETY: `a..b` lies inside both slices, and the pieces are disjoint.
        let (src, dst) = unsafe {
            (
                std::slice::from_raw_parts(s.get().add(a), b - a),
                std::slice::from_raw_parts_mut(d.get().add(a), b - a),
            )
        };
        convert(t, src, dst);
    });
}
