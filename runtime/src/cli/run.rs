//! `arenac run` on whole inputs (not `--batch`): read or make the inputs, compile, run,
//! report, write outputs, check labels, write a profile. (A module of the `arenac` binary.)

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail};
use arenac::io::input_spec::split_input_spec;
use arenac::io::{TensorBuf, npy, read_tensor_file, write_output_file};
use arenac::{CompileOptions, DType, IoSlot, TensorRef, compile_file};
use arenac_compiler::ir::lowp::{self, CastMode};

use super::{bytes, duration};

/// One `--input` argument, read.
pub(super) struct GivenInput {
    /// `NAME=` part; `None` for a positional input.
    name: Option<String>,
    file: PathBuf,
    tensor: TensorBuf,
}

/// What `arenac run` writes or checks besides its summary.
pub(super) struct RunOutputs<'a> {
    /// `--output-dir`.
    pub dir: Option<&'a Path>,
    /// `--labels`.
    pub labels: Option<&'a Path>,
    /// `--profile`.
    pub profile: Option<&'a Path>,
}

/// `arenac run`: read inputs, compile (their shapes bind the symbolic dims), run, report.
pub(super) fn run_model(
    model: &Path,
    mut opts: CompileOptions,
    input_specs: &[String],
    wanted: RunOutputs<'_>,
    repeat: u32,
    out: &mut String,
) -> anyhow::Result<()> {
    let RunOutputs {
        dir: output_dir,
        labels,
        profile: profile_file,
    } = wanted;
    // Read every input (and the labels) before compiling: a bad file fails fast. The
    // model's input names tell NAME=FILE from a file (names may hold '/', ':' or '=').
    let names = if input_specs.is_empty() {
        Vec::new()
    } else {
        graph_input_names(model)?
    };
    let mut given = Vec::new();
    for spec in input_specs {
        let split =
            split_input_spec(spec, &names, |p| Path::new(p).is_file()).map_err(|e| anyhow!(e))?;
        let file = PathBuf::from(split.file);
        let (tensor, _) = read_tensor_file(&file)?;
        given.push(GivenInput {
            name: split.name.map(str::to_string),
            file,
            tensor,
        });
    }
    let labels = labels.map(read_labels).transpose()?;

    // Positional inputs take the graph's input names in order.
    if given.iter().any(|g| g.name.is_none()) {
        for (k, g) in given.iter_mut().filter(|g| g.name.is_none()).enumerate() {
            let name = names.get(k).ok_or_else(|| {
                anyhow!(
                    "--input {}: the model has only {} input(s) ({}), this is input #{}",
                    g.file.display(),
                    names.len(),
                    names.join(", "),
                    k + 1
                )
            })?;
            g.name = Some(name.clone());
        }
    }
    let name_of = |g: &GivenInput| g.name.clone().unwrap_or_default();
    for (i, g) in given.iter().enumerate() {
        if given[..i].iter().any(|h| name_of(h) == name_of(g)) {
            bail!("input '{}' is given twice (--input)", name_of(g));
        }
        // The value binds the shape, and freezes the input when it decides a shape.
        opts = opts.with_value(name_of(g), g.tensor.view());
    }

    arenac::memtrace::mark("inputs read");
    let start = Instant::now();
    let compiled = compile_file(model, &opts).map_err(|e| with_input_hint(e, model))?;
    let compile_time = start.elapsed();
    for w in compiled.warnings() {
        eprintln!("warning: {w}");
    }
    let mut session = compiled.session()?;
    arenac::memtrace::mark("session");

    let random: Vec<(String, TensorBuf)> = if given.is_empty() {
        session
            .inputs()
            .iter()
            .enumerate()
            .map(|(i, slot)| (slot.name.clone(), random_input(slot, i as u64)))
            .collect()
    } else {
        Vec::new()
    };
    // Frozen inputs are compiled in as constants: not inputs of the session any more.
    let is_frozen = |name: &str| compiled.frozen().iter().any(|f| f.name == name);
    for f in compiled.frozen() {
        eprintln!(
            "warning: input '{}' is frozen: its value is compiled in as a constant, so this \
             compiled program is only right for that value ({})",
            f.name,
            f.reason()
        );
    }
    let named: Vec<(&str, TensorRef<'_>)> = if given.is_empty() {
        random.iter().map(|(n, t)| (n.as_str(), t.view())).collect()
    } else {
        given
            .iter()
            .map(|g| (g.name.as_deref().unwrap_or(""), g.tensor.view()))
            .filter(|(n, _)| !is_frozen(n))
            .collect()
    };

    let arena_bytes = session.arena_bytes();
    let threads = session.threads();
    let mut profile = match profile_file {
        Some(_) => Some(arenac::Profile::for_model(&compiled, repeat as usize)?),
        None => None,
    };
    let mut times = Vec::with_capacity(repeat as usize);
    for _ in 1..repeat {
        let t = Instant::now();
        match profile.as_mut() {
            Some(p) => session.run_profiled(&named, p)?,
            None => session.run(&named)?,
        };
        times.push(t.elapsed());
    }
    let t = Instant::now();
    let outputs = match profile.as_mut() {
        Some(p) => session.run_profiled(&named, p)?,
        None => session.run(&named)?,
    };
    times.push(t.elapsed());
    arenac::memtrace::mark("ran");
    times.sort();
    let median = times[times.len() / 2];

    let g = compiled.graph();
    let _ = writeln!(out, "model:   {} (graph \"{}\")", model.display(), g.name);
    for (name, t) in &named {
        let source = given
            .iter()
            .find(|g| g.name.as_deref() == Some(name))
            .map(|g| g.file.display().to_string())
            .unwrap_or_else(|| "random, seeded".to_string());
        let _ = writeln!(out, "input:   {name} {} ({source})", t.ty());
    }
    for f in compiled.frozen() {
        let _ = writeln!(
            out,
            "frozen:  {} {} (compiled in as a constant: the program is specific to this \
             value; {})",
            f.name,
            f.ty,
            f.reason()
        );
    }
    for (i, (name, t)) in outputs.iter().enumerate() {
        let _ = writeln!(out, "output {i}: {name} {}", t.ty());
    }
    let _ = writeln!(
        out,
        "time per run: {} (median of {} run{}, {} thread{})",
        duration(median),
        times.len(),
        if times.len() == 1 { "" } else { "s" },
        threads,
        if threads == 1 { "" } else { "s" }
    );
    let s = compiled.summary();
    let _ = writeln!(out, "arena:   {}", bytes(arena_bytes));
    match &s.weights_storage {
        Some(w) => out.push_str(&w.to_text(10)),
        None => {
            let _ = writeln!(out, "weights: {}", bytes(s.weights_bytes));
        }
    }
    if let Some(a) = &s.activations_storage {
        out.push_str(&a.to_text(10));
    }
    if let Some(p) = &s.patches {
        let _ = writeln!(out, "patches: {}", p.describe(arena_bytes));
    }
    let t = compiled.compile_timings();
    let _ = writeln!(
        out,
        "compiled in {} (import {}, plan {}, code generation {} of which Cranelift {})",
        duration(compile_time),
        duration(t.import),
        duration(t.plan),
        duration(t.codegen),
        duration(t.jit)
    );
    if let (Some(p), Some(file)) = (&profile, profile_file) {
        std::fs::write(file, p.to_trace_json())
            .map_err(|e| anyhow!("--profile: cannot write {}: {e}", file.display()))?;
        out.push_str(&p.summary().to_text());
        let dropped = match p.dropped_runs() {
            0 => String::new(),
            d => format!(
                "; {d} later run(s) not kept (at most {} node events)",
                arenac::profile::MAX_EVENTS
            ),
        };
        let _ = writeln!(
            out,
            "wrote profile of {} run(s) to {} (Chrome trace: ui.perfetto.dev or chrome://tracing){dropped}",
            p.runs(),
            file.display()
        );
    }

    if let Some(dir) = output_dir {
        std::fs::create_dir_all(dir).map_err(|source| arenac::Error::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut as_pb = Vec::new();
        for (i, (name, t)) in outputs.iter().enumerate() {
            let path = write_output_file(dir, &format!("output_{i}"), name, t)?;
            if path.extension().is_some_and(|e| e == "pb") {
                as_pb.push(format!("output_{i}.pb ({name} {})", t.ty()));
            }
        }
        let _ = write!(
            out,
            "wrote {} output(s) to {}",
            outputs.len(),
            dir.display()
        );
        if !as_pb.is_empty() {
            let _ = write!(
                out,
                "; as ONNX TensorProto .pb, numpy having no dtype for them: {}",
                as_pb.join(", ")
            );
        }
        out.push('\n');
    }

    if let Some(labels) = labels {
        let first = outputs
            .get(0)
            .ok_or_else(|| anyhow!("--labels: the model has no output"))?;
        // One row per leading index; a scalar or a single vector of scores is one row.
        let rows = match first.shape() {
            [] => 1,
            [_] if labels.len() == 1 => 1,
            [n, ..] => *n,
        };
        if labels.len() != rows {
            bail!(
                "--labels: {} labels for the {rows} rows of output '{}' {}",
                labels.len(),
                outputs.names().next().unwrap_or_default(),
                first.ty()
            );
        }
        let classes = first.numel().checked_div(rows).unwrap_or(0);
        let predicted: Vec<usize> = (0..rows)
            .map(|r| {
                (0..classes)
                    .max_by(|&a, &b| {
                        let v = |c: usize| first.get_f32(r * classes + c).unwrap_or(f32::NAN);
                        v(a).total_cmp(&v(b)).then(b.cmp(&a))
                    })
                    .unwrap_or(0)
            })
            .collect();
        let shown: Vec<String> = predicted.iter().take(20).map(usize::to_string).collect();
        let more = if rows > 20 { " …" } else { "" };
        let _ = writeln!(out, "predicted: {}{more}", shown.join(" "));
        let correct = predicted
            .iter()
            .zip(&labels)
            .filter(|&(&p, &l)| i64::try_from(p).ok() == Some(l))
            .count();
        let pct = if rows == 0 {
            0.0
        } else {
            100.0 * correct as f64 / rows as f64
        };
        let _ = writeln!(out, "accuracy: {correct}/{rows} ({pct:.1}%)");
    }
    Ok(())
}

/// Reads `--labels`: an integer `.npy`, one label per row.
fn read_labels(path: &Path) -> anyhow::Result<Vec<i64>> {
    let t = npy::read_npy(path)?;
    if !t.dtype().is_int() {
        bail!(
            "{}: labels must be integers (int8 to int64, uint8 to uint64), not {}",
            path.display(),
            t.dtype()
        );
    }
    let v = t.view();
    Ok((0..v.numel())
        .map(|i| v.get_f32(i).map_or(0, |x| x as i64))
        .collect())
}

/// The graph's input names (initializers excluded), in order, read from the file.
/// A compile error, with a hint when a graph input decides a shape: `arenac run` can freeze it
/// from its value (`--input NAME=FILE`).
fn with_input_hint(e: arenac::Error, model: &Path) -> anyhow::Error {
    if let arenac::Error::Node {
        source: arenac_compiler::error::OpError::NotConstant { name, .. },
        ..
    } = &e
        && graph_input_names(model).is_ok_and(|names| names.contains(name))
    {
        return anyhow!(
            "{e}; '{name}' is a graph input: give its value with --input {name}=FILE (.npy or \
             .pb) and it is compiled in as a constant"
        );
    }
    e.into()
}

pub(crate) fn graph_input_names(model: &Path) -> anyhow::Result<Vec<String>> {
    let proto = arenac_compiler::import::load_model_file(model)?;
    let graph = proto
        .graph
        .as_ref()
        .ok_or_else(|| anyhow!("{}: the model has no graph", model.display()))?;
    let inits: std::collections::HashSet<&str> =
        graph.initializer.iter().map(|t| t.name()).collect();
    Ok(graph
        .input
        .iter()
        .map(|v| v.name().to_string())
        .filter(|n| !inits.contains(n.as_str()))
        .collect())
}

/// A seeded random tensor for `slot`: floats uniform in [-1, 1), integers and bools zero.
fn random_input(slot: &IoSlot, stream: u64) -> TensorBuf {
    let n = slot.ty.numel().unwrap_or(0);
    let mut state = 0x5EED_0000_0000_0000_u64 ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut next = || {
        // splitmix64
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut unit = || (next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
    let data: Vec<u8> = match slot.ty.dtype {
        DType::F32 => (0..n)
            .flat_map(|_| ((unit() as f32).clamp(-1.0, 0.999_999_94)).to_le_bytes())
            .collect(),
        DType::F64 => (0..n).flat_map(|_| unit().to_le_bytes()).collect(),
        DType::F16 => (0..n)
            .flat_map(|_| {
                half::f16::from_f64(unit())
                    .min(half::f16::from_f64(0.999))
                    .to_le_bytes()
            })
            .collect(),
        DType::BF16 => (0..n)
            .flat_map(|_| {
                half::bf16::from_f64(unit())
                    .min(half::bf16::from_f64(0.99))
                    .to_le_bytes()
            })
            .collect(),
        d if d.is_storage() && d.is_float() => (0..n)
            .map(|_| lowp::encode_float(d, unit() as f32, CastMode::DEFAULT))
            .collect(),
        d => vec![0; n * d.size()],
    };
    // Unreachable failure: every arm above produces exactly numel * dtype.size() bytes, the
    // length TensorBuf::new checks.
    TensorBuf::new(slot.ty.dtype, slot.ty.shape.clone(), data)
        .expect("random data has the slot's size")
}
