//! The `arenac` command line: `arenac compile MODEL [--shape NAME=DxD...] [--memory-limit X]
//! [--print-ir]`, `arenac plan MODEL [--shape ...] [--memory-limit X] [--keep-order] [--json]
//! [--svg FILE]`, `arenac run MODEL [--shape ...] [--input NAME=FILE ...] [--output-dir DIR]
//! [--repeat N] [--labels FILE] [--profile FILE.json]` and `arenac ops`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;
use arenac::{
    ActType, CompileOptions, Patches, WeightType, compile_file, parse_shape_spec, supported_ops,
};
use arenac_compiler::ir::graph::ValueId;
use clap::{Parser, Subcommand};

#[path = "../cli/run.rs"]
mod run_cli;
#[path = "../cli/stream.rs"]
mod stream_cli;

use run_cli::{RunOutputs, run_model};

#[derive(Parser)]
#[command(
    name = "arenac",
    version,
    about = "ONNX graph compiler for CPUs with static memory planning"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What the model is compiled with, the same on `compile`, `plan` and `run`: storage types,
/// patches, Winograd, threads.
#[derive(clap::Args)]
struct BuildArgs {
    /// Store the weights of Conv, Gemm and MatMul (constant B) as f32 (default), f16, bf16
    /// or int8 (symmetric per output channel, f32 scales); computed in f32. Other weights
    /// stay f32 and are listed.
    #[arg(long, value_name = "f32|f16|bf16|int8", default_value = "f32",
          value_parser = parse_weights)]
    weights: WeightType,
    /// Store intermediates (the arena) as f32 (default), f16 or bf16: each node computes
    /// in f32 and rounds once on store; graph inputs and outputs keep their types (an f32
    /// input read only by 16-bit nodes is rounded into its 16-bit slot as it is copied in).
    /// Nodes without a 16-bit kernel stay f32 and are listed.
    #[arg(long, value_name = "f32|f16|bf16", default_value = "f32",
          value_parser = parse_activations)]
    activations: ActType,
    /// Run the leading stage of a CNN patch by patch (spatial tiles, halos recomputed)
    /// whenever that plans a smaller arena (default: only when the plan would not fit
    /// --memory-limit otherwise).
    #[arg(long, conflicts_with = "no_patches")]
    patches: bool,
    /// Never run stages patch by patch, even to fit --memory-limit.
    #[arg(long)]
    no_patches: bool,
    /// The FLOPs patching may recompute, in percent of the model's (the halos, and the
    /// passes a stage with global pools runs: EfficientNet's squeeze-and-excitation).
    #[arg(long, value_name = "PCT", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(0..=1000))]
    patch_flops: u32,
    /// Never run Winograd F(4x4, 3x3) for 3x3 stride-1 convolutions (by default the
    /// planner takes it where it is faster and its scratch does not raise the arena).
    #[arg(long)]
    no_winograd: bool,
    /// Threads a run uses (intra-op parallelism); the arena includes every parallel
    /// kernel's per-thread scratch for this count. Default: the CPUs this process may
    /// use (its affinity mask).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
}

