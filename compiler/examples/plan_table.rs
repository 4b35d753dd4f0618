//! The packing table of docs/PLANNING.md: for each model, the naive sum, the layer-wise bound,
//! plain greedy-by-size on the layer-wise buffers, arenac's own bound (views, in-place,
//! scratch, in-place Concat) in file order and in its memory-aware order, arenac's arena,
//! and arenac's arena without in-place Concat (what writing Concat inputs into their slices
//! gains), and the element-wise nodes fused (groups).
//!
//! `cargo run --release -p arenac-compiler --example plan_table -- [--no-fuse] MODEL.onnx|DIR ...`
//! (symbolic dims default to 1). Prints a Markdown table with geometric means. arenac's
//! columns come from the planning pipeline (`plan_graph`: element-wise fusion, then planning;
//! `--no-fuse` skips fusion); the naive and layer-wise columns are of the graph as imported.

use std::path::{Path, PathBuf};
use std::time::Instant;

use arenac_compiler::analysis::liveness::{LivenessOptions, liveness};
use arenac_compiler::arena::{PlanOptions, plan_graph};
use arenac_compiler::import::{ImportOptions, import_file};
use arenac_compiler::ops::Op;
use arenac_compiler::plan::offsets::place_greedy_by_size;
use arenac_compiler::plan::verify::verify_placement;
use arenac_compiler::plan::{ALIGN, lower_bound};

fn models(args: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for a in args {
        let p = Path::new(a);
        if p.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(p)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
                .collect();
            v.sort();
            out.extend(v);
        } else {
            out.push(p.to_path_buf());
        }
    }
    out
}

fn mib(b: usize) -> String {
    format!("{:.2}", b as f64 / (1024.0 * 1024.0))
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let fuse = !args.iter().any(|a| a == "--no-fuse");
    args.retain(|a| a != "--no-fuse");
    println!(
        "| model | nodes | naive MiB | layer-wise bound | greedy-by-size | arenac bound, file order | arenac bound | arenac arena | arena / own bound | arena / layer-wise | order gain | arena w/o concat in place | concat gain | concats in place | peak at | plan ms | fused nodes (groups) |"
    );
    println!(
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"
    );
    let (mut n, mut g_eff, mut g_layer, mut g_order, mut g_concat, mut worst) =
        (0usize, 0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
    for path in models(&args) {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let g = match import_file(&path, &ImportOptions::default()) {
            Ok(i) => i.graph,
            Err(e) => {
                println!("| {name} | error: {e} |");
                continue;
            }
        };
        let layer = liveness(&g, g.order(), LivenessOptions::layer_wise());
        let layer_iv = layer.intervals();
        let (layer_bound, _) = lower_bound(&layer_iv, ALIGN);
        let greedy = place_greedy_by_size(&layer_iv, ALIGN);
        if let Err(e) = verify_placement(&layer_iv, &greedy, ALIGN) {
            println!("| {name} | greedy plan invalid: {e} |");
            continue;
        }
        let file = plan_graph(
            &mut g.clone(),
            &PlanOptions {
                keep_file_order: true,
                fuse_elementwise: fuse,
                ..PlanOptions::default()
            },
        );
        // `fg`: the graph as planned (fused), for the node lookups below.
        let mut fg = g.clone();
        let start = Instant::now();
        let ours = plan_graph(
            &mut fg,
            &PlanOptions {
                fuse_elementwise: fuse,
                ..PlanOptions::default()
            },
        );
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let plain = plan_graph(
            &mut g.clone(),
            &PlanOptions {
                liveness: LivenessOptions {
                    concat_in_place: false,
                    ..LivenessOptions::full()
                },
                fuse_elementwise: fuse,
                ..PlanOptions::default()
            },
        );
        let (file, ours, plain) = match (file, ours, plain) {
            (Ok(f), Ok(o), Ok(p)) => (f, o, p),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                println!("| {name} | plan error: {e} |");
                continue;
            }
        };
        let eff = ours.arena_bytes as f64 / ours.lower_bound_bytes.max(1) as f64;
        let vs_layer = ours.arena_bytes as f64 / layer_bound.max(1) as f64;
        let order_gain = file.lower_bound_bytes as f64 / ours.lower_bound_bytes.max(1) as f64;
        let concat_gain = plain.arena_bytes as f64 / ours.arena_bytes.max(1) as f64;
        // Concats with at least one input computed in place, of all Concats.
        let concats: Vec<_> = fg
            .nodes()
            .filter(|(_, n)| matches!(n.op, Op::Concat { .. }))
            .collect();
        let in_place = concats
            .iter()
            .filter(|(_, n)| {
                n.inputs.iter().any(|v| {
                    n.outputs
                        .first()
                        .is_some_and(|y| ours.liveness.alias_of.get(v) == Some(y))
                })
            })
            .count();
        let peak = ours
            .peak_node()
            .map(|id| fg.node(id).op.name().to_string())
            .unwrap_or_default();
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {eff:.3} | {vs_layer:.3} | {order_gain:.3} | {} | {concat_gain:.3} | {in_place} / {} | {peak} | {ms:.1} | {} ({}) |",
            g.node_count(),
            mib(ours.naive_bytes),
            mib(layer_bound),
            mib(greedy.arena_bytes),
            mib(file.lower_bound_bytes),
            mib(ours.lower_bound_bytes),
            mib(ours.arena_bytes),
            mib(plain.arena_bytes),
            concats.len(),
            ours.fusion.nodes_fused,
            ours.fusion.groups,
        );
        n += 1;
        g_eff += eff.ln();
        g_layer += vs_layer.ln();
        g_order += order_gain.ln();
        g_concat += concat_gain.ln();
        worst = worst.max(eff);
    }
    if n > 0 {
        let k = n as f64;
        println!(
            "| **geometric mean** ({n} models) | | | | | | | | {:.3} (worst {worst:.3}) | {:.3} | {:.3} | | {:.3} | | | | |",
            (g_eff / k).exp(),
            (g_layer / k).exp(),
            (g_order / k).exp(),
            (g_concat / k).exp()
        );
    }
}
