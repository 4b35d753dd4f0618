use super::search::flops_of;
use super::window::split;
use super::*;
use crate::analysis::liveness::liveness_with;
use crate::import::text::parse_model_text;
use crate::import::{ImportOptions, import_model};
use crate::ir::graph::ValueKind;

fn graph(src: &str) -> Graph {
    let model = parse_model_text(src).expect("parses");
    import_model(&model, None, &ImportOptions::default())
        .expect("imports")
        .graph
}

/// MobileNetV2's first blocks at 224 (stem, block 1, the stride-2 block 2, the residual
/// block 3, the stride-2 block 4 down to 28x28x32), weights as inputs.
const MBV2: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
mb (float[1,3,224,224] X, float[32,3,3,3] W1, float[32,1,3,3] Wd1, float[16,32,1,1] Wp1,
    float[96,16,1,1] We2, float[96,1,3,3] Wd2, float[24,96,1,1] Wp2,
    float[144,24,1,1] We3, float[144,1,3,3] Wd3, float[24,144,1,1] Wp3,
    float[144,24,1,1] We4, float[144,1,3,3] Wd4, float[32,144,1,1] Wp4) => (float[1,32,1,1] Y)
{
    C1 = Conv <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (X, W1)
    R1 = Relu (C1)
    D1 = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1], group = 32> (R1, Wd1)
    P1 = Conv (D1, Wp1)
    E2 = Conv (P1, We2)
    D2 = Conv <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], group = 96> (E2, Wd2)
    P2 = Conv (D2, Wp2)
    E3 = Conv (P2, We3)
    D3 = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1], group = 144> (E3, Wd3)
    P3 = Conv (D3, Wp3)
    A3 = Add (P3, P2)
    E4 = Conv (A3, We4)
    D4 = Conv <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], group = 144> (E4, Wd4)
    P4 = Conv (D4, Wp4)
    Y = GlobalAveragePool (P4)
}
"#;

fn value(g: &Graph, name: &str) -> ValueId {
    g.value_ids()
        .find(|&v| g.value(v).name == name)
        .unwrap_or_else(|| panic!("no value {name}"))
}

#[test]
fn an_interior_patch_reads_mcunetv2s_75_pixels() {
    // PATCHES.md §0.1: 4x4 patches of the 28x28 output read 75x75 input pixels
    // (7 -> 15 -> 17 -> 35 -> 37 -> 75), the residual's window the union of both reads.
    let g = graph(MBV2);
    let order = g.order().to_vec();
    let n = order.len() - 1;
    let p4 = value(&g, "P4");
    let w = windows(
        &g,
        &order,
        n,
        p4,
        Window {
            rows: 7..14,
            cols: 7..14,
        },
    );
    let side = |name: &str| {
        let wv = &w[&value(&g, name)];
        (wv.rows.len(), wv.cols.len())
    };
    assert_eq!(side("D4"), (7, 7));
    assert_eq!(side("E4"), (15, 15));
    assert_eq!(side("A3"), (15, 15));
    assert_eq!(side("E3"), (17, 17));
    assert_eq!(side("P2"), (17, 17));
    assert_eq!(side("E2"), (35, 35));
    assert_eq!(side("R1"), (37, 37));
    assert_eq!(side("X"), (75, 75));
    assert_eq!(w[&value(&g, "X")].rows, 43..118);
    // A corner patch is clamped at the image edge (the row above is the conv's own
    // padding): 0..14 -> 0..15 -> 0..30 -> 0..31 -> 0..62, not 75 rows.
    let w = windows(
        &g,
        &order,
        n,
        p4,
        Window {
            rows: 0..7,
            cols: 0..7,
        },
    );
    assert_eq!(w[&value(&g, "X")].rows, 0..62);
    assert_eq!(w[&value(&g, "E2")].rows, 0..30);
}

