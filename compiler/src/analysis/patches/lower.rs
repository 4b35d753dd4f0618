//! Patch-based execution, the lowering half: a graph rewrite that runs a stage found by
//! [`super::analyze`] patch by patch.
//!
//! For every patch (cell `(i, j)` of the `grid x grid` cuts of each value leaving the stage,
//! [`super::cells`]), in row-major order, the stage's nodes are emitted again on windows
//! ([`super::windows_of`]: the union of what the cells read):
//! - a value read from outside the stage (a graph input) is cut to its window by a `Slice`;
//! - a Conv or pooling reads its input window (cut by a `Slice` when a wider window of it
//!   was computed for another reader) with its pads recomputed per side: the part of the
//!   window outside the image is padding, as in the whole node, the rest comes from the
//!   neighbouring patch's rows (the halo, recomputed); a MaxPool's `ceil_mode` turns into
//!   explicit end pads;
//! - an element-wise node reads every input at its own output's window;
//! - the cell of each leaving value (cut by a `Slice` when a stage node read a wider window
//!   of it) is written into its window of the whole value by a [`Op::PatchWrite`], each one
//!   over the previous of that value (the planner's in-place rule puts the chain in one
//!   buffer).
//!
//! The nodes after the stage are copied unchanged, reading the last `PatchWrite` of each
//! leaving value, which carries that value's name. Nodes are added patch by patch, so the file order of the
//! new graph runs each patch's stage to the end before the next patch starts: the schedule
//! is never worse than that order ([`crate::analysis::schedule`]).
//!
//! Every output element of a patched node is computed from the same inputs and weights as in
//! the whole node; only which kernel path a smaller shape takes may change the summation order
//! (tests compare within 1e-6 relative and count exact matches).

use std::collections::{HashMap, HashSet};

use super::cached;
use super::passes::{self, Pass};
use super::window::{channel_split, transposed_attrs};
use super::{Cut, Local, PatchPlan, Window, cells, rule, windows_cut};
use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::{BinaryOp, Op, SliceAxis, VariadicOp};

/// The graph `g` (run in `order`) with `plan`'s stage run patch by patch, or `None` when the
/// stage holds something this rewrite cannot express (then the graph is left unpatched).
pub fn rewrite(g: &Graph, order: &[NodeId], plan: &PatchPlan) -> Option<Graph> {
    rewrite_as_planned(g, order, plan).or_else(|| {
        // Cached halos need monotone windows: else recompute them.
        plan.cached.then(|| {
            let recompute = PatchPlan {
                cached: false,
                ..plan.clone()
            };
            rewrite_as_planned(g, order, &recompute)
        })?
    })
}

