//! In-place Concat: which values are computed straight into their slice of a Concat's output.
//!
//! A Concat input `v` gets a slot — the Concat's output and the byte offset of `v`'s slice in
//! it — when the slice is one contiguous byte range of the output (every output dim before
//! the axis is 1: NCHW with N = 1 on axis 1, or the outermost axis), `v` is computed by a node
//! that is not a view (a view's bytes already live in another value's buffer), `v` appears
//! once in that Concat, is not a graph output, has a static non-zero size and holds no slot
//! of an earlier Concat (the first Concat in schedule order that reads it wins). Nested
//! Concats compose: a Concat output may itself be a slot of a later Concat, and its inputs'
//! slices then sit inside that slice ([`ConcatSlots::resolve`]).
//!
//! In place is not always smaller: the output's buffer then lives from its first slice's
//! producer, so its other slices' bytes are held early (a U-Net's skip connection would hold
//! the decoder's half of the Concat through the whole encoder). [`ConcatSlots::choose`] keeps
//! the most inputs of a Concat in place (latest producers first) that do not raise the peak of
//! live bytes, estimated on the buffers without in-place Concat. That estimate is greedy, so
//! liveness measures the result exactly, drops a Concat live at the measured peak, or its
//! inputs computed before the peak, while that lowers it ([`ConcatSlots::variants`]),
//! compares with every slot and with none, and keeps the lowest (ties to the chooser's set).

use std::collections::{HashMap, HashSet};

use super::Liveness;
use super::decide::{Decide, Decisions, peak};
use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ops::Op;
use crate::plan::{ALIGN, align_up, lower_bound};

/// Slots of the in-place Concat inputs over one schedule.
#[derive(Debug, Default)]
pub(super) struct ConcatSlots {
    /// Concat input → (the Concat's output, byte offset of the input's slice in it).
    slot: HashMap<ValueId, (ValueId, usize)>,
    /// Each Concat output with slots, in schedule order, with its slotted inputs.
    groups: Vec<(ValueId, Vec<ValueId>)>,
}

impl ConcatSlots {
    /// Finds the slots for `g` run in `order`; `views` says whether view ops alias their
    /// input (their outputs are then never slots).
    pub(super) fn find(g: &Graph, order: &[NodeId], views: bool) -> ConcatSlots {
        let mut slot = HashMap::new();
        let mut groups = Vec::new();
        for &id in order {
            let node = g.node(id);
            let Op::Concat { axis } = node.op else {
                continue;
            };
            let Some(&y) = node.outputs.first() else {
                continue;
            };
            let yt = &g.value(y).ty;
            let (Some(outer), Some(inner)) = (
                yt.shape.get(..axis).map(|s| s.iter().all(|&d| d == 1)),
                yt.shape
                    .get(axis + 1..)
                    .map(|s| s.iter().product::<usize>()),
            ) else {
                continue;
            };
            if !outer || yt.bytes().is_none() {
                continue;
            }
            let row = inner.saturating_mul(yt.dtype.size());
            let mut at = 0usize;
            let mut members = Vec::new();
            for &v in &node.inputs {
                let val = g.value(v);
                let len = val.ty.shape.get(axis).copied().unwrap_or(0);
                let offset = at.saturating_mul(row);
                at = at.saturating_add(len);
                let producer = match val.kind {
                    ValueKind::Computed(p) => g.node(p),
                    _ => continue,
                };
                let view = views && producer.op.is_view();
                let eligible = !view
                    && node.inputs.iter().filter(|&&w| w == v).count() == 1
                    && !g.outputs.contains(&v)
                    && !slot.contains_key(&v)
                    && val.ty.dtype.size() == yt.dtype.size()
                    && val
                        .ty
                        .bytes()
                        .is_some_and(|b| b > 0 && Some(b) == len.checked_mul(row));
                if eligible {
                    slot.insert(v, (y, offset));
                    members.push(v);
                }
            }
            if !members.is_empty() {
                groups.push((y, members));
            }
        }
        ConcatSlots { slot, groups }
    }

    /// How many inputs have slots.
    pub(super) fn len(&self) -> usize {
        self.slot.len()
    }