#[test]
fn the_stage_ends_at_the_global_pool_and_patches_lower_the_peak() {
    let g = graph(MBV2);
    let report = analyze(&g, g.order(), LivenessOptions::full(), 4);
    // Every candidate stage is a prefix of Convs, Relu and the Add, never the pool.
    assert!(report.candidates.iter().all(|c| c.nodes < g.order().len()));
    let longest = report.candidates.iter().map(|c| c.nodes).max().unwrap();
    assert_eq!(longest, g.order().len() - 1);
    // Finer grids recompute more.
    let at = |n: usize, p: usize| {
        report
            .candidates
            .iter()
            .find(|c| c.nodes == n && c.grid == p)
            .unwrap()
            .clone()
    };
    assert!(at(longest, 4).extra_flops > at(longest, 2).extra_flops);
    assert!(at(longest, 2).extra_flops > 0);
    // With any recompute allowed, the best plan is below today's peak.
    let best = report.best(1.0).expect("patching lowers this stem's peak");
    assert!(best.peak_bytes < report.unpatched_bytes);
    assert!(best.peak_bytes >= best.rest_bytes && best.peak_bytes >= best.stage_bytes);
}

#[test]
fn ranges_split_like_array_split() {
    assert_eq!(split(7, 3), vec![0..3, 3..5, 5..7]);
    assert_eq!(split(4, 4), vec![0..1, 1..2, 2..3, 3..4]);
}

/// Two squeeze-and-excitation blocks (GlobalAveragePool → 1x1 convs → Sigmoid → Mul over the
/// map), the second after an expand and a depthwise, then a projection.
const SE2: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
se (float[1,3,32,32] X, float[8,3,3,3] W0, float[8,1,3,3] Wd1, float[4,8,1,1] Fa1,
    float[8,4,1,1] Fb1, float[8,8,1,1] Wp1, float[24,8,1,1] We2, float[24,1,3,3] Wd2,
    float[4,24,1,1] Fa2, float[24,4,1,1] Fb2, float[8,24,1,1] Wp2) => (float[1,8,1,1] Y)
{
    S0 = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (X, W0)
    D1 = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1], group = 8> (S0, Wd1)
    X1 = Relu (D1)
    G1 = GlobalAveragePool (X1)
    A1 = Conv (G1, Fa1)
    R1 = Relu (A1)
    B1 = Conv (R1, Fb1)
    T1 = Sigmoid (B1)
    M1 = Mul (X1, T1)
    P1 = Conv (M1, Wp1)
    E2 = Conv (P1, We2)
    D2 = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1], group = 24> (E2, Wd2)
    X2 = Relu (D2)
    G2 = GlobalAveragePool (X2)
    A2 = Conv (G2, Fa2)
    R2 = Relu (A2)
    B2 = Conv (R2, Fb2)
    T2 = Sigmoid (B2)
    M2 = Mul (X2, T2)
    P2 = Conv (M2, Wp2)
    Y = GlobalAveragePool (P2)
}
"#;

#[test]
fn squeeze_excitation_stages_run_in_passes_with_a_checkpoint() {
    let g = graph(SE2);
    let order = g.order().to_vec();
    let report = analyze(&g, &order, LivenessOptions::full(), 4);
    let whole = order.len() - 1;
    let at = |n: usize, p: usize| {
        report
            .candidates
            .iter()
            .find(|c| c.nodes == n && c.grid == p)
            .unwrap_or_else(|| panic!("no candidate of {n} nodes on {p}x{p}"))
            .clone()
    };
    // Up to P2: a pass per pool and a last one; the second pass writes P1 (the smallest
    // value after the first SE's Mul that cuts the last pass off from the image) for the last
    // pass to read; the first pass writes nothing (everything before a pool is as large).
    let deep = at(whole, 2);
    assert_eq!(deep.output, value(&g, "P2"));
    assert_eq!(deep.passes.len(), 3);
    let pool = |name: &str| match g.value(value(&g, name)).kind {
        ValueKind::Computed(p) => Some(p),
        _ => None,
    };
    assert_eq!(deep.passes[0].pool, pool("G1"));
    assert_eq!(deep.passes[1].pool, pool("G2"));
    assert_eq!(deep.passes[2].pool, None);
    assert_eq!(deep.passes[0].write, None);
    assert_eq!(deep.passes[1].write, Some(value(&g, "P1")));
    assert_eq!(deep.passes[2].read, Some(value(&g, "P1")));
    // The passes recompute more than the halos of a one-pass stage on the same grid: up to
    // M1 the stage holds one pool (two passes), before it none.
    let m1 = order
        .iter()
        .position(|&id| g.node(id).outputs[0] == value(&g, "M1"))
        .unwrap()
        + 1;
    assert_eq!(at(m1, 2).passes.len(), 2);
    let before = order
        .iter()
        .position(|&id| g.node(id).outputs[0] == value(&g, "X1"))
        .unwrap()
        + 1;
    assert_eq!(at(before, 2).passes.len(), 1);
    assert!(at(m1, 2).extra_flops > at(before, 2).extra_flops);
    assert!(deep.extra_flops > at(m1, 2).extra_flops);
    // (The rewrite, which needs the weights as constants, runs in tests/codegen/patches.rs.)
}

