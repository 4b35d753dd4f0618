//! The search behind [`super::schedule`]: an incremental model of live bytes over a partial
//! order, a greedy list scheduler and a bounded beam search over it.

use std::collections::HashSet;
use std::time::Instant;

use smallvec::SmallVec;

use crate::analysis::liveness::{in_place_compatible, is_constant, node_scratch};
use crate::ir::graph::{Graph, NodeId, ValueKind};
use crate::plan::{ALIGN, align_up};

/// Work budget of the beam search, in state words copied (deterministic, not wall time).
const BEAM_WORK: usize = 60_000_000;
/// Widest beam.
const MAX_WIDTH: usize = 16;
/// Marks a value without a root yet.
const NONE: u32 = u32::MAX;

/// The graph reduced to what the search needs; nodes are numbered in file order and the
/// non-constant values densely.
pub(super) struct Model {
    ids: Vec<NodeId>,
    /// Distinct non-constant input values of each node.
    ins: Vec<SmallVec<[u32; 4]>>,
    /// Outputs of each node.
    outs: Vec<SmallVec<[u32; 2]>>,
    /// For a view node reading a non-constant value, that value.
    view_of: Vec<Option<u32>>,
    /// Inputs an elementwise node could write its output over (static part), in input order.
    in_place: Vec<SmallVec<[u32; 2]>>,
    /// Aligned scratch bytes per node.
    scratch: Vec<u64>,
    /// Distinct consumer nodes per value.
    consumers: Vec<SmallVec<[u32; 2]>>,
    /// Aligned bytes per value.
    size: Vec<u64>,
    /// Graph output flag per value.
    is_out: Vec<bool>,
    /// Graph input flag per value.
    is_input: Vec<bool>,
    /// Computed inputs per node (distinct values produced by nodes).
    indeg: Vec<u32>,
}

/// A partial order and the live bytes after it.
#[derive(Clone)]
struct State {
    indeg: Vec<u32>,
    /// Nodes ready to run, ascending.
    ready: Vec<u32>,
    /// Root value of the buffer holding each value.
    root: Vec<u32>,
    /// Reads still to come of values in each root's buffer.
    rem: Vec<u32>,
    /// The root's buffer holds a graph output.
    pinned: Vec<bool>,
    live: u64,
    peak: u64,
    order: Vec<u32>,
    hash: u64,
}

/// What running one node does to a state.
struct Effect {
    target: Option<u32>,
    step_peak: u64,
    live_after: u64,
}

fn aligned(n: usize) -> u64 {
    align_up(n, ALIGN).unwrap_or(usize::MAX) as u64
}

