//! [`super::matmul`] with a constant B stored reduced (`--weights`) in taller row blocks than
//! the planned ones, in the same scratch. The GEMM core widens each reduced B panel pair
//! (`kc x 32`) once per call for all the rows of that call: at the planned block of a few
//! rows (ResNet's or a transformer's FFN at 16 rows) the widening cost ~19% of the product.
//! Here A is not kept widened row-major: each task widens and packs its rows straight into
//! the micro-kernel's panels for all of K ([`crate::gemm::pack_a_all`]'s layout), then runs
//! the product a sub-block of `cw` columns at a time into a `rows x cw` f32 C, bias added and
//! narrowed at once. The packed A of `t` rows takes `t * k` floats where the planned layout
//! took `block * (k + cols)` plus a packing slot, so `t` is several times `block` (a
//! 128x256 by 256x2048 product: 16 -> 48 rows, B widened 3 times instead of 8).
//!
//! Where all of K does not fit (the transformer's 128x2048 by 2048x256 FFN product, planned
//! in 4-row blocks that widened B in registers 32 times over), or where it widens fewer
//! elements ([`widened`]), A is packed a K block at a time into a stack buffer instead
//! ([`task_on_stack`]): the region holds C alone (or C goes on the stack when larger), and a
//! task may take all columns, so A is packed once and B widened once per 72 rows (that
//! product: 1.22x -> 1.05x the f32 time with int8 weights; the first FFN product 1.20x ->
//! 1.06x, 1 thread, per-node medians).
//!
//! Same bits as the planned blocks: every output element is the same micro-kernel sum over
//! the same K blocks in the same order, the bias added and the f32 narrowed once
//! (`tall_tests.rs`).

use super::super::split::{Shared, task_width};
use super::super::{N16, narrow, widen};
use super::MmStage;
use crate::gemm::lowp::WeightType;
use crate::gemm::pack_a::pack_a;
use crate::gemm::{AView, BView, KC, MC, NR, selected_kernel, sgemm_core};

/// Columns of one C sub-block at the least: two packed panels (the wide micro-kernel's tile).
const CW_MIN: usize = 2 * NR;

/// Most rows of A a task packing A on the stack takes (a multiple of every kernel's `MR`):
/// its buffer holds that many rows of one K block.
const STACK_ROWS: usize = 72;

/// Floats of C a task packing A on the stack keeps on the stack where the region holds less
/// (72 KiB: the transformer FFN's 2048x256 product takes all 256 columns of 72 rows, so A is
/// packed once where the planned 33 KiB region held C for 64 columns and A was packed 4
/// times).
const STACK_C: usize = 18 << 10;

/// Floats rounded up to whole 64-byte lines (the scratch parts' unit).
fn up(f: usize) -> usize {
    f.next_multiple_of(16)
}

/// The tall blocks of one product: rows of A per task and columns per C sub-block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tall {
    /// Rows of A per task (a multiple of the kernel's `MR`, or all of `m`; any count with
    /// `stack_a` on several slots).
    pub(super) rows: usize,
    /// Columns of a C sub-block (a multiple of [`CW_MIN`], or all of the column block).
    pub(super) cw: usize,
    /// Columns of B and Y per task (the planned column block, or all of `n`).
    pub(super) cols: usize,
    /// A widened and packed one K block at a time into a stack buffer, the region holding C
    /// alone (else A packed for all of K at the region's start, C after it).
    pub(super) stack_a: bool,
    /// With `stack_a`, C on the stack ([`STACK_C`] floats) rather than in the region.
    pub(super) stack_c: bool,
}

/// Columns of a C sub-block of `rows` rows in `room` floats: a multiple of [`CW_MIN`] up
/// to `cols` (all of `cols` when it is at most [`CW_MIN`]); 0 when not even that fits.
fn cw_for(rows: usize, room: usize, cols: usize) -> usize {
    let cw = if cols <= CW_MIN {
        cols
    } else {
        (room / rows.max(1) / CW_MIN * CW_MIN).min(cols)
    };
    if cw * rows <= room { cw } else { 0 }
}

/// The core's K blocks of `k`: their count and the size of all but the last
/// ([`crate::gemm::sgemm_core`]'s balanced blocking).
fn k_blocks(k: usize) -> (usize, usize) {
    let kb = k.div_ceil(KC).max(1);
    (kb, k.div_ceil(kb).max(1))
}

