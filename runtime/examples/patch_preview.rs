//! What patch-based execution of a CNN's leading stage would save (issue 16): for each model,
//! today's peak of live bytes, and the best stage and grid the analysis finds
//! (`arenac_compiler::analysis::patches`) with at most 10% of the model's FLOPs recomputed —
//! predicted from the plan, not executed (the lowering is the next step).
//!
//!     cargo run --release -p arenac --example patch_preview -- MODEL.onnx...
//!
//! `PATCH_PREVIEW_ALL=1` also lists every stage and grid measured, on stderr;
//! `PATCH_PREVIEW_ORDER=K` the schedule's first K steps (op, node, output shapes);
//! `PATCH_PREVIEW_PATCHED=1` analyzes the graph `--patches` planned (its later stages);
//! `PATCH_PREVIEW_ACT=f16|bf16` plans with 16-bit activations.

use arenac::{CompileOptions, compile_file};
use arenac_compiler::analysis::patches::analyze;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mib = |b: usize| b as f64 / (1024.0 * 1024.0);
    println!(
        "| model | peak today MiB | patched MiB | ratio | stage steps | grid | stage / rest MiB | recomputed (of model) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|---:|");
    let all = std::env::var_os("PATCH_PREVIEW_ALL").is_some();
    for path in std::env::args().skip(1) {
        let activations = match std::env::var("PATCH_PREVIEW_ACT").as_deref() {
            Ok("f16") => arenac_compiler::analysis::act_type::ActType::F16,
            Ok("bf16") => arenac_compiler::analysis::act_type::ActType::Bf16,
            _ => arenac_compiler::analysis::act_type::ActType::F32,
        };
        // `PATCH_PREVIEW_PATCHED=1`: the analysis of the graph the planner patched (what a
        // further stage would find).
        let patched = std::env::var_os("PATCH_PREVIEW_PATCHED").is_some();
        let opts = CompileOptions {
            codegen: false,
            activations,
            patches: if patched {
                arenac::Patches::Always
            } else {
                CompileOptions::default().patches
            },
            ..CompileOptions::default()
        };
        let model = compile_file(path.as_ref(), &opts)?;
        let plan = model.plan();
        let report = analyze(model.graph(), &plan.schedule, plan.options.liveness, 8);
        let name = std::path::Path::new(&path)
            .file_stem()
            .map_or(path.clone(), |s| s.to_string_lossy().into_owned());
        if let Some(k) = std::env::var("PATCH_PREVIEW_ORDER")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
        {
            // The first `k` steps of the schedule: where a stage may stop.
            let g = model.graph();
            for (s, &id) in plan.schedule.iter().take(k).enumerate() {
                let node = g.node(id);
                let shapes: Vec<String> = node
                    .outputs
                    .iter()
                    .map(|&v| format!("{:?}", g.value(v).ty.shape))
                    .collect();
                eprintln!(
                    "{name}: step {s}: {} {} -> {}",
                    node.op.name(),
                    node.name,
                    shapes.join(" ")
                );
            }
        }
        if all {
            for c in &report.candidates {
                eprintln!(
                    "{name}: steps {}..{} {}x{}{}: {:.2} MiB (stage {:.2}, rest {:.2}), +{:.1}% (slow {:.1}%)",
                    c.start,
                    c.nodes,
                    c.grid,
                    c.columns,
                    if c.cached { " cached" } else { "" },
                    mib(c.peak_bytes),
                    mib(c.stage_bytes),
                    mib(c.rest_bytes),
                    100.0 * c.extra_flops as f64 / report.total_flops.max(1) as f64,
                    100.0 * c.slow_flops as f64 / report.total_flops.max(1) as f64
                );
            }
        }
        match report.best(0.10) {
            Some(b) => println!(
                "| {name} | {:.2} | {:.2} | {:.2} | {}..{} | {}x{} | {:.2} / {:.2} | {:.1}% |",
                mib(report.unpatched_bytes),
                mib(b.peak_bytes),
                b.peak_bytes as f64 / report.unpatched_bytes.max(1) as f64,
                b.start,
                b.nodes,
                b.grid,
                b.columns,
                mib(b.stage_bytes),
                mib(b.rest_bytes),
                100.0 * b.extra_flops as f64 / report.total_flops.max(1) as f64,
            ),
            None => println!(
                "| {name} | {:.2} | - | 1.00 | no stage lowers the peak within 10% recompute | | | |",
                mib(report.unpatched_bytes)
            ),
        }
    }
    Ok(())
}
