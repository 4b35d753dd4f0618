//! The stage's windows: which nodes may be in a stage ([`rule`]: 2-d Conv and pooling by
//! their kernel, stride, dilation and pads, nearest integer upsampling, ConvTranspose whose
//! kernel equals its stride ([`transposed`]), element-wise nodes and channel Concat with a
//! receptive field of 1), how an output window maps back to the input
//! window it reads (`PATCHES.md` §0.1, [`Local::back`]), and the windows of every stage value
//! for a patch, found backwards from the cells ([`cells`]) of the leaving values, per spatial
//! dim ([`ranges_cut`]).

use std::collections::HashMap;
use std::ops::Range;

use super::passes;
use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::types::TensorType;
use crate::ops::{ConvTransposeAttrs, Op};

/// A window of a 4-d value's plane: rows and columns, half-open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Rows.
    pub rows: Range<usize>,
    /// Columns.
    pub cols: Range<usize>,
}

/// How a stage node maps an output window to an input window, per spatial dim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Local {
    pub(super) k: [usize; 2],
    pub(super) s: [usize; 2],
    pub(super) d: [usize; 2],
    pub(super) pb: [usize; 2],
    /// An integer nearest upsampling (Resize): output row `o` reads input row `o / up`.
    pub(super) up: [usize; 2],
    /// A ConvTranspose ([`transposed`]): input row `i` reaches output rows
    /// `i * s - pb + t * d` for taps `t < k`.
    pub(super) transposed: bool,
}

impl Local {
    /// The input range (clamped to `0..size`) the output range `o` reads along `dim`.
    pub(super) fn back(&self, o: &Range<usize>, dim: usize, size: usize) -> Range<usize> {
        let up = self.up[dim];
        if up > 1 {
            if o.is_empty() {
                return 0..0;
            }
            return (o.start / up).min(size)..((o.end - 1) / up + 1).min(size);
        }
        if self.transposed {
            return back_transposed(o, self.k[dim], self.s[dim], self.d[dim], self.pb[dim], size);
        }
        back(o, self.k[dim], self.s[dim], self.d[dim], self.pb[dim], size)
    }
}

/// The integer factors of a nearest Resize upsampling a 4-d plane whose output row `o` reads
/// input row `o / f` (and columns alike): half-pixel coordinates with either rounding, or
/// asymmetric ones rounded down; `None` for any other Resize.
fn upsampling(r: &crate::ops::ResizeAttrs, x: &TensorType) -> Option<[usize; 2]> {
    use crate::ops::resize::ResizeMode;
    let coord = r.coordinate_transformation.as_str();
    let near = r.nearest_mode.as_str();
    let ok = r.mode == ResizeMode::Nearest
        && r.roi.is_empty()
        && (matches!(coord, "half_pixel" | "pytorch_half_pixel")
            && matches!(near, "round_prefer_floor" | "round_prefer_ceil")
            || coord == "asymmetric" && matches!(near, "floor" | "simple"));
    if !ok || r.scales.len() != 4 || r.scales[0] != 1.0 || r.scales[1] != 1.0 {
        return None;
    }
    let mut f = [1usize; 2];
    for (d, fd) in f.iter_mut().enumerate() {
        let s = *r.scales.get(2 + d)?;
        if s < 1.0 || s.fract() != 0.0 || s > 64.0 {
            return None;
        }
        *fd = s as usize;
        if r.output_shape.get(2 + d)? != &(x.shape.get(2 + d)? * *fd) {
            return None;
        }
    }
    (r.output_shape.get(..2) == x.shape.get(..2)).then_some(f)
}

/// The input rows (or columns) an output range `o` reads through one dim of `l`, clamped to
/// `0..size`.
fn back(o: &Range<usize>, k: usize, s: usize, d: usize, pb: usize, size: usize) -> Range<usize> {
    if o.is_empty() {
        return 0..0;
    }
    let lo = (o.start * s).saturating_sub(pb);
    let hi = ((o.end - 1) * s + (k - 1) * d + 1).saturating_sub(pb);
    lo.min(size)..hi.min(size)
}

