//! The memory decisions over one schedule, as passes: each pass proposes changes to
//! [`Decisions`] and judges them with one measure, [`Decide::measure`] (the buffers those
//! decisions give, [`super::build`]); the order is [`PASSES`], top to bottom.
//!
//! | pass | decides | measured by |
//! |---|---|---|
//! | `scratch` | each node's workspace bytes; an im2col Conv's at its smallest tile | — |
//! | `shrinking in-place` | which poolings write their smaller output over their input | the peak, one node at a time in schedule order |
//! | `in-place concat` | which Concat inputs are computed into their slice (`concat.rs`) | the peak of the chooser's set, its variants, every slot, none |
//! | `conv into slice` | which Convs whose Relu (any unary activation) has a slot are computed into that slice too, the activation in place there (in the Conv's epilogue) | the peak, all at once, else one Conv at a time in schedule order |
//! | `conv tiles` | each im2col Conv's tile: the largest that keeps the peak (`tiles.rs`) | the step's live bytes against the peak |
//! | `winograd` | which 3x3 stride-1 Convs run Winograd F(4x4,3x3): those whose scratch keeps the peak (`winograd.rs`) | the step's live bytes against the peak |
//!
//! A pass sees the decisions of the passes before it; the first four aim at the lowest peak
//! with every im2col panel at its smallest, the last two give the speed back where the peak
//! allows. A pass is skipped when its [`LivenessOptions`] flag is off.

use std::collections::{HashMap, HashSet};

use super::concat::ConcatSlots;
use super::{Liveness, LivenessOptions, build, shrinking_in_place, tiles};
use crate::ir::graph::{Graph, NodeId, ValueId};
use crate::plan::offsets::{fits_for_decisions, place_for_decisions};
use crate::plan::{ALIGN, align_up, lower_bound};

/// What the passes decided; [`Decide::measure`] turns it into buffers.
#[derive(Debug, Default)]
pub(super) struct Decisions {
    /// Scratch bytes of each step (empty: none).
    pub(super) scratch: Vec<usize>,
    /// Nodes writing a smaller output over their input.
    pub(super) shrink: HashSet<NodeId>,
    /// The in-place Concat slots.
    pub(super) slots: ConcatSlots,
    /// Conv outputs computed into their activation's Concat slice: Conv output → the
    /// activation output holding the slot.
    pub(super) through: HashMap<ValueId, ValueId>,
}

/// A graph, a schedule and the options: what every pass reads.
pub(super) struct Decide<'g> {
    pub(super) g: &'g Graph,
    pub(super) order: &'g [NodeId],
    pub(super) opts: LivenessOptions,
}

impl Decide<'_> {
    /// The buffers `d` gives.
    pub(super) fn measure(&self, d: &Decisions) -> Liveness {
        build(
            self.g, self.order, self.opts, &d.slots, &d.shrink, &d.scratch, &d.through,
        )
    }

    /// The arena the buffers of `d` place in (offsets assigned, not only the live peak), by
    /// the placer without its local search (`offsets::place_for_decisions`): the plan's
    /// final placement may come out smaller, never larger.
    pub(super) fn placed_arena(&self, d: &Decisions) -> usize {
        place_for_decisions(&self.measure(d).intervals(), ALIGN).arena_bytes
    }

    /// Whether [`Self::placed_arena`] of `d` is at most `limit` (the same answer, found
    /// sooner where it is yes: `offsets::fits_for_decisions`).
    pub(super) fn placed_within(&self, d: &Decisions, limit: usize) -> bool {
        fits_for_decisions(&self.measure(d).intervals(), ALIGN, limit)
    }
}

/// `bytes` rounded up to [`ALIGN`], as the per-step sums of [`step_bytes`] count it.
pub(super) fn aligned(bytes: usize) -> i128 {
    align_up(bytes, ALIGN).unwrap_or(usize::MAX) as i128
}

