//! The choice over whole patch plans ([`plan_whole`]): a few policies (which family of
//! candidates, how much predicted peak a stage may give for time) each take stages one
//! after another, each stage planned by the real planner and kept while the arena shrinks;
//! of the complete plans whose *planned* arena is within [`WHOLE_SLACK`] of the smallest,
//! the one with the least time proxy (as a share of the model's FLOPs) plus
//! [`ARENA_WEIGHT`] times its arena (as a share of the smallest) is kept.
//!
//! Why whole plans: choosing stage by stage on predicted peaks missed better plans twice:
//! cached candidates' predicted peaks run below their planned arenas (ResNet-18: a cached 4x4
//! stage predicted lower planned 0.594 of unpatched, main's two recomputing stages 0.539),
//! and a first stage that is the best alone can leave no good second one.
//!
//! The time proxy of a complete plan ([`Whole::time_proxy`]), in FLOPs:
//! - the FLOPs its stages recompute in halos;
//! - the FLOPs of the Convs that lose Winograd, counted at [`fast::SLOW_SHARE`], taken from
//!   the planned arenas (the Convs with Winograd scratch unpatched against patched: a smaller
//!   arena can cost Convs *after* the stage Winograd too, which no prediction saw);
//! - the weights each stage streams again per patch ([`stream_flops`]);
//! - the steps the rewrite adds (a node per patch, a cached value's `Slice` and `Concat`),
//!   at [`STEP_FLOPS`] each: MobileNetV2's 6x6 cached grid (1,194 steps in its stage) ran
//!   1.33x of unpatched against 1.08x for main's 4x4 (386) the same minutes, though it
//!   recomputes less; [`choose`] weighs the proxy against the arena.

use std::collections::HashMap;

use super::{MAX_GRID, MAX_STAGES, PatchInfo, PatchPlan, RETRIES, analyze, fast, info_of, lower};
use crate::analysis::liveness::LivenessOptions;
use crate::arena::ArenaPlan;
use crate::ir::graph::{Graph, ValueKind};

/// Which candidates a policy takes at each stage.
#[derive(Clone, Copy, Debug)]
struct Policy {
    /// Only cached (`Some(true)`) or recomputing (`Some(false)`) candidates, or either.
    cached: Option<bool>,
    /// A stage's grids within this share of its lowest predicted peak rank by time proxy.
    slack: f64,
    /// Whether the recompute budget also holds the FLOPs of Convs predicted to lose
    /// Winograd ([`PatchPlan::slow_flops`]); without, it holds the recomputed FLOPs alone
    /// (the search before the prediction counted them: U-Net's recomputing 3x3 stage,
    /// 0.579 of the unpatched arena, whose loss the planned arenas then show).
    slow: bool,
    /// Whether the slack spans stages ([`super::PatchReport::ranked_across`]: the least time
    /// proxy among the candidates of any stage within `slack` of the lowest predicted peak);
    /// its complete plan is kept only when its planned arena is no larger than the smallest
    /// of the other policies' (a tie on arena goes to the smaller time proxy, never more
    /// arena).
    across: bool,
    /// Whether, of the candidates at the lowest predicted peak, the one whose stage alone
    /// needs the least (`PatchPlan::stage_bytes`) comes first: when the rest of the graph
    /// sets that peak, the next stage can only start after a stage that leaves it the peak
    /// (YOLOv8's FPN Concat held in place while the stem runs: the stem stage through its
    /// first C2f, then the neck's).
    low_stage: bool,
}