/// [`rewrite`] without the fallback: `None` also when a cached plan ([`PatchPlan::cached`])
/// meets windows whose rows do not move down monotonically.
pub fn rewrite_as_planned(g: &Graph, order: &[NodeId], plan: &PatchPlan) -> Option<Graph> {
    let (order_all, before) = (order, order.get(..plan.start)?);
    let a = plan.start;
    let stage = order.get(a..plan.nodes)?;
    // The stage's windows are found on the schedule from its first node.
    let (order, n) = (order.get(a..)?, plan.nodes - a);
    let out = plan.output;
    let made: HashSet<ValueId> = stage
        .iter()
        .flat_map(|&id| g.node(id).outputs.iter().copied())
        .collect();
    let mut b = Rewrite {
        g,
        ng: Graph::new(g.name.clone(), g.opset),
        map: HashMap::new(),
        names: g.values().iter().map(|v| v.name.clone()).collect(),
    };
    for v in g.value_ids() {
        let val = g.value(v);
        if !matches!(val.kind, ValueKind::Computed(_)) {
            let id =
                b.ng.add_value(val.name.clone(), val.ty.clone(), val.kind.clone());
            b.map.insert(v, id);
        }
    }
    let (p, q_cols) = (plan.grid, plan.columns);
    if p == 0 || q_cols == 0 {
        return None;
    }
    let leaving: Vec<ValueId> = std::iter::once(out)
        .chain(plan.leaving.iter().copied())
        .collect();
    let global = passes::globals(g, order_all);
    let one = [Pass {
        pool: None,
        read: None,
        write: None,
    }];
    let plan_passes: &[Pass] = if plan.passes.is_empty() {
        &one
    } else {
        &plan.passes
    };
    let many = plan_passes.len() > 1;
    let mut acc: Vec<Option<ValueId>> = vec![None; leaving.len()];
    // A later segment: the nodes before it, unchanged.
    for &id in before {
        b.copy(id)?;
    }
    for (q, pass) in plan_passes.iter().enumerate() {
        let t = passes::targets(g, pass, &leaving);
        let first = *t.first()?;
        let cut = Cut {
            global: global.clone(),
            stop: pass.read.into_iter().collect(),
        };
        let mut partials = Vec::new();
        let mut ckpt: Option<ValueId> = None;
        if plan.cached && !many {
            cached::run(
                &mut b,
                order,
                n,
                stage,
                &made,
                &t,
                (p, q_cols),
                &cut,
                &mut acc,
            )?;
        }
        for i in (0..p).filter(|_| !plan.cached || many) {
            let rows = cells(g, first, &t[1..], p, 0, i);
            for j in 0..q_cols {
                let cols = cells(g, first, &t[1..], q_cols, 1, j);
                if rows.len() != t.len() || cols.len() != t.len() {
                    return None;
                }
                let seeds: Vec<(ValueId, Window)> = rows
                    .iter()
                    .zip(&cols)
                    .map(|((v, r), (_, c))| {
                        (
                            *v,
                            Window {
                                rows: r.clone(),
                                cols: c.clone(),
                            },
                        )
                    })
                    .collect();
                let win = windows_cut(g, order, n, &seeds, &cut);
                let mut patch = Patch {
                    tag: if many {
                        format!("q{q}p{i}x{j}")
                    } else {
                        format!("p{i}x{j}")
                    },
                    values: HashMap::new(),
                    slices: HashMap::new(),
                    stop: cut.stop.clone(),
                    global: &cut.global,
                    tail: HashMap::new(),
                    next_tail: HashMap::new(),
                    keep: HashMap::new(),
                };
                for &id in stage {
                    b.node_on_patch(id, &win, &made, &mut patch)?;
                }
                let k = i * q_cols + j + 1;
                for (idx, (v, want)) in seeds.iter().enumerate() {
                    // The cell of this value (cropped when a wider window of it was computed
                    // for a stage node reading it).
                    let pv = b.window_of(*v, want, &made, &mut patch)?;
                    let vname = g.value(*v).name.clone();
                    let full = &g.value(*v).ty.shape;
                    let op = Op::PatchWrite {
                        at: [want.rows.start, want.cols.start],
                        full: [*full.get(2)?, *full.get(3)?],
                    };
                    if pass.pool.is_some() && idx == 0 {
                        // A pooled map: its cell averaged per channel (the pooling kernel, ten
                        // times a ReduceSum's speed here), weighted by the cell's share of
                        // the plane.
                        let name = b.fresh(&format!("{vname}@{}@mean", patch.tag));
                        let mean = b.add(name.clone(), Op::GlobalAveragePool, &[pv], name)?;
                        let share = (want.rows.len() * want.cols.len()) as f64
                            / (*full.get(2)? * *full.get(3)?).max(1) as f64;
                        let c = b.scalar(&format!("{vname}@{}@share", patch.tag), *v, share);
                        let name = b.fresh(&format!("{vname}@{}@part", patch.tag));
                        let op = Op::Binary(BinaryOp::Mul);
                        partials.push(b.add(name.clone(), op, &[mean, c], name)?);
                    } else if pass.write == Some(*v) && idx + 1 == seeds.len() {
                        // The checkpoint, written whole for the next pass.
                        let name = b.fresh(&format!("{vname}@ckpt{q}@acc{k}"));
                        let ins: Vec<ValueId> = ckpt.iter().copied().chain([pv]).collect();
                        let node = b.fresh(&format!("{vname}@ckpt{q}@write{k}"));
                        ckpt = Some(b.add(node, op, &ins, name)?);
                    } else {
                        // A leaving value: its cell into its window of the whole value.
                        let slot = acc.get_mut(idx)?;
                        let name = if k == p * q_cols {
                            vname.clone()
                        } else {
                            b.fresh(&format!("{vname}@acc{k}"))
                        };
                        let ins: Vec<ValueId> = slot.iter().copied().chain([pv]).collect();
                        *slot = Some(b.add(format!("{vname}@write{k}"), op, &ins, name)?);
                    }
                }
            }
        }
        if let Some(pool) = pass.pool {
            // The pooled value: the cells' weighted means added.
            let y = *g.node(pool).outputs.first()?;
            let yname = g.value(y).name.clone();
            let node = g.node(pool).name.clone();
            let pooled = b.add(node, Op::Variadic(VariadicOp::Sum), &partials, yname)?;
            b.map.insert(y, pooled);
        }
        if let (Some(w), Some(c)) = (pass.write, ckpt) {
            b.map.insert(w, c);
        }
        // The nodes computed from pooled values alone, once, whole, as soon as they can run.
        for &id in stage {
            let node = g.node(id);
            let ready = !matches!(node.op, Op::GlobalAveragePool)
                && node
                    .outputs
                    .iter()
                    .all(|v| global.contains(v) && !b.map.contains_key(v))
                && node.inputs.iter().all(|v| b.map.contains_key(v));
            if ready {
                b.copy(id)?;
            }
        }
    }
    for (v, a) in leaving.iter().zip(acc) {
        b.map.insert(*v, a?);
    }
    for &id in order.get(n..)? {
        b.copy(id)?;
    }
    b.ng.inputs = g
        .inputs
        .iter()
        .map(|v| b.map.get(v).copied())
        .collect::<Option<_>>()?;
    b.ng.outputs = g
        .outputs
        .iter()
        .map(|v| b.map.get(v).copied())
        .collect::<Option<_>>()?;
    Some(b.ng)
}