/// A Conv whose SiLU (Sigmoid + Mul, unfused here) its epilogue applies, and one with a Relu,
/// then a projection.
const EPI: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
epi (float[1,3,64,64] X, float[16,3,3,3] W1, float[16,16,3,3] W2, float[8,16,1,1] W3)
    => (float[1,8,1,1] Y)
{
    C1 = Conv <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (X, W1)
    S1 = Sigmoid (C1)
    M1 = Mul (C1, S1)
    C2 = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (M1, W2)
    R2 = Relu (C2)
    C3 = Conv (R2, W3)
    Y = GlobalAveragePool (C3)
}
"#;

#[test]
fn no_stage_ends_between_a_conv_and_its_epilogue_activation() {
    let g = graph(EPI);
    let order = g.order().to_vec();
    let (c1, c2) = (value(&g, "C1"), value(&g, "C2"));
    assert!(ends::feeds_epilogue(&g, c1) && ends::feeds_epilogue(&g, c2));
    assert!(!ends::feeds_epilogue(&g, value(&g, "C3")), "read by a pool");
    assert!(!ends::feeds_epilogue(&g, value(&g, "M1")), "not a Conv's");
    let report = analyze(&g, &order, LivenessOptions::full(), 4);
    let outputs: Vec<ValueId> = report.candidates.iter().map(|c| c.output).collect();
    assert!(
        !outputs.contains(&c1) && !outputs.contains(&c2),
        "cut at a Conv"
    );
    for v in ["M1", "R2", "C3"] {
        assert!(outputs.contains(&value(&g, v)), "a stage up to {v}");
    }
}

/// An expand/project pair (the peak), then two 3 x 3 Convs of 32 channels at 64 x 64
/// (weights as inputs: transformed per run) with room for Winograd's scratch.
const WINO: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
wino (float[1,32,64,64] X, float[128,32,1,1] We, float[32,128,1,1] Wp, float[32,32,3,3] W1,
      float[32,32,3,3] W2) => (float[1,32,1,1] Y)
{
    E = Conv (X, We)
    P = Conv (E, Wp)
    C1 = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (P, W1)
    R1 = Relu (C1)
    C2 = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (R1, W2)
    R2 = Relu (C2)
    Y = GlobalAveragePool (R2)
}
"#;

#[test]
fn convs_losing_winograd_count_against_the_budget() {
    let g = graph(WINO);
    let order = g.order().to_vec();
    let opts = LivenessOptions::full();
    let live = liveness_with(&g, &order, opts, |name| name != "conv tiles");
    let wino = fast::winograd_convs(&g, &live, &opts);
    // Unpatched, both run Winograd with the transform per run (their weights are inputs),
    // which no patch keeps.
    assert_eq!(wino.len(), 2, "{wino:?}");
    let report = analyze(&g, &order, opts, 4);
    let whole = order.len() - 1;
    let c = report
        .candidates
        .iter()
        .find(|c| c.start == 0 && c.nodes == whole && c.grid == 2)
        .expect("a stage of both Convs on 2x2");
    let conv_flops: u64 = wino.keys().map(|&id| flops_of(&g, id)).sum();
    assert_eq!(c.slow_flops, fast::slow_flops(conv_flops / 2) * 2);
    assert!(c.slow_flops > c.extra_flops);
    // Over the budget with them, within it without.
    let share = |f: u64| f as f64 / report.total_flops as f64;
    let between = (share(c.extra_flops) + share(c.extra_flops + c.slow_flops)) / 2.0;
    let ranked = |b: f64| report.ranked(b).iter().any(|r| r == &c);
    assert!(!ranked(between));
    assert_eq!(ranked(1.0), c.peak_bytes < report.unpatched_bytes);
    // Precomputed weights on windows of enough tiles keep it; too few tiles, or the
    // transform per run, do not.
    let (&id, p) = wino.iter().next().expect("a Winograd Conv");
    assert!(!fast::keeps_winograd(p, 32, 32), "{:?}", g.node(id).name);
    let pre = crate::gemm::conv::ConvParams {
        packed_a: crate::gemm::winograd::WINOGRAD_U_PACKED,
        ..*p
    };
    assert!(fast::keeps_winograd(&pre, 16, 16));
    assert!(!fast::keeps_winograd(&pre, 8, 8));
}