/// The policies tried: the lowest predicted peak of each family and of both (the first is
/// the recomputing search alone, the second that search with the budget on recomputed
/// FLOPs only), then both with the time proxy choosing within 12.5% of the predicted peak,
/// and cached ones alike; then the least time proxy across stages near the lowest peak, of
/// both families and of the recomputing one alone (DBNet-320: both families' across pick is
/// a cached 3x3 grid planned 1.4% above the smallest arena, so not kept, while the
/// recomputing 3x3 grid from step 37, 3.75% recomputed, plans to the 4x4 grid's arena,
/// 6.9% recomputed + 1.9% Winograd lost).
const POLICIES: [Policy; 9] = [
    Policy {
        cached: Some(false),
        slack: 0.0,
        slow: true,
        across: false,
        low_stage: false,
    },
    Policy {
        cached: Some(false),
        slack: 0.0,
        slow: false,
        across: false,
        low_stage: false,
    },
    Policy {
        cached: Some(true),
        slack: 0.0,
        slow: true,
        across: false,
        low_stage: false,
    },
    Policy {
        cached: None,
        slack: 0.0,
        slow: true,
        across: false,
        low_stage: false,
    },
    Policy {
        cached: None,
        slack: 0.125,
        slow: true,
        across: false,
        low_stage: false,
    },
    Policy {
        cached: Some(true),
        slack: 0.125,
        slow: true,
        across: false,
        low_stage: false,
    },
    Policy {
        cached: None,
        slack: 0.125,
        slow: true,
        across: true,
        low_stage: false,
    },
    Policy {
        cached: Some(false),
        slack: 0.125,
        slow: true,
        across: true,
        low_stage: false,
    },
    Policy {
        cached: None,
        slack: 0.0,
        slow: true,
        across: false,
        low_stage: true,
    },
];

/// How far above the smallest planned arena a complete plan may be and still be kept for a
/// smaller time proxy (then weighed against its arena, module docs): MobileNetV2's 28x1
/// cached strips (nothing recomputed) are 10.9% above its two-stage plan (6x6 cached, then
/// 9x1 strips: 0.217 vs 0.196 of unpatched) and ran 1.03x of unpatched against 1.20x (sums
/// of per-node median times, 2026-11-27 21:00 UTC; wall times 1.03x against 1.19x, minima of
/// 6 alternated rounds at 21:50, load 4.5); U-Net's 8x1 strips are 12.2% above its 3x3 grid
/// (0.650 vs 0.579) and ran 1.10x against 1.22x (wall, the same way). 0.13 -> 0.2 when
/// stages tied on their predicted peak began to rank by time (`PatchReport::ranked_with`):
/// U-Net then reached a two-stage plan at 0.554 of unpatched that ran 1.20x (CPU time per
/// run, 2026-11-28 09:40 UTC) and put its 8x1 strips (0.649, 1.04x) 17% above the smallest.
pub const WHOLE_SLACK: f64 = 0.2;

/// The time proxy (a share of the model's FLOPs) up to which a complete plan that only a
/// [`Policy::low_stage`] policy reached is kept: YOLOv8n-320's stem through its first C2f
/// (16 steps, 3x3 cached; proxy 1.73%: 0.909 -> 0.837 of unpatched) ran 1.07x of
/// unpatched; DBNet-320's 6x6 cached FPN stage then its stem (proxy 10.2%: 0.439) ran
/// 1.24x (1 thread, minima of 3 alternated rounds, load 5 on 2 cores, 2026-11-28 15:45 UTC).
pub const LOW_STAGE_PROXY: f64 = 0.05;

/// Bytes of weights a stage may read per patch and still find them in the cache (the L3
/// share of a core): a chain of 256 -> 256 3x3 Convs on 2 x 40 output pixels ran at 149-159
/// GFLOP/s with 4.7-9.4 MB of weights and at 73-83 with 18.9-37.7 MB (4 x 20 pixels: 98
/// against 49), each patch streaming all of them from memory again.
pub const STREAM_CACHE_BYTES: usize = 12 << 20;

/// FLOPs one byte of weights streamed from memory costs in time: the chain above lost
/// 0.67 ms per 2.36 MB Conv per patch (3.5 GB/s) at about 110 GFLOP/s.
pub const STREAM_FLOPS_PER_BYTE: u64 = 31;

