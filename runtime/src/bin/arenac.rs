//! The `arenac` command line: `arenac compile MODEL [--shape NAME=DxD...] [--memory-limit X]
//! [--print-ir]`, `arenac plan MODEL [--shape ...] [--memory-limit X] [--keep-order] [--json]
//! [--svg FILE]` and `arenac ops`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use arenac::{CompileOptions, compile_file, parse_shape_spec, supported_ops};
use arenac_compiler::ir::graph::ValueId;
use clap::{Parser, Subcommand};

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

#[derive(Subcommand)]
enum Command {
    /// Import a model, infer every value's shape, fold constants, and print a summary.
    Compile {
        /// The .onnx file.
        model: PathBuf,
        /// Bind an input's shape (NAME=1x3x224x224) or a symbolic dim (N=8). Repeatable.
        #[arg(long = "shape", value_name = "NAME=DxD")]
        shapes: Vec<String>,
        /// Cap on arena + weights (64MiB, 1.5GiB, 500MB, 123456, or 10% of physical RAM);
        /// compiling fails when the plan needs more. Default: the physical RAM.
        #[arg(long, value_name = "X")]
        memory_limit: Option<String>,
        /// Print the typed IR after import and folding.
        #[arg(long)]
        print_ir: bool,
    },
    /// Plan the arena and report it: sizes, bounds, the peak and a per-buffer table.
    Plan {
        /// The .onnx file.
        model: PathBuf,
        /// Bind an input's shape (NAME=1x3x224x224) or a symbolic dim (N=8). Repeatable.
        #[arg(long = "shape", value_name = "NAME=DxD")]
        shapes: Vec<String>,
        /// Cap on arena + weights (64MiB, 1.5GiB, 500MB, 123456, or 10% of physical RAM).
        #[arg(long, value_name = "X")]
        memory_limit: Option<String>,
        /// Run nodes in the file's order instead of the memory-aware schedule.
        #[arg(long)]
        keep_order: bool,
        /// Print the report as JSON (schema: docs/PLAN-REPORT.md) instead of text.
        #[arg(long)]
        json: bool,
        /// Also write the arena as an SVG picture to FILE.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
    },
    /// List the supported ops with their opset ranges.
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
fn run(cli: Cli, out: &mut String) -> Result<(), arenac::Error> {
    match cli.command {
        Command::Compile {
            model,
            shapes,
            memory_limit,
            print_ir,
        } => {
            let opts = options(&shapes, memory_limit.as_deref(), false)?;
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
            let _ = writeln!(out, "compiled in {:.1} ms", elapsed.as_secs_f64() * 1e3);
        }
        Command::Plan {
            model,
            shapes,
            memory_limit,
            keep_order,
            json,
            svg,
        } => {
            let opts = options(&shapes, memory_limit.as_deref(), keep_order)?;
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
        Command::Ops => {
            let ops = supported_ops();
            let _ = writeln!(out, "{} op types (default ONNX domain):", ops.len());
            for op in ops {
                let _ = writeln!(out, "  {:<24} opset {}..{}", op.op_type, op.since, op.until);
            }
        }
    }
    Ok(())
}

/// Compile options from the CLI's `--shape`, `--memory-limit` and `--keep-order`.
fn options(
    shapes: &[String],
    memory_limit: Option<&str>,
    keep_file_order: bool,
) -> Result<CompileOptions, arenac::Error> {
    let mut opts = CompileOptions {
        keep_file_order,
        ..CompileOptions::default()
    };
    for spec in shapes {
        let (name, dims) = parse_shape_spec(spec)?;
        opts = opts.with_shape(name, dims);
    }
    if let Some(limit) = memory_limit {
        opts = opts.with_memory_limit(limit)?;
    }
    Ok(opts)
}

/// `12,345,678 bytes (11.8 MiB)`.
fn bytes(n: usize) -> String {
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