/// Elements of A and B widened by the product of `s` in tasks of `rows` rows by column
/// blocks of `cols` with C sub-blocks of `cw` columns: A's once per column block (once per
/// sub-block where A is packed a K block at a time and K takes several), B's once per row
/// block. The planned blocks are `rows = block`, `cw = cols`, `stack_a` false.
fn widened(s: &MmStage, cols: usize, rows: usize, cw: usize, stack_a: bool) -> usize {
    let (m, k, n) = (s.m.max(1), s.k.max(1), s.n.max(1));
    let subs = if stack_a && k_blocks(k).0 > 1 {
        cols.div_ceil(cw.max(1))
    } else {
        1
    };
    m * k * n.div_ceil(cols.max(1)) * subs + k * n * m.div_ceil(rows.clamp(1, m))
}

/// The tall blocks of `s` (column blocks of `cols`) in a slot of `region` floats, the fewer
/// elements [`widened`] of two layouts, the first on a tie; `None` unless they hold more rows
/// than `block` (and, packing A on the stack, widen fewer elements than the planned blocks):
/// - A in the region: the rows per task, `m` cut into equal blocks of at most [`MC`] rows
///   (one M block of the core), each a multiple of `mr` (or all of `m`) whose packed A (all
///   of K) and a C sub-block of at least [`CW_MIN`] columns (or all of `cols`) fit, then the
///   widest sub-block those rows leave room for;
/// - A on the stack (a K block of at most [`STACK_ROWS`] rows at a time), C alone in the
///   region (or on the stack, [`STACK_C`], when larger): of the equal blocks of at most each
///   multiple of `mr` up to [`STACK_ROWS`], by column blocks of `cols` or of all of `n` (when
///   that leaves at least `slots` tasks), the one widening least.
pub(super) fn plan(
    s: &MmStage,
    (cols, slots): (usize, usize),
    block: usize,
    region: usize,
    mr: usize,
) -> Option<Tall> {
    let m = s.m.max(1);
    let block = block.clamp(1, m);
    let cost = |t: &Tall| widened(s, t.cols, t.rows, t.cw, t.stack_a);
    let planned = widened(s, cols, block, cols, false);
    let in_region = plan_in_region(s, cols, region, mr).filter(|t| t.rows > block);
    let whole = (s.n > cols).then_some(s.n.max(1));
    let on_stack = [Some(cols), whole]
        .into_iter()
        .flatten()
        .filter_map(|c| plan_on_stack(s, (c, slots), region, mr))
        .filter(|t| {
            let tasks = m.div_ceil(t.rows) * s.n.max(1).div_ceil(t.cols);
            t.rows > block && cost(t) < planned && (t.cols == cols || tasks >= slots)
        })
        .min_by_key(cost);
    [in_region, on_stack].into_iter().flatten().min_by_key(cost)
}

/// The first layout of [`plan`]: A for all of K at the region's start.
fn plan_in_region(s: &MmStage, cols: usize, region: usize, mr: usize) -> Option<Tall> {
    let (m, k) = (s.m.max(1), s.k.max(1));
    let cap = MC.min(m.next_multiple_of(mr));
    let room = |t: usize| region.checked_sub(up(t.next_multiple_of(mr) * k));
    let fits = |t: usize| room(t).is_some_and(|r| cw_for(t, r, cols) > 0);
    let most = (1..=cap / mr).rev().map(|u| u * mr).find(|&t| fits(t))?;
    let blocks = m.div_ceil(most);
    let rows = m.div_ceil(blocks).next_multiple_of(mr).min(most).min(m);
    let cw = cw_for(rows, room(rows)?, cols);
    (cw > 0).then_some(Tall {
        rows,
        cw,
        cols,
        stack_a: false,
        stack_c: false,
    })
}

/// The second layout of [`plan`]: A a K block at a time on the stack (at most
/// [`STACK_ROWS`] rows), C in the region, or in [`STACK_C`] floats on the stack when more.
/// On `slots > 1` the row blocks are equal (not rounded up to `mr`) and, with the column
/// blocks, a multiple of `slots` tasks, so no thread waits on a taller task (128 rows at 2
/// threads: 64 + 64, not 72 + 56).
fn plan_on_stack(
    s: &MmStage,
    (cols, slots): (usize, usize),
    region: usize,
    mr: usize,
) -> Option<Tall> {
    if s.k == 0 {
        return None;
    }
    let m = s.m.max(1);
    let ncb = s.n.max(1).div_ceil(cols.max(1));
    let cap = STACK_ROWS.min(m.next_multiple_of(mr));
    (1..=cap / mr)
        .rev()
        .filter_map(|u| {
            let most = u * mr;
            let nrb = m.div_ceil(most);
            let rows = if slots > 1 {
                let nrb = if (nrb * ncb).is_multiple_of(slots) {
                    nrb
                } else {
                    nrb.next_multiple_of(slots)
                };
                m.div_ceil(nrb)
            } else {
                m.div_ceil(nrb).next_multiple_of(mr)
            };
            let rows = rows.min(most).min(m);
            let cw = cw_for(rows, region.max(STACK_C), cols);
            (cw > 0).then_some(Tall {
                rows,
                cw,
                cols,
                stack_a: true,
                stack_c: rows * cw > region,
            })
        })
        .min_by_key(|t| widened(s, cols, t.rows, t.cw, true))
}