fn zobrist(u: u32) -> u64 {
    let mut z = u64::from(u).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Model {
    /// Builds the model of `g`.
    pub(super) fn new(g: &Graph) -> Model {
        let ids = g.order().to_vec();
        let mut dense = vec![NONE; g.values().len()];
        let mut size = Vec::new();
        let mut is_input = Vec::new();
        for (i, v) in g.value_ids().enumerate() {
            if is_constant(g, v) {
                continue;
            }
            dense[i] = size.len() as u32;
            size.push(aligned(g.value(v).ty.bytes().unwrap_or(0)));
            is_input.push(g.value(v).kind == ValueKind::Input);
        }
        let nv = size.len();
        let mut is_out = vec![false; nv];
        for &v in &g.outputs {
            if let Some(&d) = dense.get(v.index()).filter(|&&d| d != NONE) {
                is_out[d as usize] = true;
            }
        }
        let dense_of = |v: crate::ir::graph::ValueId| dense.get(v.index()).copied();
        let mut m = Model {
            ins: Vec::with_capacity(ids.len()),
            outs: Vec::with_capacity(ids.len()),
            view_of: Vec::with_capacity(ids.len()),
            in_place: Vec::with_capacity(ids.len()),
            scratch: Vec::with_capacity(ids.len()),
            consumers: vec![SmallVec::new(); nv],
            indeg: Vec::with_capacity(ids.len()),
            size,
            is_out,
            is_input,
            ids,
        };
        for (u, &id) in m.ids.iter().enumerate() {
            let node = g.node(id);
            let mut ins: SmallVec<[u32; 4]> = SmallVec::new();
            for &v in &node.inputs {
                if let Some(d) = dense_of(v).filter(|&d| d != NONE)
                    && !ins.contains(&d)
                {
                    ins.push(d);
                }
            }
            let outs: SmallVec<[u32; 2]> = node
                .outputs
                .iter()
                .filter_map(|&v| dense_of(v).filter(|&d| d != NONE))
                .collect();
            let first = node.inputs.first().copied();
            let view_of = first
                .filter(|_| node.op.is_view())
                .and_then(dense_of)
                .filter(|&d| d != NONE);
            let mut in_place = SmallVec::new();
            if let Some(&o) = node.outputs.first() {
                for &v in &node.inputs {
                    let ok = in_place_compatible(&node.op, &g.value(v).ty, &g.value(o).ty);
                    if let Some(d) = dense_of(v).filter(|&d| d != NONE && ok)
                        && !in_place.contains(&d)
                    {
                        in_place.push(d);
                    }
                }
            }
            for &d in &ins {
                m.consumers[d as usize].push(u as u32);
            }
            let indeg = ins.iter().filter(|&&d| !m.is_input[d as usize]).count() as u32;
            m.indeg.push(indeg);
            m.ins.push(ins);
            m.outs.push(outs);
            m.view_of.push(view_of);
            m.in_place.push(in_place);
            // The order does not depend on the thread count: one thread's scratch.
            m.scratch.push(aligned(node_scratch(g, id, 1)));
        }
        m
    }

    /// The node numbered `i`.
    pub(super) fn node_id(&self, i: u32) -> Option<NodeId> {
        self.ids.get(i as usize).copied()
    }

    fn cons(&self, v: u32) -> u32 {
        self.consumers[v as usize].len() as u32
    }

    fn init(&self) -> State {
        let nv = self.size.len();
        let mut s = State {
            indeg: self.indeg.clone(),
            ready: (0..self.ids.len() as u32)
                .filter(|&u| self.indeg[u as usize] == 0)
                .collect(),
            root: vec![NONE; nv],
            rem: vec![0; nv],
            pinned: vec![false; nv],
            live: 0,
            peak: 0,
            order: Vec::with_capacity(self.ids.len()),
            hash: 0,
        };
        for v in 0..nv as u32 {
            if self.is_input[v as usize] {
                let i = v as usize;
                s.root[i] = v;
                s.rem[i] = self.cons(v);
                s.pinned[i] = self.is_out[i];
                if s.rem[i] > 0 || s.pinned[i] {
                    s.live += self.size[i];
                }
            }
        }
        s
    }

    fn effect(&self, s: &State, u: u32) -> Effect {
        let ui = u as usize;
        let mut dec: SmallVec<[(u32, u32); 4]> = SmallVec::new();
        for &w in &self.ins[ui] {
            let r = s.root[w as usize];
            match dec.iter_mut().find(|(x, _)| *x == r) {
                Some((_, c)) => *c += 1,
                None => dec.push((r, 1)),
            }
        }
        let dec_of = |r: u32| dec.iter().find(|(x, _)| *x == r).map_or(0, |&(_, c)| c);
        let target = match self.view_of[ui] {
            Some(w) => Some(s.root[w as usize]),
            None => self.in_place[ui].iter().find_map(|&w| {
                let r = s.root[w as usize];
                let ri = r as usize;
                let ok = !self.is_input[ri]
                    && !s.pinned[ri]
                    && s.rem[ri] == dec_of(r)
                    && self.ins[ui]
                        .iter()
                        .all(|&x| x == w || s.root[x as usize] != r);
                ok.then_some(r)
            }),
        };
        let out0 = self.outs[ui].first().copied();
        let mut alloc = 0u64;
        let mut freed = 0u64;
        for (k, &o) in self.outs[ui].iter().enumerate() {
            if k == 0 && target.is_some() {
                continue;
            }
            alloc += self.size[o as usize];
            if self.cons(o) == 0 && !self.is_out[o as usize] {
                freed += self.size[o as usize];
            }
        }
        for &(r, c) in &dec {
            let ri = r as usize;
            let (mut remaining, mut pinned) = (s.rem[ri].saturating_sub(c), s.pinned[ri]);
            if let (Some(t), Some(o)) = (target, out0)
                && t == r
            {
                remaining += self.cons(o);
                pinned |= self.is_out[o as usize];
            }
            if remaining == 0 && !pinned {
                freed += self.size[ri];
            }
        }
        let step_peak = s.live + alloc + self.scratch[ui];
        Effect {
            target,
            step_peak,
            live_after: (s.live + alloc).saturating_sub(freed),
        }
    }

    fn apply(&self, s: &mut State, u: u32, e: &Effect) {
        let ui = u as usize;
        for (k, &o) in self.outs[ui].iter().enumerate() {
            let oi = o as usize;
            match e.target.filter(|_| k == 0) {
                Some(r) => {
                    s.root[oi] = r;
                    s.rem[r as usize] += self.cons(o);
                    s.pinned[r as usize] |= self.is_out[oi];
                }
                None => {
                    s.root[oi] = o;
                    s.rem[oi] = self.cons(o);
                    s.pinned[oi] = self.is_out[oi];
                }
            }
        }
        for &w in &self.ins[ui] {
            let r = s.root[w as usize] as usize;
            s.rem[r] = s.rem[r].saturating_sub(1);
        }
        s.live = e.live_after;
        s.peak = s.peak.max(e.step_peak);
        s.order.push(u);
        s.hash ^= zobrist(u);
        if let Ok(p) = s.ready.binary_search(&u) {
            s.ready.remove(p);
        }
        for &o in &self.outs[ui] {
            for &c in &self.consumers[o as usize] {
                let d = &mut s.indeg[c as usize];
                *d = d.saturating_sub(1);
                if *d == 0
                    && let Err(p) = s.ready.binary_search(&c)
                {
                    s.ready.insert(p, c);
                }
            }
        }
    }

    /// One greedy run, always picking the ready node with the smallest key.
    fn greedy(&self, key: fn(&State, &Effect) -> (u64, u64)) -> Option<Vec<u32>> {
        let mut s = self.init();
        while !s.ready.is_empty() {
            let (_, u, e) = s
                .ready
                .iter()
                .map(|&u| {
                    let e = self.effect(&s, u);
                    (key(&s, &e), u, e)
                })
                .min_by_key(|(k, u, _)| (*k, *u))?;
            self.apply(&mut s, u, &e);
        }
        (s.order.len() == self.ids.len()).then_some(s.order)
    }

    /// Beam search keyed on (peak so far, live after); `None` when over budget or deadline.
    fn beam(&self, width: usize, deadline: Instant) -> Option<Vec<u32>> {
        let words = 2 * self.ids.len() + 3 * self.size.len() + 8;
        let mut beams = vec![self.init()];
        let mut work = 0usize;
        for depth in 0..self.ids.len() {
            let mut kids: Vec<((u64, u64), usize, u32)> = Vec::new();
            for (p, s) in beams.iter().enumerate() {
                for &u in &s.ready {
                    let e = self.effect(s, u);
                    kids.push(((s.peak.max(e.step_peak), e.live_after), p, u));
                }
            }
            kids.sort_unstable();
            let mut seen = HashSet::new();
            let chosen: Vec<(usize, u32)> = kids
                .iter()
                .filter(|(_, p, u)| seen.insert(beams[*p].hash ^ zobrist(*u)))
                .take(width)
                .map(|&(_, p, u)| (p, u))
                .collect();
            let mut left = vec![0usize; beams.len()];
            for &(p, _) in &chosen {
                left[p] += 1;
            }
            let mut parents: Vec<Option<State>> = beams.into_iter().map(Some).collect();
            let mut next = Vec::with_capacity(chosen.len());
            for (p, u) in chosen {
                left[p] -= 1;
                let mut s = if left[p] == 0 {
                    parents[p].take()?
                } else {
                    work += words;
                    parents[p].clone()?
                };
                let e = self.effect(&s, u);
                self.apply(&mut s, u, &e);
                next.push(s);
            }
            work += kids.len();
            if next.is_empty() || work > BEAM_WORK || (depth % 32 == 0 && Instant::now() > deadline)
            {
                return None;
            }
            beams = next;
        }
        let best = beams.into_iter().min_by_key(|s| s.peak)?;
        (best.order.len() == self.ids.len()).then_some(best.order)
    }

    /// Candidate orders (node numbers), best guesses first.
    pub(super) fn candidates(&self, deadline: Instant) -> Vec<Vec<u32>> {
        let mut out = Vec::new();
        out.extend(self.greedy(|_, e| (e.live_after, e.step_peak)));
        out.extend(self.greedy(|s, e| (s.peak.max(e.step_peak), e.live_after)));
        let words = 2 * self.ids.len() + 3 * self.size.len() + 8;
        let width = (BEAM_WORK / self.ids.len().max(1).saturating_mul(words).max(1)).min(MAX_WIDTH);
        if width >= 2 {
            out.extend(self.beam(width, deadline));
        }
        out
    }
}