/// The new graph being built.
pub(super) struct Rewrite<'a> {
    pub(super) g: &'a Graph,
    pub(super) ng: Graph,
    /// Old values outside the stage (and the stage output, at the end) to new ones.
    pub(super) map: HashMap<ValueId, ValueId>,
    names: HashSet<String>,
}

/// One patch's values.
pub(super) struct Patch<'a> {
    /// Values an earlier pass wrote whole: read from there, not recomputed.
    pub(super) stop: HashSet<ValueId>,
    /// Values computed once, whole (pooled values and what is made from them alone).
    pub(super) global: &'a HashSet<ValueId>,
    /// Suffix of its node and value names.
    pub(super) tag: String,
    /// Old stage value → its new value on this patch and the window it holds.
    pub(super) values: HashMap<ValueId, (ValueId, Window)>,
    /// `(old value, window)` → a Slice already made.
    pub(super) slices: HashMap<(ValueId, [usize; 4]), ValueId>,
    /// Cached halos: each stage value's cache the patches above kept (its new value and
    /// window), read where a window starts above the value's new rows.
    pub(super) tail: HashMap<ValueId, (ValueId, Window)>,
    /// Cached halos: the caches this patch keeps for the patch below, each cut right after
    /// its value's new rows are made.
    pub(super) next_tail: HashMap<ValueId, (ValueId, Window)>,
    /// Cached halos: the window of each stage value this patch keeps ([`Self::next_tail`]).
    pub(super) keep: HashMap<ValueId, Window>,
}