/// The aligned live bytes at each step of `l` (one entry per step, and one past the end)
/// and their peak: what the scratch-growing passes hold a step's growth against.
pub(super) fn step_bytes(l: &Liveness) -> (Vec<i128>, i128) {
    let n = l.order.len();
    let mut total = vec![0i128; n + 1];
    for b in &l.buffers {
        let (s, e) = (b.interval.start.min(n), b.interval.end.min(n));
        for t in total.iter_mut().take(e).skip(s) {
            *t += aligned(b.interval.size);
        }
    }
    let peak = total.iter().copied().max().unwrap_or(0);
    (total, peak)
}

/// The peak of aligned live bytes of `l`'s buffers.
pub(super) fn peak(l: &Liveness) -> usize {
    lower_bound(&l.intervals(), ALIGN).0
}

/// One memory decision.
pub struct Pass {
    /// Its name (module doc table).
    pub name: &'static str,
    /// Whether it runs under these options.
    enabled: fn(&LivenessOptions) -> bool,
    /// Proposes and measures; leaves its choice in the decisions.
    run: fn(&Decide<'_>, &mut Decisions),
}

fn scratch_on(o: &LivenessOptions) -> bool {
    o.scratch
}

fn in_place_on(o: &LivenessOptions) -> bool {
    o.in_place
}

fn concat_on(o: &LivenessOptions) -> bool {
    o.concat_in_place
}

fn winograd_on(o: &LivenessOptions) -> bool {
    o.scratch && o.winograd
}

/// The memory decisions, in the order they run.
pub const PASSES: &[Pass] = &[
    Pass {
        name: "scratch",
        enabled: scratch_on,
        run: tiles::smallest,
    },
    Pass {
        name: "shrinking in-place",
        enabled: in_place_on,
        run: shrink_pass,
    },
    Pass {
        name: "in-place concat",
        enabled: concat_on,
        run: super::concat::choose_pass,
    },
    Pass {
        name: "conv into slice",
        enabled: concat_on,
        run: super::concat::through_pass,
    },
    Pass {
        name: "conv tiles",
        enabled: scratch_on,
        run: tiles::relax,
    },
    Pass {
        name: "winograd",
        enabled: winograd_on,
        run: super::winograd::choose,
    },
];

/// Runs `passes` (those `opts` enables) in order, then measures their decisions once.
pub(super) fn run(g: &Graph, order: &[NodeId], opts: LivenessOptions, passes: &[Pass]) -> Liveness {
    let refs: Vec<&Pass> = passes.iter().collect();
    run_refs(g, order, opts, &refs)
}

/// [`run`] over a selection of passes.
pub(super) fn run_refs(
    g: &Graph,
    order: &[NodeId],
    opts: LivenessOptions,
    passes: &[&Pass],
) -> Liveness {
    let cx = Decide { g, order, opts };
    let mut d = Decisions::default();
    for p in passes {
        if (p.enabled)(&opts) {
            (p.run)(&cx, &mut d);
        }
    }
    cx.measure(&d)
}

/// Shrinking in-place writes (a pooling's smaller output over its dead input), one at a
/// time in schedule order, each kept only when it lowers the peak: the output keeps the
/// input's whole buffer until its own last read, which is not always a gain.
fn shrink_pass(cx: &Decide<'_>, d: &mut Decisions) {
    let mut base = peak(&cx.measure(d));
    for &id in cx.order {
        let node = cx.g.node(id);
        let (Some(&x), Some(&y)) = (node.inputs.first(), node.outputs.first()) else {
            continue;
        };
        if !shrinking_in_place(&node.op, &cx.g.value(x).ty, &cx.g.value(y).ty) {
            continue;
        }
        d.shrink.insert(id);
        let trial = cx.measure(d);
        let p = peak(&trial);
        if trial.alias_of.contains_key(&y) && p < base {
            base = p;
        } else {
            d.shrink.remove(&id);
        }
    }
}