/// The input rows (or columns) of a ConvTranspose whose taps reach output range `o`: every
/// `i` with `i * s - pb + t * d` in `o` for some tap `t < k`, i.e.
/// `ceil((o.start + pb - (k - 1) * d) / s) ..= floor((o.end - 1 + pb) / s)`, clamped to
/// `0..size` (the last row when `o` lies past every tap's reach).
fn back_transposed(
    o: &Range<usize>,
    k: usize,
    s: usize,
    d: usize,
    pb: usize,
    size: usize,
) -> Range<usize> {
    if o.is_empty() || s == 0 {
        return 0..0;
    }
    let reach = (k.max(1) - 1) * d;
    let lo = (o.start + pb).saturating_sub(reach).div_ceil(s);
    let hi = (o.end - 1 + pb) / s + 1;
    let (lo, hi) = (lo.min(size), hi.min(size));
    if lo >= hi {
        // Rows of `output_padding` alone (bias only): the last input row, so the window is
        // not empty (its taps land before `o`, cut by the begin pad).
        return size.saturating_sub(1)..size;
    }
    lo..hi
}

/// The window rule of a 2-d ConvTranspose with constant weights, when a patch may run it:
/// every spatial dim with `kernel == stride` and dilation 1, so each output row (column) is
/// made by exactly one input row (column) and one tap, as in the whole node (bias first, then
/// the one product: the same bits on any window; with overlapping taps the sum's order would
/// follow the whole kernel's tiles of input rows). The lowering recomputes the pads and
/// `output_padding` per window ([`transposed_attrs`]).
pub(super) fn transposed(a: &ConvTransposeAttrs) -> Option<Local> {
    let two = |v: &[usize]| -> Option<[usize; 2]> {
        match v {
            [a, b] => Some([*a, *b]),
            _ => None,
        }
    };
    let (k, s, d) = (two(&a.kernel)?, two(&a.strides)?, two(&a.dilations)?);
    let ok = (0..2).all(|i| k[i] >= 1 && k[i] == s[i] && d[i] == 1);
    ok.then_some(Local {
        k,
        s,
        d,
        pb: [*a.pads.first()?, *a.pads.get(1)?],
        up: [1, 1],
        transposed: true,
    })
}

/// The attributes of ConvTranspose `a` (with rule `l`, [`transposed`]) computing the output
/// window `o` from input window `need` (`l.back` of it) along both dims: begin and end pads
/// and `output_padding` cut the sub-node's outputs (in the whole output's coordinates, from
/// `need.start * s - pb` to `(need.end - 1) * s - pb + (k - 1) * d + 1`) to `o`; `None` when
/// the input window is empty or starts after `o` (no such window under [`transposed`]).
pub(super) fn transposed_attrs(
    a: &ConvTransposeAttrs,
    l: &Local,
    o: &Window,
    need: &Window,
) -> Option<ConvTransposeAttrs> {
    let mut pads = vec![0; 4];
    let mut output_padding = vec![0; 2];
    for (dim, (o, need)) in [(&o.rows, &need.rows), (&o.cols, &need.cols)]
        .into_iter()
        .enumerate()
    {
        if o.is_empty() || need.is_empty() {
            return None;
        }
        let (s, pb) = (l.s[dim] as i64, l.pb[dim] as i64);
        let reach = ((l.k[dim] - 1) * l.d[dim]) as i64;
        let first = need.start as i64 * s - pb;
        let end = (need.end as i64 - 1) * s - pb + reach + 1;
        let begin = usize::try_from(o.start as i64 - first).ok()?;
        let (at_end, extra) = if end >= o.end as i64 {
            (usize::try_from(end - o.end as i64).ok()?, 0)
        } else {
            (0, usize::try_from(o.end as i64 - end).ok()?)
        };
        *pads.get_mut(dim)? = begin;
        *pads.get_mut(2 + dim)? = at_end;
        *output_padding.get_mut(dim)? = extra;
    }
    Some(ConvTransposeAttrs {
        pads,
        output_padding,
        ..a.clone()
    })
}

/// Whether `t` is a 4-d batch-1 tensor with a static size.
pub(super) fn plane(t: &TensorType) -> bool {
    t.shape.len() == 4 && t.shape.first() == Some(&1) && t.bytes().is_some()
}

