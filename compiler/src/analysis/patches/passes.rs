//! Multi-pass stages: a stage holding global pools (the squeeze-and-excitation blocks of
//! EfficientNet: `GlobalAveragePool` → 1x1 convs → `Sigmoid` → `Mul` over the map).
//!
//! A pool needs the whole map it averages before anything that reads the pooled value can
//! run, so a stage with `m` pools runs in `m + 1` passes over the grid (MCUNetV2's answer to
//! SE, recomputing rather than storing the map):
//! - pass `q < m` computes, patch by patch, the cells of the map pool `q` reads and averages
//!   each cell per channel (never the whole map), weighted by its share of the plane; after
//!   its last patch the cells' means are added into the pooled value (another summation order
//!   than the whole pooling: within 1e-6 of the scale), and the nodes computed from pooled
//!   values alone (the SE's small convs: [`globals`]) run once, whole;
//! - the last pass computes the leaving values, as a one-pass stage does; the element-wise
//!   nodes reading a pooled value (the SE's `Mul`) read it whole, broadcast per channel.
//!
//! A later pass recomputes what an earlier one computed. To bound that, pass `q >= 1` also
//! writes whole one *checkpoint* ([`Pass::write`]), which the next pass reads instead of
//! recomputing from the stage's start: the smallest value made after the previous pool's
//! result was applied (level `q`, [`levels`]) that cuts the next pass off from everything
//! before it (typically an inverted-residual block's input, a sixth of its expanded map).
//! Pass 0 has none: everything before the first pool is as large as the map itself.

use std::collections::{HashMap, HashSet};

use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ops::Op;

/// One pass over the grid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pass {
    /// The `GlobalAveragePool` this pass ends in (its input's cells summed patch by patch);
    /// `None` for the last pass, which writes the values leaving the stage.
    pub pool: Option<NodeId>,
    /// The checkpoint the previous pass wrote whole, read here instead of recomputed.
    pub read: Option<ValueId>,
    /// The checkpoint this pass writes whole (cell by cell) for the next one.
    pub write: Option<ValueId>,
}

/// Most pools a stage may hold (passes: one more).
pub const MAX_POOLS: usize = 6;

/// Values computed once, whole: a `GlobalAveragePool`'s output and every value computed
/// from such values (and constants) alone.
pub fn globals(g: &Graph, order: &[NodeId]) -> HashSet<ValueId> {
    let mut out = HashSet::new();
    for &id in order {
        let node = g.node(id);
        let global = match node.op {
            Op::GlobalAveragePool => true,
            _ => {
                let mut arena = node
                    .inputs
                    .iter()
                    .filter(|&&v| !matches!(g.value(v).kind, ValueKind::Constant(_)))
                    .peekable();
                arena.peek().is_some() && arena.all(|v| out.contains(v))
            }
        };
        if global {
            out.extend(node.outputs.iter().copied());
        }
    }
    out
}

/// Whether `v`, read by a node making `y`, is broadcast over `y`'s plane: a 4-d value of
/// one pixel per channel read by a node making a larger plane (a pooled value's `Mul`).
pub fn broadcast(g: &Graph, v: ValueId, y: ValueId) -> bool {
    let (vs, ys) = (&g.value(v).ty.shape, &g.value(y).ty.shape);
    vs.len() == 4 && vs.get(2..4) == Some(&[1, 1][..]) && ys.get(2..4) != Some(&[1, 1][..])
}

/// The stage nodes (of `order[..n]`) that compute `targets`, the values in `stop` being
/// available whole (not recomputed) and global values computed once.
pub fn closure(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    targets: &[ValueId],
    stop: &HashSet<ValueId>,
    global: &HashSet<ValueId>,
) -> Vec<NodeId> {
    let mut need: HashSet<ValueId> = targets.iter().copied().collect();
    let mut nodes = Vec::new();
    for &id in order[..n].iter().rev() {
        let node = g.node(id);
        let Some(&y) = node.outputs.first() else {
            continue;
        };
        // Any output needed (a channel Split's are read apart).
        let wanted = |y: &ValueId| need.contains(y) && !stop.contains(y) && !global.contains(y);
        if !node.outputs.iter().any(wanted) {
            continue;
        }
        nodes.push(id);
        for &v in &node.inputs {
            if !matches!(g.value(v).kind, ValueKind::Constant(_))
                && !global.contains(&v)
                && !broadcast(g, v, y)
            {
                need.insert(v);
            }
        }
    }
    nodes.reverse();
    nodes
}