    /// Variants of these slots that may lower the peak of `live` (the buffers they gave) at
    /// step `at`, in schedule order: for each Concat scheduled after `at` whose buffer is live
    /// at `at` and whose inputs computed by then are smaller than its output (holding the
    /// output's buffer from the first of them costs more than those inputs alone would), the
    /// slots less those early inputs (the buffer then starts after `at`), and less all of that
    /// Concat's slots.
    pub(super) fn variants(&self, g: &Graph, live: &Liveness, at: usize) -> Vec<ConcatSlots> {
        let step_of: HashMap<NodeId, usize> = live
            .order
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, i))
            .collect();
        let produced = |v: ValueId| match g.value(v).kind {
            ValueKind::Computed(p) => step_of.get(&p).copied(),
            _ => None,
        };
        let aligned = |v: ValueId| {
            let bytes = g.value(v).ty.bytes().unwrap_or(0);
            align_up(bytes, ALIGN).unwrap_or(usize::MAX)
        };
        let mut out = Vec::new();
        for (y, members) in &self.groups {
            let held = live
                .value_buffer
                .get(y)
                .and_then(|&b| live.buffers.get(b))
                .is_some_and(|b| b.interval.start <= at && at < b.interval.end);
            if !held || produced(*y).is_none_or(|s| s <= at) {
                continue;
            }
            let early: Vec<ValueId> = members
                .iter()
                .copied()
                .filter(|&v| produced(v).is_some_and(|s| s <= at))
                .collect();
            let early_bytes = early
                .iter()
                .fold(0usize, |acc, &v| acc.saturating_add(aligned(v)));
            if early.is_empty() || early_bytes >= aligned(*y) {
                continue;
            }
            if early.len() < members.len() {
                out.push(self.without(|v| early.contains(&v)));
            }
            out.push(self.without(|v| members.contains(&v)));
        }
        out
    }

    /// These slots less those of the inputs `drop` names.
    fn without(&self, drop: impl Fn(ValueId) -> bool) -> ConcatSlots {
        ConcatSlots {
            slot: self
                .slot
                .iter()
                .filter(|(v, _)| !drop(**v))
                .map(|(&v, &s)| (v, s))
                .collect(),
            groups: self
                .groups
                .iter()
                .map(|(y, m)| (*y, m.iter().copied().filter(|&v| !drop(v)).collect()))
                .filter(|(_, m): &(ValueId, Vec<ValueId>)| !m.is_empty())
                .collect(),
        }
    }

    /// Whether no Concat has a slot.
    pub(super) fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The Concats worth doing in place, judged on `base` (the buffers over the same order
    /// without in-place Concat): in schedule order, for each Concat the largest set of its
    /// slotted inputs, latest producers first, whose buffers can move into the output's buffer
    /// (which then starts at the earliest of them) without raising the highest step of aligned
    /// live bytes. Nested Concats see the merged buffers of the inner ones kept before.
    pub(super) fn choose(&self, g: &Graph, base: &Liveness) -> ConcatSlots {
        let n = base.order.len();
        let step_of: HashMap<NodeId, usize> = base
            .order
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, i))
            .collect();
        // Current (start, end, aligned size) of each base buffer; merged ones become empty.
        let mut rec: Vec<(usize, usize, i128)> = base
            .buffers
            .iter()
            .map(|b| {
                let size = align_up(b.interval.size, ALIGN).unwrap_or(usize::MAX) as i128;
                (b.interval.start, b.interval.end.min(n), size)
            })
            .collect();
        let mut live = vec![0i128; n];
        let add = |live: &mut [i128], (s, e, size): (usize, usize, i128), sign: i128| {
            for x in live.iter_mut().take(e).skip(s) {
                *x += sign * size;
            }
        };
        for &r in &rec {
            add(&mut live, r, 1);
        }
        let mut peak = live.iter().copied().max().unwrap_or(0);
        let mut kept: HashSet<ValueId> = HashSet::new();
        for (y, members) in &self.groups {
            let Some(&by) = base.value_buffer.get(y) else {
                continue;
            };
            // Latest producer first: a subset of the latest inputs starts the buffer later.
            let mut late: Vec<(usize, ValueId)> = members
                .iter()
                .map(|&v| match g.value(v).kind {
                    ValueKind::Computed(p) => (step_of.get(&p).copied().unwrap_or(0), v),
                    _ => (0, v),
                })
                .collect();
            late.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.index().cmp(&b.1.index())));
            for k in (1..=late.len()).rev() {
                let Some(&(mut start, mut end, size)) = rec.get(by) else {
                    break;
                };
                let mut changes: Vec<(usize, (usize, usize, i128))> = Vec::new();
                for &(from, v) in late.iter().take(k) {
                    let Some((bv, &old)) = base
                        .value_buffer
                        .get(&v)
                        .and_then(|&b| Some((b, rec.get(b)?)))
                    else {
                        continue;
                    };
                    let root = base.buffers.get(bv).and_then(|b| b.values.first()) == Some(&v);
                    // A root moves whole; an in-place successor takes the buffer's tail.
                    let new = if root {
                        (old.0, old.0, 0)
                    } else {
                        (old.0, (from + 1).min(old.1).max(old.0), old.2)
                    };
                    start = start.min(if root { old.0 } else { from });
                    end = end.max(old.1);
                    changes.push((bv, new));
                }
                changes.push((by, (start, end, size)));
                let before: Vec<(usize, (usize, usize, i128))> =
                    changes.iter().map(|&(b, _)| (b, rec[b])).collect();
                for &(b, new) in &changes {
                    add(&mut live, rec[b], -1);
                    rec[b] = new;
                    add(&mut live, new, 1);
                }
                let now = live.iter().copied().max().unwrap_or(0);
                if now <= peak {
                    peak = now;
                    kept.extend(late.iter().take(k).map(|&(_, v)| v));
                    break;
                }
                for &(b, old) in before.iter().rev() {
                    add(&mut live, rec[b], -1);
                    rec[b] = old;
                    add(&mut live, old, 1);
                }
            }
        }
        let slot: HashMap<ValueId, (ValueId, usize)> = self
            .slot
            .iter()
            .filter(|(v, _)| kept.contains(v))
            .map(|(&v, &s)| (v, s))
            .collect();
        let groups = self
            .groups
            .iter()
            .map(|(y, m)| (*y, m.iter().copied().filter(|v| kept.contains(v)).collect()))
            .filter(|(_, m): &(ValueId, Vec<ValueId>)| !m.is_empty())
            .collect();
        ConcatSlots { slot, groups }
    }

    /// The Concat output `v` is computed into, with `v`'s offset in it.
    pub(super) fn get(&self, v: ValueId) -> Option<(ValueId, usize)> {
        self.slot.get(&v).copied()
    }

    /// The outermost Concat output whose buffer holds `v` (following nested slots), with
    /// `v`'s byte offset in it; `None` when `v` has no slot.
    pub(super) fn resolve(&self, v: ValueId) -> Option<(ValueId, usize)> {
        let (mut root, mut offset) = self.get(v)?;
        // Each step moves to a Concat scheduled later, so this ends (bounded for safety).
        for _ in 0..=self.slot.len() {
            match self.get(root) {
                Some((up, off)) => {
                    root = up;
                    offset += off;
                }
                None => break,
            }
        }
        Some((root, offset))
    }
}