/// The window rule of node `id`, when it may be in a stage: `Some(None)` for element-wise
/// (receptive field 1), `Some(Some(local))` for a 2-d Conv or pooling.
pub(super) fn rule(g: &Graph, id: NodeId) -> Option<Option<Local>> {
    let node = g.node(id);
    if channel_split(g, id).is_some() {
        return Some(None);
    }
    let y = g.value(*node.outputs.first()?);
    if node.outputs.len() != 1 || !plane(&y.ty) {
        return None;
    }
    let two = |v: &[usize]| -> Option<[usize; 2]> { Some([*v.first()?, *v.get(1)?]) };
    let local = |k: &[usize], s: &[usize], d: &[usize], pads: &[usize]| {
        Some(Local {
            k: two(k)?,
            s: two(s)?,
            d: two(d)?,
            pb: two(pads)?,
            up: [1, 1],
            transposed: false,
        })
    };
    match &node.op {
        // A fused residual (`ConvAttrs::sum`, input 3) is read at the output's window.
        Op::Conv(a) if a.kernel.len() == 2 => {
            local(&a.kernel, &a.strides, &a.dilations, &a.pads).map(Some)
        }
        Op::MaxPool(a) | Op::AveragePool(a) if a.kernel.len() == 2 => {
            local(&a.kernel, &a.strides, &a.dilations, &a.pads).map(Some)
        }
        // A decoder's or a detection head's upsampling: one input row per output row.
        Op::ConvTranspose(a)
            if node
                .inputs
                .iter()
                .skip(1)
                .all(|&v| matches!(g.value(v).kind, ValueKind::Constant(_))) =>
        {
            transposed(a).map(Some)
        }
        // Nearest upsampling by integer factors (a decoder's or an FPN's).
        Op::Resize(r) => {
            let x = g.value(*node.inputs.first()?);
            let up = upsampling(r, &x.ty)?;
            Some(Some(Local {
                k: [1, 1],
                s: [1, 1],
                d: [1, 1],
                pb: [0, 0],
                up,
                transposed: false,
            }))
        }
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Variadic(_)
        | Op::ClipDynamic { .. }
        | Op::Cast { .. }
        | Op::FusedElementwise(_)
        | Op::BatchNormalization { .. } => {
            // Every arena input has the output's shape (constants broadcast per channel; a
            // pooled value, one pixel per channel, is read whole: `passes::broadcast`).
            let same = node.inputs.iter().all(|&v| {
                matches!(g.value(v).kind, ValueKind::Constant(_))
                    || g.value(v).ty.shape == y.ty.shape
                    || node
                        .outputs
                        .first()
                        .is_some_and(|&o| passes::broadcast(g, v, o))
                        && g.value(v).ty.shape.get(..2) == y.ty.shape.get(..2)
            });
            same.then_some(None)
        }
        // Along channels: every input is read at the output's window (a CSP block's join).
        Op::Concat { axis: 1 } => {
            let plane_of = |t: &TensorType| t.shape.get(2..4).map(<[usize]>::to_vec);
            let same = node.inputs.iter().all(|&v| {
                !matches!(g.value(v).kind, ValueKind::Constant(_))
                    && plane(&g.value(v).ty)
                    && plane_of(&g.value(v).ty) == plane_of(&y.ty)
            });
            same.then_some(None)
        }
        _ => None,
    }
}

/// The channel ranges of the outputs of node `id` when it is a Split along channels of a
/// batch-1 plane (a C2f / CSP block's fork): each output reads the input at its own window
/// (receptive field 1), so a patch computes each output as a `Slice` of the input's window
/// (channels and window at once, `lower.rs`). `None` for any other node.
pub(super) fn channel_split(g: &Graph, id: NodeId) -> Option<Vec<Range<usize>>> {
    let node = g.node(id);
    let Op::Split { axis: 1, sizes } = &node.op else {
        return None;
    };
    let x = *node.inputs.first()?;
    let xt = &g.value(x).ty;
    if matches!(g.value(x).kind, ValueKind::Constant(_))
        || !plane(xt)
        || sizes.len() != node.outputs.len()
        || node.outputs.is_empty()
    {
        return None;
    }
    let mut at = 0usize;
    let mut out = Vec::with_capacity(sizes.len());
    for (&v, &c) in node.outputs.iter().zip(sizes) {
        let t = &g.value(v).ty;
        let same = plane(t)
            && t.dtype == xt.dtype
            && t.shape.get(1) == Some(&c)
            && t.shape.get(2..4) == xt.shape.get(2..4);
        if !same {
            return None;
        }
        out.push(at..at + c);
        at += c;
    }
    (Some(&at) == xt.shape.get(1)).then_some(out)
}