/// Per stage value: 1 + the index of the last of `pools` whose result it depends on (0: on
/// none).
fn levels(g: &Graph, order: &[NodeId], n: usize, pools: &[NodeId]) -> HashMap<ValueId, usize> {
    let mut level: HashMap<ValueId, usize> = HashMap::new();
    for &id in &order[..n] {
        let node = g.node(id);
        let l = match pools.iter().position(|&p| p == id) {
            Some(j) => j + 1,
            None => node
                .inputs
                .iter()
                .filter_map(|v| level.get(v).copied())
                .max()
                .unwrap_or(0),
        };
        for &y in &node.outputs {
            level.insert(y, l);
        }
    }
    level
}

/// What a pass computes patch by patch: the map its pool reads, or the leaving values
/// (`leaving`, the stage output first), then its checkpoint.
pub fn targets(g: &Graph, pass: &Pass, leaving: &[ValueId]) -> Vec<ValueId> {
    let mut t = match pass.pool.and_then(|p| g.node(p).inputs.first().copied()) {
        Some(x) => vec![x],
        None => leaving.to_vec(),
    };
    t.extend(pass.write);
    t
}

/// The passes of the stage `order[..n]` whose leaving values are `leaving` (the stage output
/// first); one pass when it holds no pool. `None` when a pool reads a value not made in the
/// stage as a plane, or the stage holds more than [`MAX_POOLS`].
pub fn plan(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    global: &HashSet<ValueId>,
    leaving: &[ValueId],
) -> Option<Vec<Pass>> {
    let stage = &order[..n];
    let made: HashSet<ValueId> = stage
        .iter()
        .flat_map(|&id| g.node(id).outputs.iter().copied())
        .collect();
    let pools: Vec<NodeId> = stage
        .iter()
        .copied()
        .filter(|&id| matches!(g.node(id).op, Op::GlobalAveragePool))
        .collect();
    if pools.len() > MAX_POOLS {
        return None;
    }
    for &p in &pools {
        let x = *g.node(p).inputs.first()?;
        if !made.contains(&x) || global.contains(&x) || g.value(x).ty.shape.len() != 4 {
            return None;
        }
    }
    let level = levels(g, order, n, &pools);
    let mut passes: Vec<Pass> = pools
        .iter()
        .map(|&p| Pass {
            pool: Some(p),
            read: None,
            write: None,
        })
        .chain([Pass {
            pool: None,
            read: None,
            write: None,
        }])
        .collect();
    let none = HashSet::new();
    for q in 1..pools.len() {
        let stop_q: HashSet<ValueId> = passes[q].read.into_iter().collect();
        let here = closure(
            g,
            order,
            n,
            &targets(g, &passes[q], leaving),
            &stop_q,
            global,
        );
        let next = targets(g, &passes[q + 1], leaving);
        let needed: HashSet<ValueId> = closure(g, order, n, &next, &none, global)
            .iter()
            .flat_map(|&id| g.node(id).outputs.clone())
            .collect();
        let valid = |v: ValueId| {
            let stop: HashSet<ValueId> = [v].into();
            closure(g, order, n, &next, &stop, global)
                .iter()
                .all(|&id| g.node(id).outputs.iter().all(|y| level.get(y) >= Some(&q)))
        };
        let best = here
            .iter()
            .rev()
            .filter_map(|&id| g.node(id).outputs.first().copied())
            .filter(|v| level.get(v) == Some(&q) && needed.contains(v) && !next.contains(v))
            .filter(|&v| g.value(v).ty.shape.len() == 4 && g.value(v).ty.bytes().is_some())
            .filter(|&v| valid(v))
            .min_by_key(|&v| g.value(v).ty.bytes().unwrap_or(usize::MAX));
        passes[q].write = best;
        passes[q + 1].read = best;
    }
    Some(passes)
}