impl Rewrite<'_> {
    /// A new scalar constant `x` of value `like`'s element type.
    fn scalar(&mut self, base: &str, like: ValueId, x: f64) -> ValueId {
        let dtype = self.g.value(like).ty.dtype;
        let name = self.fresh(base);
        self.ng.add_value(
            name,
            TensorType::new(dtype, vec![]),
            ValueKind::Constant(Tensor::from_f64(dtype, vec![], &[x])),
        )
    }

    /// Copies node `id` unchanged, reading the new values of its inputs.
    fn copy(&mut self, id: NodeId) -> Option<()> {
        let g = self.g;
        let node = g.node(id);
        let ins: Vec<ValueId> = node
            .inputs
            .iter()
            .map(|v| self.map.get(v).copied())
            .collect::<Option<_>>()?;
        let outs: Vec<(String, TensorType)> = node
            .outputs
            .iter()
            .map(|&v| (g.value(v).name.clone(), g.value(v).ty.clone()))
            .collect();
        let nid = self
            .ng
            .add_node(node.name.clone(), node.op.clone(), &ins, &outs);
        for (&old, &new) in node.outputs.iter().zip(&self.ng.node(nid).outputs) {
            self.map.insert(old, new);
        }
        Some(())
    }

    pub(super) fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while self.names.contains(&name) {
            k += 1;
            name = format!("{base}#{k}");
        }
        self.names.insert(name.clone());
        name
    }

    /// Adds a one-output node whose output type is inferred; returns the output.
    pub(super) fn add(
        &mut self,
        node: String,
        op: Op,
        ins: &[ValueId],
        out: String,
    ) -> Option<ValueId> {
        let types: Vec<TensorType> = ins.iter().map(|&v| self.ng.value(v).ty.clone()).collect();
        // A node staged on 16-bit data reads f32 weights as its data's type.
        let types = crate::ir::verify::constants_as_data(&self.ng, ins, types);
        let ty = op.infer(&types).ok()?.into_iter().next()?;
        let id = self.ng.add_node(node, op, ins, &[(out, ty)]);
        self.ng.node(id).outputs.first().copied()
    }

    /// Old value `v` on `want` for this patch: its patch value, or a Slice of it (or of the
    /// whole value, for one made outside the stage); with cached halos, of the cache the
    /// patches above kept, or the cache's rows joined to the new ones by a `Concat` along
    /// the rows.
    pub(super) fn window_of(
        &mut self,
        v: ValueId,
        want: &Window,
        made: &HashSet<ValueId>,
        p: &mut Patch<'_>,
    ) -> Option<ValueId> {
        let shape = &self.g.value(v).ty.shape;
        if want.rows.is_empty() || want.cols.is_empty() {
            return None;
        }
        if !made.contains(&v) || p.stop.contains(&v) {
            let whole = Window {
                rows: 0..*shape.get(2)?,
                cols: 0..*shape.get(3)?,
            };
            let src = *self.map.get(&v)?;
            return self.cut(v, src, &whole, want, p);
        }
        let new = p.values.get(&v).cloned();
        if let Some((src, have)) = &new
            && inside(want, have)
        {
            return self.cut(v, *src, have, want, p);
        }
        let (tv, tw) = p.tail.get(&v).cloned()?;
        if inside(want, &tw) {
            return self.cut(v, tv, &tw, want, p);
        }
        // The cache's rows, then the new ones.
        let (src, have) = new?;
        let (top, bottom) = (
            Window {
                rows: want.rows.start..tw.rows.end,
                cols: want.cols.clone(),
            },
            Window {
                rows: have.rows.start..want.rows.end,
                cols: want.cols.clone(),
            },
        );
        if tw.rows.end != have.rows.start || !inside(&top, &tw) || !inside(&bottom, &have) {
            return None;
        }
        let key = key(v, want);
        if let Some(&s) = p.slices.get(&key) {
            return Some(s);
        }
        let top = self.cut(v, tv, &tw, &top, p)?;
        let bottom = self.cut(v, src, &have, &bottom, p)?;
        let base = format!("{}@{}@rows", self.g.value(v).name, p.tag);
        let name = self.fresh(&base);
        let s = self.add(name.clone(), Op::Concat { axis: 2 }, &[top, bottom], name)?;
        p.slices.insert(key, s);
        Some(s)
    }

    /// `want` of old value `v` out of `src`, its new value holding window `have` (which
    /// holds `want`): `src` itself, or a Slice (one per window and patch).
    fn cut(
        &mut self,
        v: ValueId,
        src: ValueId,
        have: &Window,
        want: &Window,
        p: &mut Patch<'_>,
    ) -> Option<ValueId> {
        if have == want {
            return Some(src);
        }
        if !inside(want, have) || want.rows.is_empty() || want.cols.is_empty() {
            return None;
        }
        let key = key(v, want);
        if let Some(&s) = p.slices.get(&key) {
            return Some(s);
        }
        let op = crop(want, have);
        let base = format!("{}@{}@crop", self.g.value(v).name, p.tag);
        let name = self.fresh(&base);
        let s = self.add(name.clone(), op, &[src], name)?;
        p.slices.insert(key, s);
        Some(s)
    }

    /// Emits stage node `id` on this patch's window of its output; with cached halos, then
    /// cuts the cache this patch keeps of it for the patch below.
    pub(super) fn node_on_patch(
        &mut self,
        id: NodeId,
        win: &HashMap<ValueId, Window>,
        made: &HashSet<ValueId>,
        p: &mut Patch<'_>,
    ) -> Option<()> {
        let ys = self.g.node(id).outputs.clone();
        let before: Vec<Option<ValueId>> =
            ys.iter().map(|y| p.values.get(y).map(|x| x.0)).collect();
        if let Some(parts) = channel_split(self.g, id) {
            self.split_on_patch(id, &parts, win, made, p)?;
        } else {
            self.node_inner(id, win, made, p)?;
        }
        for (&y, before) in ys.iter().zip(before) {
            let now = p.values.get(&y).map(|x| x.0);
            if now.is_some()
                && now != before
                && let Some(kw) = p.keep.get(&y).cloned()
            {
                let t = self.window_of(y, &kw, made, p)?;
                p.next_tail.insert(y, (t, kw));
            }
        }
        Some(())
    }

    /// Channel Split `id` (output channel ranges `parts`, [`channel_split`]) on this patch:
    /// each output with a window is one `Slice` of the input — its channels and its window,
    /// cut from the input's patch value when that holds the window (else from the input's
    /// window, [`Self::window_of`]): the same elements as the whole Split copies.
    fn split_on_patch(
        &mut self,
        id: NodeId,
        parts: &[std::ops::Range<usize>],
        win: &HashMap<ValueId, Window>,
        made: &HashSet<ValueId>,
        p: &mut Patch<'_>,
    ) -> Option<()> {
        let g = self.g;
        let node = g.node(id);
        let x = *node.inputs.first()?;
        for (&y, c) in node.outputs.iter().zip(parts) {
            let Some(wy) = win.get(&y).cloned() else {
                continue;
            };
            if p.stop.contains(&y) || p.global.contains(&y) {
                continue;
            }
            let direct = p
                .values
                .get(&x)
                .filter(|(_, have)| made.contains(&x) && !p.stop.contains(&x) && inside(&wy, have))
                .cloned();
            let (src, have) = match direct {
                Some(d) => d,
                None => (self.window_of(x, &wy, made, p)?, wy.clone()),
            };
            let Op::Slice { mut axes } = crop(&wy, &have) else {
                return None;
            };
            axes.insert(
                0,
                SliceAxis {
                    axis: 1,
                    start: i64::try_from(c.start).ok()?,
                    end: i64::try_from(c.end).ok()?,
                    step: 1,
                },
            );
            let name = self.fresh(&format!("{}@{}", g.value(y).name, p.tag));
            let out = self.add(
                format!("{}@{}", node.name, p.tag),
                Op::Slice { axes },
                &[src],
                name,
            )?;
            let expect = [
                *g.value(y).ty.shape.first()?,
                *g.value(y).ty.shape.get(1)?,
                wy.rows.len(),
                wy.cols.len(),
            ];
            if self.ng.value(out).ty.shape != expect {
                return None;
            }
            p.values.insert(y, (out, wy));
        }
        Some(())
    }

    /// Emits stage node `id` on this patch's window of its output.
    fn node_inner(
        &mut self,
        id: NodeId,
        win: &HashMap<ValueId, Window>,
        made: &HashSet<ValueId>,
        p: &mut Patch<'_>,
    ) -> Option<()> {
        let g = self.g;
        let node = g.node(id);
        let y = *node.outputs.first()?;
        let Some(wy) = win.get(&y).cloned() else {
            // Not needed by this patch of the stage output.
            return Some(());
        };
        if p.stop.contains(&y) || p.global.contains(&y) {
            // Read whole: written by an earlier pass, or computed once.
            return Some(());
        }
        let mut ins = Vec::with_capacity(node.inputs.len());
        let op = match rule(g, id)? {
            Some(l) => {
                let x = *node.inputs.first()?;
                let xs = &g.value(x).ty.shape;
                let (xh, xw) = (*xs.get(2)?, *xs.get(3)?);
                let need = Window {
                    rows: l.back(&wy.rows, 0, xh),
                    cols: l.back(&wy.cols, 1, xw),
                };
                ins.push(self.window_of(x, &need, made, p)?);
                if let Op::Resize(r) = &node.op {
                    return self.resize_on_patch(id, r, &l, &need, &wy, ins, p);
                }
                let sum = matches!(&node.op, Op::Conv(a) if a.sum);
                for (k, v) in node.inputs.iter().enumerate().skip(1) {
                    if sum && k == 3 {
                        // The fused residual, at the output's window.
                        ins.push(self.window_of(*v, &wy, made, p)?);
                    } else {
                        ins.push(self.constant(*v)?);
                    }
                }
                if let Op::ConvTranspose(a) = &node.op {
                    // Pads and output padding cut the window's input rows' outputs to `wy`.
                    Op::ConvTranspose(transposed_attrs(a, &l, &wy, &need)?)
                } else {
                    windowed(&node.op, &l, &wy, &need)?
                }
            }
            None => {
                for (k, &v) in node.inputs.iter().enumerate() {
                    if matches!(g.value(v).kind, ValueKind::Constant(_)) {
                        let per_channel = matches!(node.op, Op::BatchNormalization { .. }) && k > 0
                            || broadcast_per_channel(&g.value(v).ty);
                        if !per_channel {
                            return None;
                        }
                        ins.push(self.constant(v)?);
                    } else if p.global.contains(&v) || passes::broadcast(g, v, y) {
                        // A pooled value, broadcast per channel: whole.
                        ins.push(self.map.get(&v).copied()?);
                    } else {
                        ins.push(self.window_of(v, &wy, made, p)?);
                    }
                }
                node.op.clone()
            }
        };
        let name = self.fresh(&format!("{}@{}", g.value(y).name, p.tag));
        let out = self.add(format!("{}@{}", node.name, p.tag), op, &ins, name)?;
        let expect = [
            *g.value(y).ty.shape.first()?,
            *g.value(y).ty.shape.get(1)?,
            wy.rows.len(),
            wy.cols.len(),
        ];
        if self.ng.value(out).ty.shape != expect
            || self.ng.value(out).ty.dtype != g.value(y).ty.dtype
        {
            return None;
        }
        p.values.insert(y, (out, wy));
        Some(())
    }

    /// Nearest upsampling `id` on this patch: the input window `need` (already cut, `ins`)
    /// upsampled whole, then cut to the output window `wy` when the factor does not divide it.
    #[allow(clippy::too_many_arguments)]
    fn resize_on_patch(
        &mut self,
        id: NodeId,
        r: &crate::ops::ResizeAttrs,
        l: &Local,
        need: &Window,
        wy: &Window,
        ins: Vec<ValueId>,
        p: &mut Patch<'_>,
    ) -> Option<()> {
        let g = self.g;
        let node = g.node(id);
        let y = *node.outputs.first()?;
        let ys = &g.value(y).ty.shape;
        let got = Window {
            rows: need.rows.start * l.up[0]..need.rows.end * l.up[0],
            cols: need.cols.start * l.up[1]..need.cols.end * l.up[1],
        };
        let mut attrs = r.clone();
        attrs.output_shape = vec![*ys.first()?, *ys.get(1)?, got.rows.len(), got.cols.len()];
        let name = self.fresh(&format!("{}@{}@up", g.value(y).name, p.tag));
        let out = self.add(
            format!("{}@{}", node.name, p.tag),
            Op::Resize(attrs),
            &ins,
            name,
        )?;
        if got == *wy {
            p.values.insert(y, (out, got));
            return Some(());
        }
        if !(got.rows.start <= wy.rows.start
            && wy.rows.end <= got.rows.end
            && got.cols.start <= wy.cols.start
            && wy.cols.end <= got.cols.end)
        {
            return None;
        }
        let op = crop(wy, &got);
        let name = self.fresh(&format!("{}@{}", g.value(y).name, p.tag));
        let cut = self.add(name.clone(), op, &[out], name)?;
        p.values.insert(y, (cut, wy.clone()));
        Some(())
    }

    /// A constant operand (weights, bias): the same value in the new graph.
    fn constant(&self, v: ValueId) -> Option<ValueId> {
        matches!(self.g.value(v).kind, ValueKind::Constant(_))
            .then(|| self.map.get(&v).copied())
            .flatten()
    }
}