/// `0..len` cut into `p` ranges, the first `len % p` one longer.
pub(super) fn split(len: usize, p: usize) -> Vec<Range<usize>> {
    let (q, r) = (len / p, len % p);
    let mut at = 0;
    (0..p)
        .map(|i| {
            let n = q + usize::from(i < r);
            let out = at..at + n;
            at += n;
            out
        })
        .collect()
}

/// The windows of the stage values for one patch `w` of the stage output `out`, the stage
/// being `order[..n]`: rows and columns found apart ([`ranges`]), windows being products of
/// the two (a union of windows is taken per dim).
pub fn windows(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    out: ValueId,
    w: Window,
) -> HashMap<ValueId, Window> {
    windows_of(g, order, n, &[(out, w)])
}

/// [`windows`] for several leaving values at once: each stage value's window is the union of
/// what every seed `(value, window)` reads of it (a seed's own window included).
pub fn windows_of(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    seeds: &[(ValueId, Window)],
) -> HashMap<ValueId, Window> {
    windows_cut(g, order, n, seeds, &Cut::default())
}

/// [`windows_of`] for one pass of a multi-pass stage ([`ranges_cut`]).
pub fn windows_cut(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    seeds: &[(ValueId, Window)],
    cut: &Cut,
) -> HashMap<ValueId, Window> {
    let pick = |dim: usize| -> Vec<(ValueId, Range<usize>)> {
        seeds
            .iter()
            .map(|(v, w)| {
                (
                    *v,
                    if dim == 0 {
                        w.rows.clone()
                    } else {
                        w.cols.clone()
                    },
                )
            })
            .collect()
    };
    let rows = ranges_cut(g, order, n, &pick(0), 0, cut);
    let cols = ranges_cut(g, order, n, &pick(1), 1, cut);
    g.value_ids()
        .filter_map(|v| {
            let rows = rows.get(v.index())?.clone()?;
            let cols = cols.get(v.index())?.clone()?;
            Some((v, Window { rows, cols }))
        })
        .collect()
}

/// The range along spatial dim `dim` (0: rows, 1: columns) of every stage value that the
/// seeds — ranges `r` of leaving values `v` — read (a seed's own range included), the stage
/// being `order[..n]`; indexed by value id. Seeds must be non-empty ranges.
pub fn ranges(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    seeds: &[(ValueId, Range<usize>)],
    dim: usize,
) -> Vec<Option<Range<usize>>> {
    ranges_cut(g, order, n, seeds, dim, &Cut::default())
}

/// What a pass of a multi-pass stage does not compute per patch ([`passes`]): values
/// computed once, whole (pooled values and what is made from them alone), and values an
/// earlier pass wrote whole (a checkpoint: windows are found for it, its producers are not
/// visited).
#[derive(Clone, Debug, Default)]
pub struct Cut {
    /// Computed once, whole: never given a window.
    pub global: std::collections::HashSet<ValueId>,
    /// Read whole from an earlier pass.
    pub stop: std::collections::HashSet<ValueId>,
}

/// [`ranges`] of one pass: nothing is propagated through `cut`'s values.
pub fn ranges_cut(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    seeds: &[(ValueId, Range<usize>)],
    dim: usize,
    cut: &Cut,
) -> Vec<Option<Range<usize>>> {
    let stage = &order[..n.min(order.len())];
    let mut slots = Slots::of_nodes(g, stage);
    for (v, _) in seeds {
        slots.add(*v);
    }
    let local = ranges_in(stage, stage.len(), seeds, dim, cut, &slots);
    let mut win: Vec<Option<Range<usize>>> = vec![None; g.values().len()];
    for (&v, r) in slots.ids().iter().zip(local) {
        if let Some(o) = win.get_mut(v.index()) {
            *o = r;
        }
    }
    win
}

/// Compact indices of the values a stage's nodes read or make: the analysis' tables per
/// patch (windows, cached rows) are indexed by these, sized by the stage, not by every value
/// of the graph (a rewritten graph holds thousands: MobileNetV2 after one 6x6 stage).
#[derive(Clone, Debug, Default)]
pub(super) struct Slots {
    /// Per value id, its slot (`u32::MAX`: none); sized by the graph once, reset per stage.
    of: Vec<u32>,
    /// The values, by slot.
    ids: Vec<ValueId>,
    /// The nodes numbered, in their order: what the window rules need of each, found once.
    steps: Vec<Step>,
}