#[test]
fn cached_rows_are_made_once_and_read_from_the_cache() {
    // MobileNetV2's first blocks on 4 patch rows: every stage value's new rows partition the
    // rows the stage needs of it (nothing recomputed along the rows), and each value a 3x3
    // node reads is kept for the patch row below (its halo rows).
    let g = graph(MBV2);
    let order = g.order().to_vec();
    let n = order.len() - 1;
    let p4 = value(&g, "P4");
    let p = 4;
    let row_cells: Vec<Vec<(ValueId, std::ops::Range<usize>)>> =
        (0..p).map(|i| cells(&g, p4, &[], p, 0, i)).collect();
    let cut = Cut::default();
    let wins: Vec<Vec<Option<std::ops::Range<usize>>>> = row_cells
        .iter()
        .map(|c| ranges_cut(&g, &order, n, c, 0, &cut))
        .collect();
    // The analysis' tables, indexed by the stage's values only, hold the same windows.
    let slots = super::window::Slots::of_nodes(&g, &order[..n]);
    let local: Vec<Vec<Option<std::ops::Range<usize>>>> = row_cells
        .iter()
        .map(|c| super::window::ranges_in(&order, n, c, 0, &cut, &slots))
        .collect();
    for (w, l) in wins.iter().zip(&local) {
        for v in g.value_ids() {
            let at = slots.get(v).and_then(|k| l[k].clone());
            assert_eq!(w[v.index()], at, "{}", g.value(v).name);
        }
    }
    let rows = cache::rows(&g, &order, n, &local, &row_cells, &cut, &slots);
    for name in ["R1", "E2", "D2", "P2", "E3", "A3", "E4", "P4"] {
        let v = value(&g, name);
        let mut at = wins[0][v.index()].clone().expect("a window").start;
        for r in &rows {
            let new = r.new_of(&slots, v).expect("new rows");
            assert_eq!(new.start, at, "{name}: rows made twice or skipped");
            at = new.end;
        }
        let h = g.value(v).ty.shape[2];
        assert_eq!(at, h, "{name}: every row made");
        assert_eq!(cache::new_rows(&rows, &slots, v), h);
    }
    // E2 (read by the stride-2 depthwise) and E3 (the stride-1 one) keep their halo rows;
    // P4 (read by no stage node) keeps nothing; the last patch row keeps nothing.
    for name in ["R1", "E2", "E3", "E4"] {
        let v = value(&g, name);
        assert!(
            rows[0].keep_of(&slots, v).is_some(),
            "{name} keeps its halo"
        );
        assert!(rows[p - 1].keep_of(&slots, v).is_none());
    }
    assert!(rows.iter().all(|r| r.keep_of(&slots, p4).is_none()));
    // E3's reader (the 3x3 stride-1 depthwise) reads k - 1 = 2 rows above its new rows.
    let e3 = value(&g, "E3");
    let (read, new) = (
        rows[1].read_of(&slots, e3).unwrap(),
        rows[1].new_of(&slots, e3).unwrap(),
    );
    assert_eq!(new.start - read.start, 2);
    // The analysis offers the cached variants: on strips and square grids, recomputing
    // less than the same grid without the cache, nothing at all on strips.
    let report = analyze(&g, &order, LivenessOptions::full(), 4);
    let at = |c: bool, q: usize| {
        report
            .candidates
            .iter()
            .find(|x| x.nodes == n && x.grid == 4 && x.cached == c && x.columns == q)
            .unwrap_or_else(|| panic!("no 4x{q} candidate, cached {c}"))
            .clone()
    };
    assert!(at(true, 4).extra_flops < at(false, 4).extra_flops);
    assert!(
        at(true, 4).extra_flops > 0,
        "the columns' halos are recomputed"
    );
    assert_eq!(at(true, 1).extra_flops, 0);
}

