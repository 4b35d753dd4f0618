//! The patch candidates of a model, for finding why a plan was (not) chosen: the unpatched
//! arena, then the best candidates of each family (halos recomputed, halo rows cached) as
//! `analyze` ranks them, each rewritten and planned (planned arena against unpatched).
//!
//! `cargo run --release -p arenac-compiler --example patch_plans -- MODEL.onnx [N]`
//! (N: candidates per family, 6 by default).

use std::path::Path;

use arenac_compiler::analysis::patches::whole::plan_whole;
use arenac_compiler::analysis::patches::{MAX_EXTRA_FLOPS, MAX_GRID, analyze, rewrite_as_planned};
use arenac_compiler::arena::{PlanOptions, plan_graph};
use arenac_compiler::import::{ImportOptions, import_file};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: patch_plans MODEL.onnx [N]");
        std::process::exit(2);
    };
    let per: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(6);
    let mut g = match import_file(Path::new(path), &ImportOptions::default()) {
        Ok(i) => i.graph,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let opts = PlanOptions::default();
    let base = match plan_graph(&mut g, &opts) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let predict = arenac_compiler::analysis::liveness::LivenessOptions {
        winograd: false,
        ..opts.liveness
    };
    let report = analyze(&g, &base.schedule, predict, MAX_GRID);
    let total = report.total_flops.max(1) as f64;
    println!(
        "unpatched arena {} B, {} steps, {} candidates",
        base.arena_bytes,
        base.schedule.len(),
        report.candidates.len()
    );
    let ranked = report.ranked(MAX_EXTRA_FLOPS);
    for cached in [false, true] {
        println!("family cached={cached}:");
        for c in ranked.iter().filter(|c| c.cached == cached).take(per) {
            let planned = rewrite_as_planned(&g, &base.schedule, c).map(|mut ng| {
                let keep = PlanOptions {
                    keep_file_order: true,
                    ..opts
                };
                let steps_before = ng.node_count();
                plan_graph(&mut ng, &keep).map(|p| (p.arena_bytes, steps_before))
            });
            let arena = match planned {
                Some(Ok((a, s))) => format!(
                    "planned {:.3} ({} nodes)",
                    a as f64 / base.arena_bytes as f64,
                    s
                ),
                Some(Err(e)) => format!("plan error: {e}"),
                None => "not rewritable".to_string(),
            };
            println!(
                "  steps {}..{} grid {}x{} predicted {:.3} extra {:.2}% slow {:.2}% {arena}",
                c.start,
                c.nodes,
                c.grid,
                c.columns,
                c.peak_bytes as f64 / base.arena_bytes as f64,
                100.0 * c.extra_flops as f64 / total,
                100.0 * c.slow_flops as f64 / total,
            );
        }
    }
    // The complete plans the whole choice weighs (each stage planned by `plan_graph` in file
    // order: fused again, so an arena may differ a little from the CLI's).
    let keep = PlanOptions {
        keep_file_order: true,
        ..opts
    };
    let whole = plan_whole(&g, &base, predict, MAX_EXTRA_FLOPS, |ng| {
        plan_graph(&mut ng.clone(), &keep)
    });
    match whole {
        Ok(Some(w)) => {
            println!("complete plans (stages: start..end grid cached):");
            for (path, s) in &w.finals {
                let stages: Vec<String> = path
                    .iter()
                    .map(|(a, b, p, q, c)| {
                        format!("{a}..{b} {p}x{q}{}", if *c { " c" } else { "" })
                    })
                    .collect();
                println!(
                    "  arena {:.3} proxy {:.2}% [{}]",
                    s.arena as f64 / base.arena_bytes as f64,
                    100.0 * s.proxy as f64 / total,
                    stages.join(", ")
                );
            }
            println!(
                "chosen: arena {:.3} proxy {:.2}%",
                w.plan.arena_bytes as f64 / base.arena_bytes as f64,
                100.0 * w.time_proxy as f64 / total
            );
        }
        Ok(None) => println!("no complete plan lowers the arena"),
        Err(e) => println!("plan error: {e}"),
    }
}