/// Widens rows of the 16-bit `a` (`rows x k`, row-major) and packs them for micro-kernels of
/// `mr` rows into `dst` in [`crate::gemm::pack_a_all`]'s layout (`m_pad = rows` rounded up to
/// `mr`; K blocks as the core cuts them), through one widened micro-panel on the stack.
///
/// # Safety
/// `a` readable for `rows * k` values; `dst` writable for `m_pad * k` floats, overlapping
/// nothing read; `mr <= 12`.
unsafe fn pack_a16(t: N16, rows: usize, k: usize, a: *const u16, mr: usize, dst: *mut f32) {
    let m_pad = rows.div_ceil(mr) * mr;
    let kc_max = k_blocks(k).1;
    let mut pc = 0;
    while pc < k {
        let kc = kc_max.min(k - pc);
        // SAFETY: K block pc of the packed A is `m_pad * kc` floats at `pc * m_pad`, inside
        // `m_pad * k`; the rest by the contract.
        unsafe { pack_a16_block(t, rows, k, a, mr, (pc, kc), dst.add(pc * m_pad)) };
        pc += kc;
    }
}

/// Widens columns `pc..pc + kc` (`kc <= KC`) of rows of the 16-bit `a` (`rows x k`,
/// row-major) and packs them into `mr`-row micro-panels at `dst` (`rows` rounded up to
/// `mr`, times `kc` floats; panel `ip` at `ip * mr * kc`, rows past `rows` zero), through
/// one widened micro-panel on the stack.
///
/// # Safety
/// `a` readable for `rows * k` values; `dst` writable for `rows.div_ceil(mr) * mr * kc`
/// floats, overlapping nothing read; `mr <= 12`; `pc + kc <= k`, `kc <= KC`.
unsafe fn pack_a16_block(
    t: N16,
    rows: usize,
    k: usize,
    a: *const u16,
    mr: usize,
    (pc, kc): (usize, usize),
    dst: *mut f32,
) {
    #[repr(C, align(64))]
    struct Buf([f32; 12 * KC]);
    let mut buf = Buf([0.0; 12 * KC]);
    for ip in 0..rows.div_ceil(mr) {
        let h = mr.min(rows - ip * mr);
        for r in 0..h {
            // SAFETY: row ip * mr + r < rows, columns pc..pc + kc <= k of A.
            let src = unsafe { std::slice::from_raw_parts(a.add((ip * mr + r) * k + pc), kc) };
            widen(t, src, &mut buf.0[r * kc..(r + 1) * kc]);
        }
        // SAFETY: `buf` holds h rows of kc floats at stride kc; micro-panel ip is `mr * kc`
        // floats at `ip * mr * kc`, inside the destination.
        unsafe { pack_a(mr, h, kc, buf.0.as_ptr(), kc, dst.add(ip * mr * kc)) };
    }
}