/// The `in-place concat` pass ([`super::decide::PASSES`]): every slot of the schedule
/// ([`ConcatSlots::find`]) judged on the buffers decided so far. Candidates in order of
/// preference (ties keep the earlier): the chooser's set ([`ConcatSlots::choose`]), pruned
/// while dropping a Concat live at its peak, or its inputs computed before the peak, lowers
/// the peak ([`ConcatSlots::variants`]); every slot; none.
pub(super) fn choose_pass(cx: &Decide<'_>, d: &mut Decisions) {
    let all = ConcatSlots::find(cx.g, cx.order, cx.opts.views);
    if all.is_empty() {
        return;
    }
    let base = cx.measure(d);
    let base_peak = peak(&base);
    let mut measure = |slots: ConcatSlots| {
        d.slots = slots;
        let l = cx.measure(d);
        (peak(&l), l, std::mem::take(&mut d.slots))
    };
    let (mut best_peak, mut best, mut chosen) = measure(all.choose(cx.g, &base));
    // Each round drops at least one slot: at most as many rounds as slots.
    for _ in 0..chosen.len() {
        let (_, at) = lower_bound(&best.intervals(), ALIGN);
        let mut round: Option<(usize, Liveness, ConcatSlots)> = None;
        for trial in chosen.variants(cx.g, &best, at) {
            let (p, l, slots) = measure(trial);
            if p < round.as_ref().map_or(best_peak, |r| r.0) {
                round = Some((p, l, slots));
            }
        }
        match round {
            Some((p, l, slots)) => (best_peak, best, chosen) = (p, l, slots),
            None => break,
        }
    }
    if chosen.len() < all.len() {
        let (p, l, slots) = measure(all);
        if p < best_peak {
            (best_peak, best, chosen) = (p, l, slots);
        }
    }
    drop(best);
    d.slots = if base_peak < best_peak {
        ConcatSlots::default()
    } else {
        chosen
    };
}

