//! One unit of [`super::run`]'s step 2 (image, tile block, range of row blocks): the input
//! transform of its tile block into the 36 packed `V_p` (the slot's head), then per row
//! block the 36 products `O_p = U_p V_p` (after `V`) and the output transform into `y`.
//! [`Part`] names a piece of it, so the threads of a run of one unit share it
//! ([`super::shared_unit`]): each piece computes its rows or matrices as the whole does.

use super::super::conv::{Activation, ConvParams};
use super::transform::{self, L, Lanes};
use super::{AView, BView, Blocking, Isa, NR, POS, o_rows, row_block, selected_kernel};

/// One unit of step 2.
pub(super) struct Unit {
    pub(super) img: usize,
    pub(super) block: usize,
    pub(super) mblocks: std::ops::Range<usize>,
    /// The 16-bit input read in place of `x` ([`super::run16`]).
    pub(super) x16: Option<super::In16>,
}

/// What of one unit [`unit_body`] computes.
#[derive(Clone, Debug)]
pub(super) enum Part {
    /// All of it: the input transform, then per row block the products and the output
    /// transform.
    Whole,
    /// The input transform of these input channels (their rows of every `V_p`).
    Input(std::ops::Range<usize>),
    /// The products `O_p = U_p V_p` of these positions for the unit's first row block.
    Products(std::ops::Range<usize>),
    /// The output transform of these rows of the unit's first row block.
    Output(std::ops::Range<usize>),
}

/// [`unit_body`] compiled for `isa`.
///
/// # Safety
/// That of [`unit_body`].
pub(super) unsafe fn unit_dispatch(
    isa: Isa,
    p: &ConvParams,
    b: &Blocking,
    unit: &Unit,
    ptrs: (*mut f32, *mut f32, *mut f32, *mut f32, *mut f32),
    lay: usize,
    part: Part,
) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn avx512(
            p: &ConvParams,
            b: &Blocking,
            unit: &Unit,
            ptrs: (*mut f32, *mut f32, *mut f32, *mut f32, *mut f32),
            lay: usize,
            part: Part,
        ) {
            // SAFETY: the caller's contract.
            unsafe { unit_body(p, b, unit, ptrs, lay, part) }
        }
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2(
            p: &ConvParams,
            b: &Blocking,
            unit: &Unit,
            ptrs: (*mut f32, *mut f32, *mut f32, *mut f32, *mut f32),
            lay: usize,
            part: Part,
        ) {
            // SAFETY: the caller's contract.
            unsafe { unit_body(p, b, unit, ptrs, lay, part) }
        }
        match isa {
            // SAFETY: the variant matches the selected kernel, which this CPU runs.
            Isa::Avx512 => return unsafe { avx512(p, b, unit, ptrs, lay, part) },
            // SAFETY: as above.
            Isa::Avx2 => return unsafe { avx2(p, b, unit, ptrs, lay, part) },
            Isa::Portable => {}
        }
    }
    let _ = isa;
    // SAFETY: the caller's contract.
    unsafe { unit_body(p, b, unit, ptrs, lay, part) }
}

/// The geometry and pointers of one unit's work.
struct Geo<'a> {
    p: &'a ConvParams,
    b: &'a Blocking,
    /// The image's input planes (f32), or its 16-bit ones.
    xi: *const f32,
    x16: Option<super::In16>,
    /// The 36 transformed weight matrices, `u_one` floats each.
    u: *const f32,
    u_one: usize,
    bias: *const f32,
    /// The image's output planes.
    yi: *mut f32,
    /// The slot's `V` (36 x c x t) and `O` (36 x [`o_rows`] x t) parts.
    v: *mut f32,
    o: *mut f32,
    /// The block's first tile, its tiles, and its packed columns (a multiple of [`NR`]).
    first: usize,
    nt: usize,
    n_cols: usize,
}