/// One task of the tall product: rows `at..at + rows` of A and Y by columns `j0..j0 + w`,
/// in the slot `region` (its A packed first, C after it at a 64-byte boundary).
///
/// # Safety
/// `a`, `y` as [`super::matmul`]'s; `packed_b` the whole reduced B (`wtype`) of `s.k x s.n`;
/// `bias` null or `n` floats; `region` writable for the floats [`plan`] planned `tall` in,
/// this task's alone; rows and columns this task's alone in Y.
#[allow(clippy::too_many_arguments)]
unsafe fn task(
    t: N16,
    s: &MmStage,
    tall: &Tall,
    wtype: u64,
    (at, rows): (usize, usize),
    (j0, w): (usize, usize),
    a: *const u16,
    packed_b: *const u8,
    bias: *const f32,
    y: *mut u16,
    region: *mut f32,
) {
    let (k, n) = (s.k, s.n);
    if tall.stack_a {
        let ops = (a, packed_b, bias, y);
        // SAFETY: the caller's contract; the region holds C alone ([`plan_on_stack`]).
        return unsafe { task_on_stack(t, s, tall, wtype, (at, rows), (j0, w), ops, region) };
    }
    let kernel = selected_kernel();
    let mr = kernel.mr;
    let m_pad = rows.div_ceil(mr) * mr;
    let c = region.wrapping_add(up(m_pad * k));
    // SAFETY: rows `at..at + rows` of A; the packed A fits the region ([`plan`]).
    unsafe { pack_a16(t, rows, k, a.add(at * k), mr, region) };
    let av = AView::Packed {
        base: region.cast_const(),
        m_pad,
        row0: 0,
    };
    let wt = WeightType::from_code(wtype).unwrap_or(WeightType::F32);
    let b = BView::packed_lowp(packed_b, wt, k, n);
    let mut jj = 0;
    while jj < w {
        let cw = tall.cw.min(w - jj);
        // SAFETY: the packed A above (no scratch read for it); columns j0 + jj.. of B
        // (a multiple of NR: j0 and cw are); C holds rows x cw floats after the packed A.
        unsafe {
            sgemm_core(kernel, rows, cw, k, av, b.at_col(j0 + jj), c, cw, false, c);
        }
        // SAFETY: C's rows x cw floats written above; Y's rows at.., columns j0 + jj..
        // + cw this task's.
        unsafe {
            store(
                t,
                (rows, cw, c),
                cut(bias, j0 + jj),
                y.add(at * n + j0 + jj),
                n,
            )
        };
        jj += cw;
    }
}

/// The bias from column `j` on (null stays null).
fn cut(bias: *const f32, j: usize) -> *const f32 {
    if bias.is_null() {
        bias
    } else {
        bias.wrapping_add(j)
    }
}

/// C's `rows x cw` floats (at stride `cw`) plus the `cw` floats of `bias` (if not null)
/// narrowed into `rows` rows of `y` at stride `n`.
///
/// # Safety
/// C readable and writable as said; `bias` null or readable for `cw` floats; `y` writable
/// for `rows` rows of `cw` values at stride `n`.
unsafe fn store(
    t: N16,
    (rows, cw, c): (usize, usize, *mut f32),
    bias: *const f32,
    y: *mut u16,
    n: usize,
) {
    // SAFETY: the contract.
    unsafe {
        for i in 0..rows {
            let row = std::slice::from_raw_parts_mut(c.add(i * cw), cw);
            if !bias.is_null() {
                let bias = std::slice::from_raw_parts(bias, cw);
                row.iter_mut().zip(bias).for_each(|(v, &b)| *v += b);
            }
            narrow(t, row, std::slice::from_raw_parts_mut(y.add(i * n), cw));
        }
    }
}

