//! The `graph_plan` fuzz target's body: random valid graphs through import, the IR verifier and
//! arena planning with random options, then checks of the plan made here, independently of
//! the planner: the schedule is a topological order of every node; the placement passes
//! `plan::verify`; the arena is at least the lower bound; every value's buffer is large enough
//! and live from the value's producer to its last reader (to the end for graph outputs).
//! Also random interval sets through every public placement strategy.

use std::collections::HashMap;

use arenac_compiler::analysis::liveness::LivenessOptions;
use arenac_compiler::arena::{ArenaPlan, PlanOptions, plan_arena};
use arenac_compiler::import::{ImportOptions, decode_model, import_model};
use arenac_compiler::ir::graph::{Graph, ValueKind};
use arenac_compiler::ir::verify::verify;
use arenac_compiler::plan::offsets::{place, place_greedy_by_size};
use arenac_compiler::plan::verify::verify_placement;
use arenac_compiler::plan::{Interval, lower_bound, place_sequential};

use super::graph_gen::random_model;
use super::source::Source;

/// Plan options from one byte: file order or schedule, each liveness option (views, in-place,
/// scratch, in-place Concat), an alignment among 1, 16, 64 and 256, one or three threads
/// (per-thread scratch).
pub fn plan_options(byte: u8) -> PlanOptions {
    PlanOptions {
        keep_file_order: byte & 1 != 0,
        liveness: LivenessOptions {
            views: byte & 2 != 0,
            in_place: byte & 4 != 0,
            scratch: byte & 8 != 0,
            concat_in_place: byte & 64 != 0,
            threads: if byte & 128 != 0 { 3 } else { 1 },
            // With scratch: the Winograd pass runs wherever it applies.
            winograd: true,
            winograd_precompute: true,
            // Bit 32 (also the alignment's high bit): the patched plans' Winograd growth.
            winograd_growth: if byte & 32 != 0 {
                arenac_compiler::analysis::liveness::PATCHED_WINOGRAD_GROWTH
            } else {
                0
            },
        },
        align: [1, 16, 64, 256][(byte >> 4) as usize % 4],
        // Read only by `plan_graph`; this target plans the imported graph with `plan_arena`.
        fuse_elementwise: false,
        activations: arenac_compiler::analysis::act_type::ActType::F32,
        narrow_inputs: true,
        patches: false,
        patch_flops: arenac_compiler::analysis::patches::DEFAULT_PATCH_FLOPS,
        patched_winograd_growth: arenac_compiler::analysis::liveness::PATCHED_WINOGRAD_GROWTH,
    }
}

/// The fuzz target: the first byte picks the input's kind — interval sets (`% 4 == 0`), an
/// encoded `ModelProto` in the rest (`% 4 == 3`, how fixtures seed the corpus), else a random
/// graph decoded from the rest.
pub fn fuzz_graph_plan(data: &[u8]) {
    let mut src = Source::new(data);
    let mode = src.byte();
    match mode % 4 {
        0 => check_intervals(&mut src),
        3 => {
            let opts = plan_options(src.byte());
            let Ok(model) = decode_model(data.get(2..).unwrap_or_default().to_vec().into()) else {
                return;
            };
            let iopts = ImportOptions {
                max_fold_bytes: 64 << 20,
                ..ImportOptions::default()
            };
            let Ok(imported) = import_model(&model, None, &iopts) else {
                return;
            };
            if let Err(e) = verify(&imported.graph) {
                panic!("verifier rejected an imported graph: {e}");
            }
            match plan_arena(&imported.graph, &opts) {
                Ok(plan) => check_plan(&imported.graph, &plan),
                Err(e @ arenac_compiler::Error::PlanInternal(_)) => {
                    panic!("planner produced an invalid plan: {e}")
                }
                Err(_) => {}
            }
        }
        _ => {
            let opts = plan_options(src.byte());
            let m = random_model(&mut src, 24);
            let g = import_model(&m.model, None, &ImportOptions::default())
                .unwrap_or_else(|e| panic!("a generated graph does not import: {e}"))
                .graph;
            if let Err(e) = verify(&g) {
                panic!("verifier rejected an imported graph: {e}");
            }
            let plan = plan_arena(&g, &opts).unwrap_or_else(|e| panic!("planning failed: {e}"));
            check_plan(&g, &plan);
        }
    }
}