/// The `conv into slice` pass ([`super::decide::PASSES`]): Convs whose output only a unary
/// activation reads, that activation's output holding a slot ([`conv_act_slot`]),
/// computed into the slice as well — the Relu then runs in place there, in the Conv's
/// epilogue, instead of as a pass of its own from the Conv's buffer (SqueezeNet's 16 expand
/// Convs). The slice's buffer then starts at the Conv, which may raise that step's live
/// bytes: all are taken when the peak does not rise, else one at a time in schedule order,
/// each kept when it does not.
pub(super) fn through_pass(cx: &Decide<'_>, d: &mut Decisions) {
    if d.slots.is_empty() {
        return;
    }
    let g = cx.g;
    let mut readers: HashMap<ValueId, (usize, NodeId)> = HashMap::new();
    for &id in cx.order {
        for &v in &g.node(id).inputs {
            let e = readers.entry(v).or_insert((0, id));
            *e = (e.0 + 1, id);
        }
    }
    let candidates: Vec<(ValueId, ValueId)> = cx
        .order
        .iter()
        .filter_map(|&id| {
            let node = g.node(id);
            let y = *node.outputs.first()?;
            let (n, r) = *readers.get(&y)?;
            (n == 1).then(|| conv_act_slot(g, node, y, r, &d.slots).map(|v| (y, v)))?
        })
        .collect();
    if candidates.is_empty() {
        return;
    }
    let base = peak(&cx.measure(d));
    d.through.extend(candidates.iter().copied());
    if peak(&cx.measure(d)) <= base {
        return;
    }
    d.through.clear();
    for (y, v) in candidates {
        d.through.insert(y, v);
        if peak(&cx.measure(d)) > base {
            d.through.remove(&y);
        }
    }
}

/// The Concat input `v` whose slice a Conv's output `y` is computed into as well: `y` is read
/// only by `reader`, a unary activation (or a fused element-wise program of `y` alone) whose
/// output `v` has a slot and `y`'s size, so the Conv writes the slice and the activation
/// runs there in place — in the Conv's epilogue (`codegen::lower::epilogue`): SqueezeNet's
/// expand convs and their Relus, which otherwise ran apart (the Relu from the conv's
/// buffer into the slice).
fn conv_act_slot(
    g: &Graph,
    node: &crate::ir::graph::Node,
    y: ValueId,
    reader: NodeId,
    slots: &ConcatSlots,
) -> Option<ValueId> {
    if !matches!(node.op, Op::Conv(_)) || node.outputs.len() != 1 || g.outputs.contains(&y) {
        return None;
    }
    let r = g.node(reader);
    let act = matches!(r.op, Op::Unary(_) | Op::FusedElementwise(_));
    let v = *r.outputs.first()?;
    let (ty, vt) = (&g.value(y).ty, &g.value(v).ty);
    let same = ty.dtype == vt.dtype && ty.bytes().is_some() && ty.bytes() == vt.bytes();
    (act && r.inputs[..] == [y] && r.outputs.len() == 1 && same && slots.get(v).is_some())
        .then_some(v)
}
