//! The `arenac` command line: `arenac compile MODEL [--shape NAME=DxD...] [--print-ir]` and
//! `arenac ops`.

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
        /// Print the typed IR after import and folding.
        #[arg(long)]
        print_ir: bool,
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
            print_ir,
        } => {
            let mut opts = CompileOptions::default();
            for spec in &shapes {
                let (name, dims) = parse_shape_spec(spec)?;
                opts = opts.with_shape(name, dims);
            }
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
            let _ = writeln!(out, "compiled in {:.1} ms", elapsed.as_secs_f64() * 1e3);
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