/// The weights a stage of candidate `c` (on the schedule `order` of `g`) reads again on
/// each patch after the first, in FLOPs ([`STREAM_FLOPS_PER_BYTE`]), when they exceed
/// [`STREAM_CACHE_BYTES`]; 0 when they fit.
pub fn stream_flops(g: &Graph, order: &[crate::ir::graph::NodeId], c: &PatchPlan) -> u64 {
    let weights: usize = order
        .get(c.start..c.nodes)
        .unwrap_or(&[])
        .iter()
        .flat_map(|&id| g.node(id).inputs.iter())
        .filter(|&&v| matches!(g.value(v).kind, ValueKind::Constant(_)))
        .map(|&v| g.value(v).ty.bytes().unwrap_or(0))
        .sum();
    if weights <= STREAM_CACHE_BYTES {
        return 0;
    }
    let patches = (c.grid * c.columns.max(1)).saturating_sub(1) as u64;
    (weights as u64)
        .saturating_mul(patches)
        .saturating_mul(STREAM_FLOPS_PER_BYTE)
}

/// What 1% more arena is worth in time (%) when choosing among complete plans: 0.3%. At 2%,
/// MobileNetV2's strips (10.9% more arena for 17% less time) lost to its two-stage plan; at
/// 1%, U-Net's strips (12.2% more arena for 10% less time) lost to the 3x3 grid: the proxy
/// does not see that whole-row strips run their kernels in cache. 0.5 -> 0.3 with
/// [`WHOLE_SLACK`] 0.2: U-Net's two-stage plan (proxy 12.3%, 0.554 of unpatched) against its
/// strips (5.7%, 17% more arena) ran 1.20x against 1.04x; the strips win below 0.39.
pub const ARENA_WEIGHT: f64 = 0.3;

/// The time of one step the rewrite adds, in FLOPs: 0.9 us at 100 GFLOP/s. Fitted on
/// MobileNetV2's three complete plans (sums of per-node median times, 1 thread, against
/// 7.54 ms unpatched): 4x4 + 2x2 recomputing (413 steps, 60 MFLOPs recomputed) +1.04 ms,
/// 6x6 cached + 9x1 strips (1,345 steps, 44 MFLOPs) +1.53 ms, 28x1 strips (894 steps,
/// none) +0.24 ms: [`choose`] ranks them in that order for 47k-113k FLOPs a step (the
/// earlier 300k, from DBNet-320's 3.8-4.6 us Slices and Concats, put the strips below the
/// 4x4 grid).
pub const STEP_FLOPS: u64 = 90_000;

/// A complete patch plan: the rewritten graph, its planned arena, its stages in the order
/// taken, and its time proxy.
#[derive(Debug)]
pub struct Whole {
    /// The graph with every stage rewritten.
    pub graph: Graph,
    /// Its plan.
    pub plan: ArenaPlan,
    /// The stages, in the order taken (each found on the graph the one before rewrote).
    pub stages: Vec<PatchInfo>,
    /// Recomputed + streamed FLOPs of the stages, Winograd's lost FLOPs at
    /// [`fast::SLOW_SHARE`] and the steps added at [`STEP_FLOPS`] (module docs).
    pub time_proxy: u64,
    /// The complete plans measured (distinct), for reports and tests.
    pub tried: usize,
    /// Each complete plan measured: its stages (start, end, grid, columns, cached) and how
    /// [`choose`] weighed it, in the order reached (reports: `examples/patch_plans.rs`).
    pub finals: Vec<(Vec<Key>, Scored)>,
    /// Every complete plan a policy reached, before an `across` policy's plan above the
    /// others' smallest arena is dropped (tests).
    pub reached: Vec<Vec<Key>>,
}

/// One node of the decision tree the policies walk: the graph after the stages taken.
struct State {
    graph: Graph,
    plan: ArenaPlan,
    stages: Vec<PatchInfo>,
    /// Recomputed + streamed FLOPs so far.
    flops: u64,
    /// The recompute budget left.
    budget: f64,
}

/// The key of a stage taken: its start, end, grid, columns and family.
pub type Key = (usize, usize, usize, usize, bool);

/// The FLOPs of the Convs running Winograd under `plan` (those with its scratch).
fn winograd_flops(g: &Graph, plan: &ArenaPlan) -> u64 {
    fast::winograd_convs(g, &plan.liveness, &plan.options.liveness)
        .keys()
        .map(|&id| super::search::flops_of(g, id))
        .sum()
}