/// The checks of the module docs, on a plan of `g`; panics with what is wrong.
pub fn check_plan(g: &Graph, plan: &ArenaPlan) {
    let align = plan.options.align;
    // The schedule: each node once, after the producers of its inputs.
    let mut step = HashMap::new();
    for (i, &id) in plan.schedule.iter().enumerate() {
        assert!(step.insert(id, i).is_none(), "node scheduled twice");
    }
    assert_eq!(step.len(), g.node_count(), "schedule misses nodes");
    let steps = plan.schedule.len();
    for (id, n) in g.nodes() {
        for &v in &n.inputs {
            if let ValueKind::Computed(p) = g.value(v).kind {
                assert!(
                    step[&p] < step[&id],
                    "node {} runs before its input",
                    n.name
                );
            }
        }
    }
    // The placement.
    let intervals = plan.liveness.intervals();
    if let Err(e) = verify_placement(&intervals, &plan.placement, align) {
        panic!("plan verifier: {e}");
    }
    let (bound, _) = lower_bound(&intervals, align);
    assert_eq!(plan.arena_bytes, plan.placement.arena_bytes);
    assert!(
        plan.arena_bytes >= bound,
        "arena {} below bound {bound}",
        plan.arena_bytes
    );
    assert_eq!(plan.lower_bound_bytes, bound);
    // Every value in the arena: a buffer large enough, live while the value is.
    for v in g.value_ids() {
        let val = g.value(v);
        let start = match val.kind {
            ValueKind::Constant(_) | ValueKind::Outer(_) => continue,
            ValueKind::Input => 0,
            ValueKind::Computed(p) => step[&p],
        };
        let Some(&b) = plan.liveness.value_buffer.get(&v) else {
            // An input nothing reads and that is no output needs no buffer.
            assert!(
                g.consumers(v).is_empty() && !g.outputs.contains(&v),
                "value {} has no buffer",
                val.name
            );
            continue;
        };
        let iv = plan.liveness.buffers[b].interval;
        let bytes = val.ty.bytes().unwrap_or(usize::MAX);
        assert!(
            iv.size >= bytes,
            "value {} ({bytes} B) in a buffer of {} B",
            val.name,
            iv.size
        );
        assert!(
            iv.start <= start,
            "value {} written before its buffer is live",
            val.name
        );
        for c in g.consumers(v) {
            assert!(
                iv.end > step[&c],
                "value {} read after its buffer died",
                val.name
            );
        }
        if g.outputs.contains(&v) {
            assert_eq!(
                iv.end, steps,
                "output {} does not live to the end",
                val.name
            );
        }
    }
}

/// Random intervals (some empty, some huge, many of equal size) through `place`,
/// `place_greedy_by_size` and `place_sequential`, each verified and at least the lower bound;
/// `place` never worse than greedy-by-size.
pub fn check_intervals(src: &mut Source<'_>) {
    let align = [1, 8, 64, 4096][src.below(4)];
    let n = src.range(0, 48);
    let horizon = src.range(1, 40);
    let sizes = [0, 1, 63, 64, 65, 1000, 4096, 1 << 20, 3 << 30, 1 << 40];
    let intervals: Vec<Interval> = (0..n)
        .map(|_| {
            let start = src.below(horizon);
            let end = start + src.range(1, horizon);
            let size = if src.below(4) == 0 {
                *src.pick(&sizes)
            } else {
                src.below(1 << 16) * 16
            };
            Interval::new(start, end, size)
        })
        .collect();
    let (bound, _) = lower_bound(&intervals, align);
    let best = place(&intervals, align);
    let greedy = place_greedy_by_size(&intervals, align);
    let naive = place_sequential(&intervals, align);
    for p in [&best, &greedy, &naive] {
        if let Err(e) = verify_placement(&intervals, p, align) {
            panic!("{}: {e} ({intervals:?})", p.strategy.name());
        }
        assert!(
            p.arena_bytes >= bound,
            "{} below the lower bound",
            p.strategy.name()
        );
        assert!(
            p.arena_bytes.is_multiple_of(align),
            "{} arena not aligned",
            p.strategy.name()
        );
    }
    assert!(
        best.arena_bytes <= greedy.arena_bytes,
        "place worse than greedy-by-size"
    );
    assert!(
        greedy.arena_bytes <= naive.arena_bytes,
        "greedy worse than no reuse"
    );
}