/// The window search as it was before the stage tables (`window::Slots`): every node's rule
/// found on the way, windows indexed by value id; the plain reference of [`ranges_cut`].
fn reference_ranges(
    g: &Graph,
    order: &[NodeId],
    n: usize,
    seeds: &[(ValueId, std::ops::Range<usize>)],
    dim: usize,
    cut: &Cut,
) -> Vec<Option<std::ops::Range<usize>>> {
    let mut win: Vec<Option<std::ops::Range<usize>>> = vec![None; g.values().len()];
    for (v, r) in seeds {
        win[v.index()] = Some(r.clone());
    }
    for &id in order[..n].iter().rev() {
        let node = g.node(id);
        let y = node.outputs[0];
        let Some(wo) = win[y.index()].clone() else {
            continue;
        };
        if cut.stop.contains(&y) || cut.global.contains(&y) {
            continue;
        }
        let Some(rule) = window::rule(g, id) else {
            continue;
        };
        let reads = match rule {
            Some(_) => &node.inputs[..1],
            None => &node.inputs[..],
        };
        for &v in reads {
            if matches!(g.value(v).kind, ValueKind::Constant(_))
                || cut.global.contains(&v)
                || passes::broadcast(g, v, y)
            {
                continue;
            }
            let size = g.value(v).ty.shape[2 + dim];
            let wi = match rule {
                None => wo.clone(),
                Some(l) => l.back(&wo, dim, size),
            };
            let slot = &mut win[v.index()];
            *slot = Some(match slot.take() {
                Some(old) => old.start.min(wi.start)..old.end.max(wi.end),
                None => wi,
            });
        }
    }
    win
}