/// One unit's `part` (all of it, [`Part::Whole`], or one piece).
///
/// # Safety
/// `x`, `bias`, `y` as for [`super::run`]; `u` holds the 36 transformed weight matrices
/// (`u_one` floats each); `slot` writable for one slot of [`super::parts`]; no one else
/// writes what `part` writes (the unit's outputs, its rows of `V` or matrices of `O`), and
/// what it reads of the slot is written (a [`Part::Products`] after the [`Part::Input`]
/// pieces of all channels, a [`Part::Output`] after the products of all positions).
#[inline(always)]
unsafe fn unit_body(
    p: &ConvParams,
    b: &Blocking,
    unit: &Unit,
    (x, u, bias, y, slot): (*mut f32, *mut f32, *mut f32, *mut f32, *mut f32),
    u_one: usize,
    part: Part,
) {
    let us = |v: u64| v as usize;
    let (c, m) = (us(p.c), us(p.m));
    let first = unit.block * b.t;
    let nt = b.t.min(b.tiles - first);
    let g = Geo {
        p,
        b,
        xi: x
            .cast_const()
            .wrapping_add(unit.img * c * us(p.h) * us(p.w)),
        x16: unit.x16.map(|s| s.image(unit.img, c)),
        u: u.cast_const(),
        u_one,
        bias: bias.cast_const(),
        yi: y.wrapping_add(unit.img * m * us(p.oh) * us(p.ow)),
        v: slot,
        o: slot.wrapping_add(POS * c * b.t),
        first,
        nt,
        n_cols: nt.next_multiple_of(NR),
    };
    let rb = row_block(p);
    let rows = |mb: usize| rb.min(m - mb * rb);
    match part {
        Part::Whole => {
            // SAFETY: the contract: all of the unit, the passes in order.
            unsafe { input(&g, 0..c) };
            for mb in unit.mblocks.clone() {
                // SAFETY: as above; V written just before.
                unsafe { products(&g, mb, 0..POS) };
                // SAFETY: as above; O of this row block written just before.
                unsafe { output(&g, mb, 0..rows(mb)) };
            }
        }
        // SAFETY: the contract: these channels' rows of V are this part's alone.
        Part::Input(r) => unsafe { input(&g, r) },
        // SAFETY: the contract: V is written, these O_p are this part's alone.
        Part::Products(r) => unsafe { products(&g, unit.mblocks.start, r) },
        // SAFETY: the contract: O is written, these channels are this part's alone.
        Part::Output(r) => unsafe { output(&g, unit.mblocks.start, r) },
    }
}

/// The input transform of input channels `chans` of the block's tiles into their rows of
/// every `V_p` ([`super::input::input`]).
///
/// # Safety
/// As [`unit_body`]; writes only rows `chans` of the `V_p`.
#[inline(always)]
unsafe fn input(g: &Geo, chans: std::ops::Range<usize>) {
    let us = |v: u64| v as usize;
    let blk = super::input::Block {
        xi: g.xi,
        x16: g.x16,
        c: us(g.p.c),
        h: us(g.p.h),
        w: us(g.p.w),
        pt: g.p.pad_t as isize,
        pl: g.p.pad_l as isize,
        tw: g.b.tw,
        first: g.first,
        nt: g.nt,
        n_cols: g.n_cols,
        t: g.b.t,
        v: g.v,
    };
    // SAFETY: the contract: the image's planes, the slot's V part.
    unsafe { super::input::input(&blk, chans) }
}

/// The products `O_p = U_p V_p` of positions `positions` for row block `mb`.
///
/// # Safety
/// As [`unit_body`]; reads all of `V`, writes only the `O_p` of `positions`.
#[inline(always)]
unsafe fn products(g: &Geo, mb: usize, positions: std::ops::Range<usize>) {
    let (c, m, t) = (g.p.c as usize, g.p.m as usize, g.b.t);
    let rb = row_block(g.p);
    let ob = o_rows(g.p) * t;
    let (r0, kernel) = (mb * rb, selected_kernel());
    let rows = rb.min(m - r0);
    for pos in positions {
        let a = AView::packed(g.u.wrapping_add(pos * g.u_one), m).at_row(r0);
        let bv = BView::packed(g.v.cast_const().wrapping_add(pos * c * t), c, g.n_cols);
        // SAFETY: U_pos is m_pad x c packed for this kernel (rows r0..r0+rows < m_pad);
        // V_pos c x n_cols packed; O_pos rows x n_cols at stride t inside the slot's O
        // part (rb x t per position); a packed A uses no scratch.
        unsafe {
            super::super::sgemm_core(
                kernel,
                rows,
                g.n_cols,
                c,
                a,
                bv,
                g.o.wrapping_add(pos * ob),
                t,
                false,
                std::ptr::null_mut(),
            )
        };
    }
}

