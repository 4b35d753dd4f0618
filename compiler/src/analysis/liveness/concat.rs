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

use std::collections::HashMap;

use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ops::Op;

/// Slots of the in-place Concat inputs over one schedule.
#[derive(Debug, Default)]
pub(super) struct ConcatSlots {
    /// Concat input → (the Concat's output, byte offset of the input's slice in it).
    slot: HashMap<ValueId, (ValueId, usize)>,
}

impl ConcatSlots {
    /// Finds the slots for `g` run in `order`; `views` says whether view ops alias their
    /// input (their outputs are then never slots).
    pub(super) fn find(g: &Graph, order: &[NodeId], views: bool) -> ConcatSlots {
        let mut slot = HashMap::new();
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
            for &v in &node.inputs {
                let val = g.value(v);
                let len = val.ty.shape.get(axis).copied().unwrap_or(0);
                let offset = at.saturating_mul(row);
                at = at.saturating_add(len);
                let producer = match val.kind {
                    ValueKind::Computed(p) => g.node(p),
                    _ => continue,
                };
                let eligible = !(views && producer.op.is_view())
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
                }
            }
        }
        ConcatSlots { slot }
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