/// Of the candidates `ranked` at their lowest predicted peak, the one whose stage alone
/// needs the least first (then the ranked order): [`Policy::low_stage`].
pub(super) fn lowest_stage_first(ranked: &mut [&PatchPlan]) {
    let Some(low) = ranked.iter().map(|c| c.peak_bytes).min() else {
        return;
    };
    let best = ranked
        .iter()
        .enumerate()
        .filter(|(_, c)| c.peak_bytes == low)
        .min_by_key(|(i, c)| (c.stage_bytes, *i))
        .map(|(i, _)| i);
    if let Some(i) = best {
        ranked[..=i].rotate_right(1);
    }
}

/// Each policy's complete plan on `g` (unpatched plan `base`, predicted with `predict`,
/// `budget` the recompute share allowed), each stage planned with `plan`; the plan kept as
/// the module docs say, or `None` when no policy lowers the arena. Stages shared by
/// policies are rewritten and planned once.
pub fn plan_whole<E>(
    g: &Graph,
    base: &ArenaPlan,
    predict: LivenessOptions,
    budget: f64,
    mut plan: impl FnMut(&Graph) -> Result<ArenaPlan, E>,
) -> Result<Option<Whole>, E> {
    // Decision tree: the path of stages taken -> its state (the root borrowed from `base`);
    // each state's ranked candidates found once.
    let mut states: HashMap<Vec<Key>, State> = HashMap::new();
    let mut reports: HashMap<Vec<Key>, super::PatchReport> = HashMap::new();
    // The complete plans reached, each with whether only `across` policies reached it.
    let mut finals: Vec<(Vec<Key>, bool)> = Vec::new();
    // The complete plans some policy but a `low_stage` one reached.
    let mut plain: std::collections::HashSet<Vec<Key>> = std::collections::HashSet::new();
    // Stages planned that did not shrink the arena.
    let mut dead: std::collections::HashSet<Vec<Key>> = std::collections::HashSet::new();
    // `ARENAC_PATCH_LOW_STAGE=only`: the `low_stage` policy alone, its plan kept whatever
    // its time proxy (measuring what it would cost).
    let only_low = std::env::var("ARENAC_PATCH_LOW_STAGE").is_ok_and(|v| v == "only");
    for policy in POLICIES.into_iter().filter(|p| !only_low || p.low_stage) {
        let mut path: Vec<Key> = Vec::new();
        for _ in 0..MAX_STAGES {
            let (graph, arena, left) = match states.get(&path) {
                Some(s) => (&s.graph, &s.plan, s.budget),
                None => (g, base, budget),
            };
            let report = reports
                .entry(path.clone())
                .or_insert_with(|| analyze(graph, &arena.schedule, predict, MAX_GRID));
            let order = &arena.schedule;
            let total = report.total_flops as f64;
            let keep = |c: &PatchPlan| {
                policy.cached.is_none_or(|k| c.cached == k)
                    && (policy.slow || c.extra_flops as f64 <= left * total)
            };
            let cost = |c: &PatchPlan| stream_flops(graph, order, c);
            let budget = if policy.slow { left } else { f64::INFINITY };
            let mut ranked = if policy.across {
                report.ranked_across(budget, policy.slack, keep, cost)
            } else {
                report.ranked_with(budget, policy.slack, keep, cost)
            };
            if policy.low_stage {
                lowest_stage_first(&mut ranked);
            }
            let Some((c, ng)) = ranked
                .iter()
                .take(RETRIES)
                .find_map(|&c| lower::rewrite_as_planned(graph, order, c).map(|ng| (c, ng)))
            else {
                break;
            };
            let key = (c.start, c.nodes, c.grid, c.columns, c.cached);
            let mut next = path.clone();
            next.push(key);
            if dead.contains(&next) {
                break;
            }
            if !states.contains_key(&next) {
                let patched = plan(&ng)?;
                if patched.arena_bytes >= arena.arena_bytes {
                    dead.insert(next);
                    break;
                }
                let info = info_of(graph, report, c);
                let (mut stages, flops) = match states.get(&path) {
                    Some(s) => (s.stages.clone(), s.flops),
                    None => (Vec::new(), 0),
                };
                let flops = flops
                    .saturating_add(c.extra_flops)
                    .saturating_add(stream_flops(graph, order, c));
                let spent = c.extra_flops as f64 / report.total_flops.max(1) as f64;
                stages.push(info);
                states.insert(
                    next.clone(),
                    State {
                        graph: ng,
                        plan: patched,
                        stages,
                        flops,
                        budget: left - spent,
                    },
                );
            }
            path = next;
        }
        if !path.is_empty() {
            if !policy.low_stage {
                plain.insert(path.clone());
            }
            match finals.iter_mut().find(|(p, _)| *p == path) {
                Some(f) => f.1 &= policy.across,
                None => finals.push((path, policy.across)),
            }
        }
    }
    // The smallest planned arena of the plans an ordinary policy reached: an `across`
    // policy's plan is kept only at or below it.
    let plain_low = finals
        .iter()
        .filter(|(_, across)| !across)
        .filter_map(|(p, _)| states.get(p).map(|s| s.plan.arena_bytes))
        .min();
    let reached: Vec<Vec<Key>> = finals.iter().map(|(p, _)| p.clone()).collect();
    let finals: Vec<Vec<Key>> = finals
        .into_iter()
        .filter(|(p, across)| {
            !across
                || states
                    .get(p)
                    .is_some_and(|s| plain_low.is_none_or(|low| s.plan.arena_bytes <= low))
        })
        .map(|(p, _)| p)
        .collect();
    let base_wino = winograd_flops(g, base);
    let scored: Vec<(Vec<Key>, Scored)> = finals
        .iter()
        .filter_map(|p| {
            let s = states.get(p)?;
            let lost = base_wino.saturating_sub(winograd_flops(&s.graph, &s.plan));
            let steps = s.plan.schedule.len().saturating_sub(base.schedule.len()) as u64;
            let score = Scored {
                arena: s.plan.arena_bytes,
                proxy: s
                    .flops
                    .saturating_add(fast::slow_flops(lost))
                    .saturating_add(steps.saturating_mul(STEP_FLOPS)),
            };
            Some((p.clone(), score))
        })
        .collect();
    let total = states
        .values()
        .find_map(|s| s.stages.first())
        .map_or(1, |i| i.total_flops.max(1));
    // A plan only a `low_stage` policy reached: kept within its own time budget.
    let scored: Vec<(Vec<Key>, Scored)> = scored
        .into_iter()
        .filter(|(p, sc)| {
            only_low || plain.contains(p) || sc.proxy as f64 <= LOW_STAGE_PROXY * total as f64
        })
        .collect();
    let tried = scored.len();
    let scores: Vec<Scored> = scored.iter().map(|s| s.1).collect();
    let Some(k) = choose(&scores, total) else {
        return Ok(None);
    };
    let Some((path, Scored { proxy, .. })) = scored.get(k).cloned() else {
        return Ok(None);
    };
    Ok(states.remove(&path).map(|s| Whole {
        graph: s.graph,
        plan: s.plan,
        stages: s.stages,
        time_proxy: proxy,
        tried,
        finals: scored,
        reached,
    }))
}

/// A complete plan as [`choose`] weighs it: its planned arena (bytes) and time proxy (FLOPs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scored {
    /// The planned arena.
    pub arena: usize,
    /// The time proxy (module docs).
    pub proxy: u64,
}

/// The plan kept of `plans` (index), for a model of `total` FLOPs: of those within
/// [`WHOLE_SLACK`] of the smallest arena, the least time proxy over `total` plus
/// [`ARENA_WEIGHT`] times the arena over the smallest (a tie to the smaller arena); `None`
/// when `plans` is empty.
pub fn choose(plans: &[Scored], total: u64) -> Option<usize> {
    let smallest = plans.iter().map(|s| s.arena).min()?;
    let bar = smallest.saturating_add((smallest as f64 * WHOLE_SLACK) as usize);
    let total = total.max(1) as f64;
    // A share of the model's time against a share of arena.
    let cost =
        |s: &Scored| s.proxy as f64 / total + ARENA_WEIGHT * s.arena as f64 / smallest as f64;
    plans
        .iter()
        .enumerate()
        .filter(|(_, s)| s.arena <= bar)
        .min_by(|(_, a), (_, b)| cost(a).total_cmp(&cost(b)).then(a.arena.cmp(&b.arena)))
        .map(|(k, _)| k)
}