/// Whether window `a` lies within `b`.
fn inside(a: &Window, b: &Window) -> bool {
    b.rows.start <= a.rows.start
        && a.rows.end <= b.rows.end
        && b.cols.start <= a.cols.start
        && a.cols.end <= b.cols.end
}

/// A window of a value, as the key of the Slices a patch made.
fn key(v: ValueId, w: &Window) -> (ValueId, [usize; 4]) {
    (v, [w.rows.start, w.rows.end, w.cols.start, w.cols.end])
}

/// The `Slice` cutting window `want` out of a value computed on window `have` (which holds
/// it): rows and columns relative to `have`'s start.
fn crop(want: &Window, have: &Window) -> Op {
    let axis = |axis: usize, r: &std::ops::Range<usize>, from: usize| SliceAxis {
        axis,
        start: (r.start - from) as i64,
        end: (r.end - from) as i64,
        step: 1,
    };
    Op::Slice {
        axes: vec![
            axis(2, &want.rows, have.rows.start),
            axis(3, &want.cols, have.cols.start),
        ],
    }
}

/// Whether a constant operand of an element-wise node broadcasts the same value over every
/// pixel of a plane (a scalar, or trailing spatial dims of 1), so a window reads it whole.
fn broadcast_per_channel(t: &TensorType) -> bool {
    match t.shape.len() {
        0 => true,
        1 => t.shape[0] == 1,
        r => t.shape[r - 1] == 1 && t.shape[r - 2] == 1,
    }
}

