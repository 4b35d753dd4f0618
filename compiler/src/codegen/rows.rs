//! Row-split calls: a JIT kernel whose outermost loop runs over independent rows (element-wise
//! and fused loops, Softmax lines, normalization groups) is compiled for a chunk of rows (and
//! for the last, shorter chunk), and the program calls [`arenac_par_rows`], which runs one
//! call per chunk on the current pool ([`crate::par`]), each with its operands moved forward
//! by whole rows.
//!
//! The kernels themselves are unchanged: a chunk's kernel is the same kernel for fewer rows,
//! so every output element is computed by the same instructions as in the single call (chunk
//! boundaries of a flat loop are multiples of its vector width): bit-identical results at
//! every thread count. Nothing is allocated per run: the descriptor lives in the weights
//! region and the operand array of each chunk on the stack.

/// Most pointer operands a row-split kernel may take.
pub const MAX_ARGS: usize = 12;

/// Where an operand of a row-split call points.
#[repr(u64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    /// The arena.
    Arena = 0,
    /// The weights region.
    Weights = 1,
    /// A null pointer (absent operand).
    Null = 2,
}

/// One operand of a row-split call: base, byte offset, bytes per row.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowArg {
    /// [`Base`] as a number.
    pub base: u64,
    /// Byte offset from the base.
    pub offset: u64,
    /// Bytes the operand moves per row (0: every chunk reads the same data, e.g. a broadcast
    /// operand).
    pub step: u64,
}

/// The descriptor [`arenac_par_rows`] reads (in the weights region): the chunking and the
/// operands.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowsDesc {
    /// Number of operands (at most [`MAX_ARGS`]).
    pub nargs: u64,
    /// Number of chunks (the last may be shorter and uses the tail kernel).
    pub chunks: u64,
    /// Rows per chunk (all but possibly the last).
    pub rows: u64,
    /// Most threads to use.
    pub width: u64,
    /// Estimated single-thread time of all chunks, ns ([`crate::par::width`] decides from
    /// it at run time whether the chunks are worth the pool).
    pub cost_ns: u64,
    /// The operands (the first `nargs` are used).
    pub args: [RowArg; MAX_ARGS],
}

impl RowsDesc {
    /// The descriptor as bytes (for the weights region).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v: Vec<u64> = vec![self.nargs, self.chunks, self.rows, self.width, self.cost_ns];
        for a in &self.args {
            v.extend([a.base, a.offset, a.step]);
        }
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }
}

/// Calls the JIT kernel `f` with the first `n` pointers of `p`.
///
/// # Safety
/// `f` is a finalized JIT function taking exactly `n` pointer (i64) parameters in the C ABI,
/// and the pointers satisfy its contract.
unsafe fn call(f: *const u8, n: usize, p: &[u64; MAX_ARGS]) {
    macro_rules! arity {
        ($($i:tt),*) => {{
            // SAFETY: `f` takes exactly this many i64 parameters (caller's contract).
            let g: unsafe extern "C" fn($(arity!(@t $i)),*) = unsafe { std::mem::transmute(f) };
            // SAFETY: the pointers satisfy the kernel's contract (caller's contract).
            unsafe { g($(p[$i]),*) }
        }};
        (@t $i:tt) => { u64 };
    }
    match n {
        1 => arity!(0),
        2 => arity!(0, 1),
        3 => arity!(0, 1, 2),
        4 => arity!(0, 1, 2, 3),
        5 => arity!(0, 1, 2, 3, 4),
        6 => arity!(0, 1, 2, 3, 4, 5),
        7 => arity!(0, 1, 2, 3, 4, 5, 6),
        8 => arity!(0, 1, 2, 3, 4, 5, 6, 7),
        9 => arity!(0, 1, 2, 3, 4, 5, 6, 7, 8),
        10 => arity!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
        11 => arity!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
        12 => arity!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11),
        _ => {}
    }
}

/// Runs `full` (or `tail` for a last, shorter chunk) once per chunk of `desc`, spread over the
/// current pool.
///
/// # Safety
/// `desc` points to a [`RowsDesc`] the code generator wrote; `full` and `tail` are JIT
/// kernels of `nargs` pointer parameters computing `rows` (the tail: the remaining) rows
/// from operands at the descriptor's addresses, chunks touching disjoint output rows; `arena`
/// and `weights` are the run's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn arenac_par_rows(
    desc: *const RowsDesc,
    arena: *mut u8,
    weights: *const u8,
    full: *const u8,
    tail: *const u8,
) {
    // SAFETY: valid by the contract.
    let d = unsafe { &*desc };
    let n = (d.nargs as usize).min(MAX_ARGS);
    let (arena, weights) = (arena as u64, weights as u64);
    let (full, tail) = (full as usize, tail as usize);
    let chunks = d.chunks as usize;
    let width = crate::par::width(d.cost_ns, d.width as usize);
    crate::par::for_each(chunks, width, |i, _| {
        let mut p = [0u64; MAX_ARGS];
        let row0 = i as u64 * d.rows;
        for (slot, a) in p.iter_mut().zip(&d.args[..n]) {
            *slot = match a.base {
                0 => arena + a.offset + row0 * a.step,
                1 => weights + a.offset + row0 * a.step,
                _ => 0,
            };
        }
        let f = if i + 1 == chunks { tail } else { full };
        // SAFETY: the kernel's contract holds for chunk i: its operands moved forward by
        // row0 rows (the descriptor's steps), its rows disjoint from the other chunks'.
        unsafe { call(f as *const u8, n, &p) };
    });
}