/// [`task`] with A packed a K block at a time into a stack buffer and C
/// (`rows x cw`) alone at the region's start: per C sub-block, per K block of the core's
/// blocking, A's rows widened and packed (once per task when K is one block), then that
/// block's product on the micro-kernels added to C (the core's sums: B's rows `pc..` as a
/// product of its own, accumulating from the second K block on).
///
/// # Safety
/// That of [`task`] (`ops`: A, the reduced B, the bias, Y); `rows <= STACK_ROWS`; the
/// region holds `rows * tall.cw` floats unless `tall.stack_c` (then `rows * tall.cw <=
/// STACK_C`).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn task_on_stack(
    t: N16,
    s: &MmStage,
    tall: &Tall,
    wtype: u64,
    (at, rows): (usize, usize),
    (j0, w): (usize, usize),
    (a, packed_b, bias, y): (*const u16, *const u8, *const f32, *mut u16),
    region: *mut f32,
) {
    #[repr(C, align(64))]
    struct ABuf(std::mem::MaybeUninit<[f32; STACK_ROWS * KC]>);
    #[repr(C, align(64))]
    struct CBuf(std::mem::MaybeUninit<[f32; STACK_C]>);
    let mut abuf = ABuf(std::mem::MaybeUninit::uninit());
    let mut cbuf = CBuf(std::mem::MaybeUninit::uninit());
    let ap = abuf.0.as_mut_ptr().cast::<f32>();
    let (k, n) = (s.k, s.n);
    let kernel = selected_kernel();
    let mr = kernel.mr;
    let m_pad = rows.div_ceil(mr) * mr;
    let (kb, kc_max) = k_blocks(k);
    let wt = WeightType::from_code(wtype).unwrap_or(WeightType::F32);
    let b = BView::packed_lowp(packed_b, wt, k, n);
    let av = AView::Packed {
        base: ap.cast_const(),
        m_pad,
        row0: 0,
    };
    let c = if tall.stack_c {
        cbuf.0.as_mut_ptr().cast::<f32>()
    } else {
        region
    };
    let mut jj = 0;
    while jj < w {
        let cw = tall.cw.min(w - jj);
        let mut pc = 0;
        while pc < k {
            let kc = kc_max.min(k - pc);
            if kb > 1 || jj == 0 {
                // SAFETY: rows `at..at + rows` of A, columns `pc..pc + kc`; `m_pad * kc <=
                // STACK_ROWS * KC` floats of the buffer (`rows <= STACK_ROWS`, a multiple of
                // `mr`).
                unsafe { pack_a16_block(t, rows, k, a.add(at * k), mr, (pc, kc), ap) };
            }
            // SAFETY: the packed block above; rows `pc..pc + kc` of B's columns `j0 + jj..`
            // (a multiple of NR); C holds rows x cw floats (region or stack), written by the
            // first K block, read and added to by the others; no scratch read (A packed).
            unsafe {
                let bv = b.at_col(j0 + jj).at_row(pc);
                sgemm_core(kernel, rows, cw, kc, av, bv, c, cw, pc > 0, c);
            }
            pc += kc;
        }
        // SAFETY: C written above; Y's rows at.., columns j0 + jj.. + cw this task's.
        unsafe {
            store(
                t,
                (rows, cw, c),
                cut(bias, j0 + jj),
                y.add(at * n + j0 + jj),
                n,
            )
        };
        jj += cw;
    }
}

/// Floats of one slot's region: the product's whole scratch (`floats`) in `slots` equal
/// parts, whole 64-byte lines each.
pub(super) fn region_floats(floats: usize, slots: usize) -> usize {
    floats / slots.max(1) / 16 * 16
}

/// Runs the whole product in tall tasks when they fit (and, on a pool, when more than one
/// runs at once: else the planned path runs each product on every thread), returning whether
/// it did. The scratch planned for `block`-row blocks (`floats` at `scratch`) is cut anew
/// into `slots` equal regions, one per thread running tasks.
///
/// # Safety
/// As [`super::matmul`] with a constant reduced B (`wtype`); `scratch` writable for
/// `floats` floats, 64-aligned, overlapping nothing else; `slots` at most what
/// [`super::MmStage::parts`] planned slots for (1 at one thread).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn run(
    t: N16,
    s: &MmStage,
    block: usize,
    wtype: u64,
    (scratch, floats, slots): (*mut f32, usize, usize),
    a: *const u16,
    packed_b: *const u8,
    bias: *const f32,
    y: *mut u16,
) -> bool {
    let (m, n) = (s.m, s.n);
    let threads = s.threads.max(1);
    let slots = if threads == 1 { 1 } else { slots.max(1) };
    let mr = selected_kernel().mr;
    let region = region_floats(floats, slots);
    let Some(tall) = plan(s, (s.cols_at(block), slots), block, region, mr) else {
        return false;
    };
    let cols = tall.cols;
    let (nrb, ncb) = (m.max(1).div_ceil(tall.rows), n.max(1).div_ceil(cols));
    let tasks = nrb * ncb;
    let width = task_width(
        tasks,
        slots,
        crate::par::cost::gemm_ns(s.batch * m * n * s.k),
    );
    if threads > 1 && width <= 1 {
        return false;
    }
    let (a, y, bias) = (Shared::of(a), Shared(y), Shared::of(bias));
    let (pb, scratch) = (Shared::of(packed_b), Shared(scratch));
    for bi in 0..s.batch {
        crate::par::for_each(tasks, width, |i, th| {
            let (j0, r0) = ((i / nrb) * cols, (i % nrb) * tall.rows);
            let (w, h) = (cols.min(n - j0), tall.rows.min(m - r0));
            let region = scratch.get().wrapping_add(th * region);
            // SAFETY: rows `bi * m + r0..+h`, columns `j0..j0 + w` are this task's; thread
            // `th < width <= slots` uses its own region of the scratch (contract).
            unsafe {
                task(
                    t,
                    s,
                    &tall,
                    wtype,
                    (bi * m + r0, h),
                    (j0, w),
                    a.get(),
                    pb.get(),
                    bias.get(),
                    y.get(),
                    region,
                )
            };
        });
    }
    true
}