#[test]
fn stage_tables_find_the_reference_windows() {
    // Every stage end of MobileNetV2's first blocks, grids 2..5, rows and columns, with and
    // without a cut (a checkpoint read whole, the pooled output): the slot-indexed search
    // (one `Slots` refilled per stage, as the analysis does) and `ranges_cut` find the
    // windows of the plain per-node search.
    let g = graph(MBV2);
    let order = g.order().to_vec();
    let mut cut = Cut::default();
    cut.stop.insert(value(&g, "E3"));
    cut.global.insert(value(&g, "Y"));
    let mut slots = window::Slots::default();
    let mut compared = 0;
    for n in (1..order.len()).rev() {
        slots.refill(&g, &order[..n]);
        let out = g.node(order[n - 1]).outputs[0];
        for p in 2..=5 {
            for dim in 0..2 {
                for i in 0..p {
                    let seeds = cells(&g, out, &[], p, dim, i);
                    for c in [&Cut::default(), &cut] {
                        let want = reference_ranges(&g, &order, n, &seeds, dim, c);
                        assert_eq!(ranges_cut(&g, &order, n, &seeds, dim, c), want);
                        let local = window::ranges_in(&order, n, &seeds, dim, c, &slots);
                        for v in g.value_ids() {
                            let got = slots.get(v).and_then(|k| local[k].clone());
                            assert_eq!(got, want[v.index()], "{} n {n}", g.value(v).name);
                        }
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared > 100);
    // A value no node of the stage touches has no slot: the tables are the stage's size.
    slots.refill(&g, &order[..2]);
    assert!(slots.get(value(&g, "P4")).is_none());
    assert!(slots.len() < g.values().len());
}

#[test]
fn ranking_across_stages_takes_the_least_proxy_near_the_lowest_peak() {
    // MobileNetV2's first blocks: with a slack, the first candidate is the least recomputing
    // of every stage's candidates within it of the lowest peak (not the lowest stage's
    // best); the same candidates are ranked, only their order differs; with no slack the
    // first has the lowest peak.
    let g = graph(MBV2);
    let order = g.order().to_vec();
    let report = analyze(&g, &order, LivenessOptions::full(), 6);
    let all = |_: &PatchPlan| true;
    let none = |_: &PatchPlan| 0;
    let plain = report.ranked_with(1.0, 0.0, all, none);
    let low = plain
        .iter()
        .map(|c| c.peak_bytes)
        .min()
        .expect("candidates");
    let slack = 0.5;
    let across = report.ranked_across(1.0, slack, all, none);
    assert_eq!(across.len(), plain.len());
    let near = low + (low as f64 * slack) as usize;
    let proxy = |c: &PatchPlan| c.extra_flops + c.slow_flops;
    let first = across[0];
    assert!(first.peak_bytes <= near);
    let least = plain
        .iter()
        .filter(|c| c.peak_bytes <= near)
        .map(|c| proxy(c))
        .min()
        .expect("near candidates");
    assert_eq!(proxy(first), least);
    // Several stages have candidates near the lowest peak, so the order can change.
    let stages: std::collections::HashSet<(usize, usize)> = plain
        .iter()
        .filter(|c| c.peak_bytes <= near)
        .map(|c| (c.start, c.nodes))
        .collect();
    assert!(stages.len() > 1, "{stages:?}");
    let tight = report.ranked_across(1.0, 0.0, all, none);
    assert_eq!(tight[0].peak_bytes, low);
}

/// The whole-plan choice on MobileNetV2's three complete plans as planned and measured
/// (2026-11-27, 1 thread, sums of per-node median times against 7.54 ms unpatched): 4x4 + 2x2
/// recomputing (arena 1,283,840 B, 413 steps added, 60.4 MFLOPs recomputed) +1.04 ms; 6x6
/// cached + 9x1 strips (1,178,304 B, 1,345 steps, 43.7 MFLOPs) +1.53 ms; 28x1 cached strips
/// (1,306,368 B, 894 steps, none) +0.24 ms. The fastest is kept, 10.9% above the smallest
/// arena; a plan beyond `WHOLE_SLACK` is not, however fast; equal costs go to the smaller
/// arena. U-Net's measured plans alike.
#[test]
fn the_whole_choice_keeps_the_measured_fastest_plan_within_its_slack() {
    use whole::{Scored, choose};
    let total = 607_934_440;
    let plan = |arena: usize, steps: u64, flops: u64| Scored {
        arena,
        proxy: flops + steps * whole::STEP_FLOPS,
    };
    let grid = plan(1_283_840, 413, 60_429_160);
    let two = plan(1_178_304, 1_345, 43_700_160);
    let strips = plan(1_306_368, 894, 0);
    assert_eq!(choose(&[grid, two, strips], total), Some(2));
    // Without the strips, the grid: 4x4's 1.04 ms against the two stages' 1.53 ms.
    assert_eq!(choose(&[grid, two], total), Some(0));
    // Nothing recomputed or added, but past the slack: not kept.
    let far = (1_178_304.0 * (1.0 + whole::WHOLE_SLACK)) as usize + 64;
    assert_eq!(choose(&[two, plan(far, 0, 0)], total), Some(0));
    // The same cost: the smaller arena.
    let a = Scored {
        arena: 1000,
        proxy: 0,
    };
    let b = Scored {
        arena: 1000,
        proxy: 0,
    };
    assert_eq!(choose(&[a, b], total), Some(0));
    assert_eq!(choose(&[], total), None);
    // U-Net (7.02 GFLOPs; Winograd lost counted at `SLOW_SHARE` in the FLOPs): the 3x3 grid
    // from step 29 (arena 10,923,328 B, 227 steps, 592.7 MFLOPs recomputed + 627.9 lost)
    // ran 1.22x of unpatched, the 8x1 strips (12,255,232 B, 286 steps, 677.1 lost) 1.10x
    // (wall, minima of 6 alternated rounds); the 5x5 grid from step 33 is past the slack.
    let total = 7_016_546_304;
    let grid = plan(10_923_328, 227, 592_724_288 + 627_904_512);
    let strips = plan(12_255_232, 286, 677_117_952);
    let fine = plan(12_446_912, 460, 373_626_240 + 568_406_016);
    assert_eq!(choose(&[grid, fine, strips], total), Some(2));
}

/// A ConvTranspose with kernel == stride on any output window: the input window is exactly
/// the rows whose taps reach it (the last row when none does: `output_padding` rows), and the
/// recomputed pads and `output_padding` give every output of the window the same input row
/// and tap as in the whole node, and the window's size.
#[test]
fn transposed_windows_reach_the_same_rows_and_taps() {
    use super::window::{transposed, transposed_attrs};
    use crate::ops::ConvTransposeAttrs;
    let mut cases = 0;
    for k in 1..=3usize {
        for (pb, pe) in [(0, 0), (1, 0), (0, 2), (2, 1), (3, 3)] {
            for op in 0..=2usize {
                for size in 1..=5usize {
                    let full = k * size + op;
                    if pb + pe >= full {
                        continue;
                    }
                    let len = full - pb - pe;
                    let a = ConvTransposeAttrs {
                        kernel: vec![k, k],
                        strides: vec![k, k],
                        dilations: vec![1, 1],
                        pads: vec![pb, pb, pe, pe],
                        output_padding: vec![op, op],
                        group: 1,
                    };
                    let l = transposed(&a).expect("kernel == stride");
                    // Whole node: output `o` is made by input row (o + pb) / k, tap
                    // (o + pb) % k, when that row exists.
                    let whole = |o: usize| Some((o + pb) / k).filter(|&i| i < size);
                    for start in 0..len {
                        for end in start + 1..=len {
                            let o = start..end;
                            let need = l.back(&o, 0, size);
                            let reach: Vec<usize> = o.clone().filter_map(whole).collect();
                            let want = match (reach.first(), reach.last()) {
                                (Some(&f), Some(&e)) => f..e + 1,
                                _ => size - 1..size,
                            };
                            assert_eq!(need, want, "k {k} pads {pb},{pe} op {op} rows {o:?}");
                            let w = Window {
                                rows: o.clone(),
                                cols: o.clone(),
                            };
                            let nw = Window {
                                rows: need.clone(),
                                cols: need.clone(),
                            };
                            let t = transposed_attrs(&a, &l, &w, &nw).expect("attrs");
                            let (b, e, p) = (t.pads[0], t.pads[2], t.output_padding[0]);
                            assert_eq!(k * need.len() + p - b - e, o.len(), "size of {o:?}");
                            for (j, oo) in o.clone().enumerate() {
                                // Sub-node: output j from window row (j + b) / k.
                                let sub = Some((j + b) / k)
                                    .filter(|&i| i < need.len())
                                    .map(|i| (need.start + i, (j + b) % k));
                                let whole = whole(oo).map(|i| (i, (oo + pb) % k));
                                assert_eq!(sub, whole, "k {k} pads {pb},{pe} op {op} o {oo}");
                            }
                            cases += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(cases > 1000, "{cases} windows");
    // Overlapping or dilated taps stay out of stages.
    let overlap = ConvTransposeAttrs {
        kernel: vec![4, 4],
        strides: vec![2, 2],
        dilations: vec![1, 1],
        pads: vec![1, 1, 1, 1],
        output_padding: vec![0, 0],
        group: 1,
    };
    assert!(transposed(&overlap).is_none());
    let dilated = ConvTransposeAttrs {
        kernel: vec![2, 2],
        strides: vec![2, 2],
        dilations: vec![2, 1],
        ..overlap
    };
    assert!(transposed(&dilated).is_none());
}

/// `Policy::low_stage`: of the candidates at the lowest predicted peak, the one whose stage
/// alone needs the least goes first (the rest keep their order); candidates above that peak
/// never move ahead.
#[test]
fn the_low_stage_policy_takes_the_least_stage_at_the_lowest_peak() {
    let g = graph(MBV2);
    let report = analyze(&g, g.order(), LivenessOptions::full(), 4);
    let ranked = report.ranked(1.0);
    assert!(ranked.len() > 2, "too few candidates");
    let low = ranked.iter().map(|c| c.peak_bytes).min().expect("some");
    let least = ranked
        .iter()
        .filter(|c| c.peak_bytes == low)
        .map(|c| c.stage_bytes)
        .min()
        .expect("some");
    let mut moved = ranked.clone();
    whole::lowest_stage_first(&mut moved);
    assert_eq!(moved.len(), ranked.len());
    let first = moved.first().expect("some");
    assert_eq!((first.peak_bytes, first.stage_bytes), (low, least));
    // The others in their order.
    let rest: Vec<*const PatchPlan> = moved[1..].iter().map(|c| *c as *const _).collect();
    let before: Vec<*const PatchPlan> = ranked
        .iter()
        .filter(|c| !std::ptr::eq(**c, *first))
        .map(|c| *c as *const _)
        .collect();
    assert_eq!(rest, before);
    // Nothing to move in an empty list.
    let mut none: Vec<&PatchPlan> = Vec::new();
    whole::lowest_stage_first(&mut none);
    assert!(none.is_empty());
}