/// The output transform of rows `ris` of row block `mb` (output channels `mb * rb + ri`)
/// plus the residual `y` holds (`p.accumulate`), with the bias and the activation, stored
/// clipped at the plane's right and bottom edges. The residual is read into the transformed
/// tile before [`super::super::act::bias_act`] (adding it in the store instead, with a scalar
/// activation per element, was slower: 13% vs 6% over no residual on 64 channels at 56x56).
///
/// # Safety
/// As [`unit_body`]; reads rows `ris` of every `O_p`, writes only those channels' tiles.
#[inline(always)]
unsafe fn output(g: &Geo, mb: usize, ris: std::ops::Range<usize>) {
    let (p, b) = (g.p, g.b);
    let (oh, ow, t) = (p.oh as usize, p.ow as usize, b.t);
    let ob = o_rows(p) * t;
    let r0 = mb * row_block(p);
    let act = p.activation();
    let epilogue = p.has_bias != 0 || act != Activation::None;
    // A fused residual: y holds it on entry, added before the activation.
    let residual = p.accumulate != 0;
    let mut yt = [[0.0f32; L]; 16];
    for ri in ris {
        let mi = r0 + ri;
        let bias_v = if p.has_bias != 0 {
            // SAFETY: channel mi < m of the bias.
            unsafe { *g.bias.add(mi) }
        } else {
            0.0
        };
        let yc = g.yi.wrapping_add(mi * oh * ow);
        for gi in 0..g.n_cols / L {
            let ms: [&Lanes; POS] = std::array::from_fn(|pos| {
                // SAFETY: row ri, columns gi*16.. of O_pos, written by the products.
                unsafe { &*g.o.add(pos * ob + ri * t + gi * L).cast::<Lanes>() }
            });
            transform::output(&ms, &mut yt);
            if residual {
                // The residual at the positions the store below writes, before them.
                outputs(g, gi, (oh, ow), |pos, l, at| {
                    // SAFETY: `at` inside the output plane of channel mi.
                    yt[pos][l] += unsafe { *yc.add(at) };
                });
            }
            if epilogue {
                super::super::act::bias_act(yt.as_flattened_mut(), bias_v, act);
            }
            // Lane l of the 16 rows of yt is tile first + gi * L + l.
            // SAFETY: `at` inside the output plane of channel mi.
            outputs(g, gi, (oh, ow), |pos, l, at| unsafe {
                *yc.add(at) = yt[pos][l]
            });
        }
    }
}

/// `f(pos, l, at)` for every output of panel `gi`'s tiles inside the plane (`oh x ow`):
/// position `pos` (`4 i + j`) of lane `l`'s tile is element `at` of an output plane.
#[inline(always)]
fn outputs(g: &Geo, gi: usize, (oh, ow): (usize, usize), mut f: impl FnMut(usize, usize, usize)) {
    for l in 0..L.min(g.nt - gi * L) {
        let ti = g.first + gi * L + l;
        let (oy, ox) = (ti / g.b.tw * 4, ti % g.b.tw * 4);
        if oy + 4 <= oh && ox + 4 <= ow {
            // A whole tile: constant bounds.
            for i in 0..4 {
                for j in 0..4 {
                    f(4 * i + j, l, (oy + i) * ow + ox + j);
                }
            }
            continue;
        }
        for i in 0..4.min(oh - oy) {
            for j in 0..4.min(ow - ox) {
                f(4 * i + j, l, (oy + i) * ow + ox + j);
            }
        }
    }
}