impl BuildArgs {
    /// Compile options from these flags and the rest of a command's.
    fn options(
        &self,
        shapes: &[String],
        memory_limit: Option<&str>,
        keep_order: bool,
    ) -> anyhow::Result<CompileOptions> {
        let mut opts = options(shapes, memory_limit, keep_order, self.threads)?;
        opts.weights = self.weights;
        opts.activations = self.activations;
        opts.patches = match (self.patches, self.no_patches) {
            (true, _) => Patches::Always,
            (_, true) => Patches::Never,
            _ => Patches::OverLimit,
        };
        opts.winograd = !self.no_winograd;
        opts.patch_flops = self.patch_flops;
        Ok(opts)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Import a model, infer every value's shape, fold constants, and print a summary.
    Compile {
        /// The .onnx file.
        model: PathBuf,
        /// Bind an input's shape (NAME=1x3x224x224), a symbolic dim (N=8) or one dim of an
        /// input ('x[2]=224': how -1 and ? dims are named). Repeatable.
        #[arg(long = "shape", value_name = "NAME=DxD")]
        shapes: Vec<String>,
        /// Cap on arena + weights (64MiB, 1.5GiB, 500MB, 123456, or 10% of physical RAM);
        /// compiling fails when the plan needs more. Default: the physical RAM.
        #[arg(long, value_name = "X")]
        memory_limit: Option<String>,
        /// Print the typed IR after import and folding.
        #[arg(long)]
        print_ir: bool,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Plan the arena and report it: sizes, bounds, the peak and a per-buffer table.
    Plan {
        /// The .onnx file.
        model: PathBuf,
        /// Bind an input's shape (NAME=1x3x224x224), a symbolic dim (N=8) or one dim of an
        /// input ('x[2]=224': how -1 and ? dims are named). Repeatable.
        #[arg(long = "shape", value_name = "NAME=DxD")]
        shapes: Vec<String>,
        /// Cap on arena + weights (64MiB, 1.5GiB, 500MB, 123456, or 10% of physical RAM).
        #[arg(long, value_name = "X")]
        memory_limit: Option<String>,
        /// Run nodes in the file's order instead of the memory-aware schedule.
        #[arg(long)]
        keep_order: bool,
        /// Keep element-wise nodes unfused (one kernel and one buffer per node), and a
        /// residual Add after a Conv out of the Conv.
        #[arg(long)]
        no_fuse: bool,
        /// Print the report as JSON (schema: docs/PLAN-REPORT.md) instead of text.
        #[arg(long)]
        json: bool,
        /// Also write the arena as an SVG picture to FILE.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        #[command(flatten)]
        build: BuildArgs,
    },
    /// Compile a model and run it: inputs from .npy / TensorProto .pb files (or seeded random
    /// ones), outputs summarized and optionally written as .npy.
    Run {
        /// The .onnx file.
        model: PathBuf,
        /// Bind an input's shape (NAME=1x3x224x224), a symbolic dim (N=8) or one dim of an
        /// input ('x[2]=224': how -1 and ? dims are named). Repeatable.
        #[arg(long = "shape", value_name = "NAME=DxD")]
        shapes: Vec<String>,
        /// An input from a .npy or TensorProto .pb file: NAME=FILE, or FILE alone for the
        /// graph inputs in order. NAME is matched against the model's input names (the longest
        /// that SPEC starts with, followed by '='), so names with '/', ':' or '=' work
        /// (gpu_0/data_0=x.npy); a SPEC naming no input is a file (it may hold '='). Its shape
        /// binds the model's symbolic dims. Repeatable.
        /// Without any, inputs are seeded random (floats uniform in [-1, 1), integers 0).
        #[arg(long = "input", value_name = "NAME=FILE")]
        inputs: Vec<String>,
        /// Write each graph output to DIR/output_<i>.npy, in graph-output order (bf16, float8,
        /// float4, int4 and int2 ones, which numpy lacks, to DIR/output_<i>.pb, an ONNX
        /// TensorProto).
        #[arg(long, value_name = "DIR")]
        output_dir: Option<PathBuf>,
        /// Run N times and report the median time per run.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..))]
        repeat: u32,
        /// Integer labels (.npy), one per row of the first output: prints the top-1 predicted
        /// classes and the accuracy.
        #[arg(long, value_name = "FILE")]
        labels: Option<PathBuf>,
        /// Cap on arena + weights (64MiB, 1.5GiB, 500MB, 123456, or 10% of physical RAM).
        #[arg(long, value_name = "X")]
        memory_limit: Option<String>,
        /// Keep element-wise nodes unfused (one kernel and one buffer per node), and a
        /// residual Add after a Conv out of the Conv.
        #[arg(long)]
        no_fuse: bool,
        #[command(flatten)]
        build: BuildArgs,
        /// Profile every run: write a Chrome trace (ONNX Runtime's profiler layout; open in
        /// ui.perfetto.dev or chrome://tracing) with one event per node per run and the live
        /// arena bytes, and print the time per op type and kernel path (medians over runs;
        /// use --repeat). Compiles timer calls between nodes into the program.
        #[arg(long, value_name = "FILE.json")]
        profile: Option<PathBuf>,
        /// Stream the rows (first dim) of the .npy inputs through the model in batches of N
        /// rows, in flat memory: a symbolic batch dim is bound to N (the other free dims to
        /// the files' rows, unless --shape binds them) and the last batch runs on a program compiled for its rows; a fixed batch
        /// dim is used as is, the last batch padded. `auto` = the largest N whose arena +
        /// weights + staging fit --memory-limit. Outputs go to --output-dir as batches
        /// finish.
        #[arg(long, value_name = "N|auto")]
        batch: Option<String>,
        /// With --batch: show a progress bar on stderr (rows done/total, rows/s, ETA) even
        /// when stderr is not a terminal (then as a line every second). Default: a bar when
        /// stderr is a terminal.
        #[arg(long, overrides_with = "no_progress")]
        progress: bool,
        /// With --batch: no progress bar.
        #[arg(long, overrides_with = "progress")]
        no_progress: bool,
    },
    /// The ops table: per op, opsets, dtypes and ONNX node tests passing (from the manifest).
    Ops,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut out = String::new();
    let result = run(cli, &mut out);
    // A closed pipe (`arenac ops | head`) is not an error worth a panic: ignore write failures.
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one command, appending what it prints to `out` (formatting into a String cannot fail).
fn run(cli: Cli, out: &mut String) -> anyhow::Result<()> {
    match cli.command {
        Command::Compile {
            model,
            shapes,
            memory_limit,
            print_ir,
            build,
        } => {
            let opts = build
                .options(&shapes, memory_limit.as_deref(), false)?
                .without_codegen();
            let start = Instant::now();
            let compiled = compile_file(&model, &opts)?;
            let elapsed = start.elapsed();
            for w in compiled.warnings() {
                eprintln!("warning: {w}");
            }
            if print_ir {
                out.push_str(&compiled.print_ir());
            }
            let g = compiled.graph();
            let s = compiled.summary();
            let describe = |ids: &[ValueId]| -> String {
                ids.iter()
                    .map(|&v| format!("{} {}", g.value(v).name, g.value(v).ty))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                out,
                "model:   {} (graph \"{}\", opset {})",
                model.display(),
                g.name,
                g.opset
            );
            let _ = writeln!(out, "inputs:  {}", describe(&g.inputs));
            let _ = writeln!(out, "outputs: {}", describe(&g.outputs));
            let _ = writeln!(out, "nodes:   {}   values: {}", s.nodes, s.values);
            let _ = writeln!(
                out,
                "weights: {} in {} tensors",
                bytes(s.weights_bytes),
                s.weight_tensors
            );
            let _ = writeln!(
                out,
                "intermediates (naive sum, no reuse): {}",
                bytes(s.naive_intermediate_bytes)
            );
            let _ = writeln!(
                out,
                "arena:   {} (lower bound {})",
                bytes(s.arena_bytes),
                bytes(s.arena_lower_bound_bytes)
            );
            if let Some(w) = &s.weights_storage {
                out.push_str(&w.to_text(20));
            }
            if let Some(a) = &s.activations_storage {
                out.push_str(&a.to_text(20));
            }
            if let Some(p) = &s.patches {
                let _ = writeln!(out, "patches: {}", p.describe(s.arena_bytes));
            }
            let _ = writeln!(out, "compiled in {:.1} ms", elapsed.as_secs_f64() * 1e3);
        }
        Command::Plan {
            model,
            shapes,
            memory_limit,
            keep_order,
            no_fuse,
            json,
            svg,
            build,
        } => {
            let mut opts = build
                .options(&shapes, memory_limit.as_deref(), keep_order)?
                .without_codegen();
            opts.fuse = !no_fuse;
            let compiled = compile_file(&model, &opts)?;
            for w in compiled.warnings() {
                eprintln!("warning: {w}");
            }
            let report = compiled.plan_report();
            if json {
                out.push_str(&report.to_json());
                out.push('\n');
            } else {
                let _ = writeln!(out, "model: {}", model.display());
                out.push_str(&report.to_text());
            }
            if let Some(file) = svg {
                std::fs::write(&file, compiled.plan_svg())
                    .map_err(|source| arenac::Error::Io { path: file, source })?;
            }
        }
        Command::Run {
            model,
            shapes,
            inputs,
            output_dir,
            repeat,
            labels,
            memory_limit,
            no_fuse,
            build,
            profile,
            batch,
            progress,
            no_progress,
        } => {
            let mut opts = build.options(&shapes, memory_limit.as_deref(), false)?;
            opts.fuse = !no_fuse;
            if let Some(batch) = batch {
                if repeat != 1 || profile.is_some() {
                    bail!("--batch streams every row once: --repeat and --profile do not apply");
                }
                let job = stream_cli::Job {
                    model: &model,
                    opts,
                    inputs: &inputs,
                    batch: &batch,
                    output_dir: output_dir.as_deref(),
                    labels: labels.as_deref(),
                    progress: match (progress, no_progress) {
                        (true, _) => Some(true),
                        (_, true) => Some(false),
                        _ => None,
                    },
                };
                return stream_cli::run(job, out);
            }
            opts.profile = profile.is_some();
            run_model(
                &model,
                opts,
                &inputs,
                RunOutputs {
                    dir: output_dir.as_deref(),
                    labels: labels.as_deref(),
                    profile: profile.as_deref(),
                },
                repeat,
                out,
            )?;
        }
        Command::Ops => {
            // The README's table: ONNX's node tests per op, from the conformance manifest.
            let entries = arenac::conformance::parse_manifest(arenac::conformance::MANIFEST)
                .map_err(|e| anyhow::anyhow!("internal: {e}"))?;
            let _ = write!(out, "{}", arenac::conformance::ops_markdown(&entries));
            let tested: std::collections::BTreeSet<&str> =
                entries.iter().map(|e| e.op.as_str()).collect();
            let untested: Vec<String> = supported_ops()
                .into_iter()
                .filter(|o| !tested.contains(o.op_type))
                .map(|o| format!("{} {}-{}", o.op_type, o.since, o.until))
                .collect();
            if !untested.is_empty() {
                let _ = writeln!(
                    out,
                    "\nAlso imported (no ONNX node test): {}",
                    untested.join(", ")
                );
            }
        }
    }
    Ok(())
}

/// `--activations`: a storage type, or a message listing the choices.
fn parse_activations(s: &str) -> Result<ActType, String> {
    ActType::parse(s).ok_or_else(|| {
        format!("unknown activations type '{s}': use f32, f16 or bf16 (e.g. --activations f16)")
    })
}

/// `--weights`: a storage type, or a message listing the choices.
fn parse_weights(s: &str) -> Result<WeightType, String> {
    WeightType::parse(s).ok_or_else(|| {
        format!("unknown weights type '{s}': use f32, f16, bf16 or int8 (e.g. --weights bf16)")
    })
}

/// Compile options from the CLI's `--shape`, `--memory-limit`, `--keep-order` and
/// `--threads`.
fn options(
    shapes: &[String],
    memory_limit: Option<&str>,
    keep_file_order: bool,
    threads: Option<u32>,
) -> Result<CompileOptions, arenac::Error> {
    let mut opts = CompileOptions {
        keep_file_order,
        // `ARENAC_KEEP_MEMORY=1` keeps what compiling touched resident (to compare).
        release_memory: std::env::var_os("ARENAC_KEEP_MEMORY").is_none_or(|v| v == "0"),
        ..CompileOptions::default()
    };
    if let Some(t) = threads {
        opts = opts.with_threads(t as usize);
    }
    for spec in shapes {
        let (name, dims) = parse_shape_spec(spec)?;
        opts = opts.with_shape(name, dims);
    }
    if let Some(limit) = memory_limit {
        opts = opts.with_memory_limit(limit)?;
    }
    Ok(opts)
}

/// `0.123 ms` / `12.3 ms` / `1.234 s`.
pub(crate) fn duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 1.0 {
        format!("{ms:.3} ms")
    } else if ms < 1000.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{:.3} s", ms / 1e3)
    }
}

/// `12,345,678 bytes (11.8 MiB)`.
pub(crate) fn bytes(n: usize) -> String {
    let digits = n.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let mib = n as f64 / (1024.0 * 1024.0);
    format!("{grouped} bytes ({mib:.1} MiB)")
}