/// A Conv's or pooling's attributes on a window: the pads of output window `wy` read from
/// input window `need`.
fn windowed(op: &Op, l: &Local, wy: &Window, need: &Window) -> Option<Op> {
    let (rt, rb) = pads(&wy.rows, &need.rows, l, 0)?;
    let (ct, cb) = pads(&wy.cols, &need.cols, l, 1)?;
    let pads = vec![rt, ct, rb, cb];
    Some(match op {
        Op::Conv(a) => Op::Conv(crate::ops::ConvAttrs { pads, ..a.clone() }),
        Op::MaxPool(a) => Op::MaxPool(crate::ops::PoolAttrs {
            pads,
            ceil_mode: false,
            ..a.clone()
        }),
        // With the padding counted, a ceil-mode window's overhang past the pads is
        // not counted, which explicit pads would count.
        Op::AveragePool(a) if !(a.ceil_mode && a.count_include_pad) => {
            Op::AveragePool(crate::ops::PoolAttrs {
                pads,
                ceil_mode: false,
                ..a.clone()
            })
        }
        _ => return None,
    })
}

/// Begin and end pads, along dim `dim` of `l`, of a node computing outputs `o` from the input
/// range `need` (clamped to the image): what of the unclamped receptive field lies outside.
fn pads(
    o: &std::ops::Range<usize>,
    need: &std::ops::Range<usize>,
    l: &Local,
    dim: usize,
) -> Option<(usize, usize)> {
    let (k, s, d, pb) = (l.k[dim], l.s[dim], l.d[dim], l.pb[dim]);
    let lo = i64::try_from(o.start * s).ok()? - i64::try_from(pb).ok()?;
    let hi = i64::try_from((o.end.checked_sub(1)?) * s + (k - 1) * d + 1).ok()?
        - i64::try_from(pb).ok()?;
    let begin = usize::try_from(i64::try_from(need.start).ok()? - lo).ok()?;
    let end = usize::try_from(hi - i64::try_from(need.end).ok()?).ok()?;
    Some((begin, end))
}