/// [`Slots::cut_flags`]: read whole from an earlier pass.
pub(super) const CUT_STOP: u8 = 1;

/// [`Slots::cut_flags`]: computed once, whole.
pub(super) const CUT_GLOBAL: u8 = 2;

/// A stage node as the window searches read it ([`ranges_in`], `cache::rows`).
#[derive(Clone, Debug)]
pub(super) struct Step {
    /// Its output (the first) and that output's slot.
    pub(super) y: Option<ValueId>,
    pub(super) ys: usize,
    /// The slots of all its outputs (`ys` first; a channel Split has several): the window
    /// it is computed on is the union of theirs ([`Step::window`]).
    pub(super) outs: Vec<usize>,
    /// Its window rule ([`rule`]); `None`: not a stage node, nothing propagates.
    pub(super) rule: Option<Option<Local>>,
    /// The inputs its window is propagated to (a Conv's or pooling's data input, every arena
    /// input of an element-wise node, a Conv's fused residual; not constants, not pooled
    /// values broadcast): the value, its slot, its rows and columns, and whether the rule's
    /// window applies (`false`: read at the output's window, receptive field 1).
    pub(super) reads: Vec<(ValueId, usize, [usize; 2], bool)>,
}

impl Step {
    /// The range its outputs have in `table` (indexed by slot): the union over its outputs
    /// (one for every node but a channel Split), `None` when none has one.
    pub(super) fn window(&self, table: &[Option<Range<usize>>]) -> Option<Range<usize>> {
        let mut w: Option<Range<usize>> = None;
        for &k in &self.outs {
            if let Some(r) = table.get(k).cloned().flatten() {
                w = Some(match w {
                    Some(o) => o.start.min(r.start)..o.end.max(r.end),
                    None => r,
                });
            }
        }
        w
    }
}

impl Slots {
    /// The slots of the inputs and outputs of `nodes`.
    pub(super) fn of_nodes(g: &Graph, nodes: &[NodeId]) -> Self {
        let mut s = Self::default();
        s.refill(g, nodes);
        s
    }

    /// Numbers the inputs and outputs of `nodes` afresh (the table kept, its old entries
    /// cleared).
    pub(super) fn refill(&mut self, g: &Graph, nodes: &[NodeId]) {
        let count = g.values().len();
        if self.of.len() != count {
            self.of = vec![u32::MAX; count];
        } else {
            for v in self.ids.drain(..) {
                if let Some(o) = self.of.get_mut(v.index()) {
                    *o = u32::MAX;
                }
            }
        }
        self.ids.clear();
        self.steps.clear();
        for &id in nodes {
            let node = g.node(id);
            for &v in node.inputs.iter().chain(&node.outputs) {
                self.add(v);
            }
        }
        for &id in nodes {
            let node = g.node(id);
            let Some(&y) = node.outputs.first() else {
                self.steps.push(Step {
                    y: None,
                    ys: usize::MAX,
                    outs: Vec::new(),
                    rule: None,
                    reads: Vec::new(),
                });
                continue;
            };
            let rule = rule(g, id);
            let sum = matches!(&node.op, Op::Conv(a) if a.sum);
            let reads: Vec<(ValueId, bool)> = match rule {
                None => Vec::new(),
                Some(Some(_)) => {
                    let residual = node.inputs.get(3).filter(|_| sum);
                    let data = node.inputs.first().map(|&v| (v, true));
                    data.into_iter()
                        .chain(residual.map(|&v| (v, false)))
                        .collect()
                }
                Some(None) => node.inputs.iter().map(|&v| (v, false)).collect(),
            };
            let reads = reads
                .into_iter()
                .filter(|&(v, _)| {
                    !matches!(g.value(v).kind, ValueKind::Constant(_))
                        && !passes::broadcast(g, v, y)
                })
                .filter_map(|(v, local)| {
                    let shape = &g.value(v).ty.shape;
                    let size = |d: usize| shape.get(2 + d).copied().unwrap_or(1);
                    Some((v, self.get(v)?, [size(0), size(1)], local))
                })
                .collect();
            let outs = node.outputs.iter().filter_map(|&v| self.get(v)).collect();
            self.steps.push(Step {
                y: Some(y),
                ys: self.get(y).unwrap_or(usize::MAX),
                outs,
                rule,
                reads,
            });
        }
    }

    /// Per slot, whether `cut` holds the value: [`CUT_STOP`], [`CUT_GLOBAL`] (a few values
    /// marked, no hashing per node).
    pub(super) fn cut_flags(&self, cut: &Cut) -> Vec<u8> {
        let mut flags = vec![0u8; self.len()];
        for (set, bit) in [(&cut.stop, CUT_STOP), (&cut.global, CUT_GLOBAL)] {
            for &v in set {
                if let Some(f) = self.get(v).and_then(|k| flags.get_mut(k)) {
                    *f |= bit;
                }
            }
        }
        flags
    }

    /// The nodes numbered, in order ([`Step`]).
    pub(super) fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Numbers `v` too (no change when it has a slot or is not a value of the graph).
    pub(super) fn add(&mut self, v: ValueId) {
        if let Some(o) = self.of.get_mut(v.index())
            && *o == u32::MAX
        {
            *o = u32::try_from(self.ids.len()).unwrap_or(u32::MAX);
            self.ids.push(v);
        }
    }

    /// The slot of `v`, when a node of the stage reads or makes it.
    pub(super) fn get(&self, v: ValueId) -> Option<usize> {
        match self.of.get(v.index()) {
            Some(&k) if k != u32::MAX => Some(k as usize),
            _ => None,
        }
    }

    /// Values numbered.
    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// The values, by slot.
    pub(super) fn ids(&self) -> &[ValueId] {
        &self.ids
    }
}

/// The length of the range of `v` in `table` (indexed by `slots`), 0 when it has none.
pub(super) fn slot_len(slots: &Slots, table: &[Option<Range<usize>>], v: ValueId) -> usize {
    slots
        .get(v)
        .and_then(|k| table.get(k))
        .and_then(Option::as_ref)
        .map_or(0, |r| r.len())
}

/// [`ranges_cut`] indexed by `slots`, which must number the nodes `order[..n]` (in that
/// order, [`Slots::refill`]) and possibly more after them: the analysis' form, sized by the
/// stage.
pub(super) fn ranges_in(
    order: &[NodeId],
    n: usize,
    seeds: &[(ValueId, Range<usize>)],
    dim: usize,
    cut: &Cut,
    slots: &Slots,
) -> Vec<Option<Range<usize>>> {
    let mut win: Vec<Option<Range<usize>>> = vec![None; slots.len()];
    for (v, r) in seeds {
        if let Some(o) = slots.get(*v).and_then(|k| win.get_mut(k)) {
            *o = Some(r.clone());
        }
    }
    let n = n.min(order.len()).min(slots.steps.len());
    let flags = slots.cut_flags(cut);
    let flag = |k: usize| flags.get(k).copied().unwrap_or(0);
    for st in slots.steps[..n].iter().rev() {
        let (Some(rule), Some(_)) = (st.rule, st.y) else {
            continue;
        };
        let Some(wo) = st.window(&win) else {
            continue;
        };
        if flag(st.ys) != 0 {
            continue;
        }
        for &(_, k, size, local) in &st.reads {
            if flag(k) & CUT_GLOBAL != 0 {
                continue;
            }
            let wi = match rule {
                Some(l) if local => l.back(&wo, dim, size[dim.min(1)]),
                _ => wo.clone(),
            };
            if let Some(slot) = win.get_mut(k) {
                *slot = Some(match slot.take() {
                    Some(old) => old.start.min(wi.start)..old.end.max(wi.end),
                    None => wi,
                });
            }
        }
    }
    win
}

/// Row (`dim` 0) or column (1) range `i` of a `p`-way cut of each leaving value: the
/// stage output `out` first, then `others`.
pub fn cells(
    g: &Graph,
    out: ValueId,
    others: &[ValueId],
    p: usize,
    dim: usize,
    i: usize,
) -> Vec<(ValueId, Range<usize>)> {
    std::iter::once(out)
        .chain(others.iter().copied())
        .filter_map(|v| {
            let len = *g.value(v).ty.shape.get(2 + dim)?;
            Some((v, split(len, p).get(i)?.clone()))
        })
        .collect()
}
