//! `arenac run --batch N|auto`: the rows of `.npy` inputs streamed through the model
//! (`arenac::stream::run_files`), and the closing summary. (A module of the `arenac` binary.)

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail};
use arenac::CompileOptions;
use arenac::io::input_spec::split_input_spec;
use arenac::stream::{FileJob, peak_rss_bytes, run_files};

use super::run_cli::graph_input_names;
use super::{bytes, duration};

/// The arguments of a streaming `arenac run`.
pub struct Job<'a> {
    pub model: &'a Path,
    pub opts: CompileOptions,
    /// `--input` specs.
    pub inputs: &'a [String],
    /// `--batch`: a count or `auto`.
    pub batch: &'a str,
    pub output_dir: Option<&'a Path>,
    pub labels: Option<&'a Path>,
    /// `--progress` (`Some(true)`), `--no-progress` (`Some(false)`), or neither: a bar when
    /// stderr is a terminal.
    pub progress: Option<bool>,
}

/// Progress on stderr: an indicatif bar on a terminal, a line a second when forced
/// elsewhere.
enum Progress {
    Bar(indicatif::ProgressBar),
    Lines { started: Instant, last: Instant },
}

impl Progress {
    fn new(wanted: Option<bool>) -> Option<Progress> {
        let terminal = std::io::stderr().is_terminal();
        match (wanted, terminal) {
            (Some(false), _) | (None, false) => None,
            (_, true) => {
                let bar = indicatif::ProgressBar::new(0);
                let style = indicatif::ProgressStyle::with_template(
                    "{bar:40} {pos}/{len} rows  {per_sec}  ETA {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
                bar.set_style(style);
                Some(Progress::Bar(bar))
            }
            (Some(true), false) => Some(Progress::Lines {
                started: Instant::now(),
                last: Instant::now(),
            }),
        }
    }

    fn update(&mut self, done: usize, total: usize) {
        match self {
            Progress::Bar(bar) => {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            }
            Progress::Lines { started, last } => {
                if last.elapsed().as_secs_f64() >= 1.0 || done == total {
                    *last = Instant::now();
                    let secs = started.elapsed().as_secs_f64();
                    let rate = if secs > 0.0 { done as f64 / secs } else { 0.0 };
                    eprintln!("progress: {done}/{total} rows ({rate:.0} rows/s)");
                }
            }
        }
    }

    fn finish(self) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

/// Runs the job and appends its summary to `out`.
pub fn run(job: Job<'_>, out: &mut String) -> anyhow::Result<()> {
    let batch = match job.batch.trim() {
        "auto" => None,
        n => match n.parse::<usize>() {
            Ok(n) if n >= 1 => Some(n),
            _ => bail!("--batch {n}: expected a row count of at least 1, or auto"),
        },
    };
    if job.inputs.is_empty() {
        bail!("--batch streams the rows of input files: give every input as --input NAME=FILE.npy");
    }
    let names = graph_input_names(job.model)?;
    let mut inputs: Vec<(String, PathBuf)> = Vec::new();
    let mut positional = names.iter();
    for spec in job.inputs {
        let split =
            split_input_spec(spec, &names, |p| Path::new(p).is_file()).map_err(|e| anyhow!(e))?;
        let name = match split.name {
            Some(n) => n.to_string(),
            None => positional.next().cloned().ok_or_else(|| {
                anyhow!(
                    "--input {}: the model has only {} input(s) ({})",
                    split.file,
                    names.len(),
                    names.join(", ")
                )
            })?,
        };
        if inputs.iter().any(|(n, _)| *n == name) {
            bail!("input '{name}' is given twice (--input)");
        }
        inputs.push((name, PathBuf::from(split.file)));
    }
    let mut progress = Progress::new(job.progress);
    let mut update = |done: usize, total: usize| {
        if let Some(p) = progress.as_mut() {
            p.update(done, total);
        }
    };
    let report = run_files(FileJob {
        model: job.model,
        opts: job.opts,
        inputs: inputs.clone(),
        batch,
        output_dir: job.output_dir,
        labels: job.labels,
        progress: Some(&mut update),
    });
    if let Some(p) = progress {
        p.finish();
    }
    let report = report?;

    let r = &report;
    let _ = writeln!(out, "model:   {}", job.model.display());
    for (name, file) in &inputs {
        let _ = writeln!(out, "input:   {name} ({})", file.display());
    }
    let how = match (&r.auto, r.fixed_batch, r.asked) {
        (_, true, asked) => format!(
            "the model fixes its batch{}",
            asked
                .filter(|&a| a != r.batch)
                .map_or(String::new(), |a| format!("; --batch {a} not used"))
        ),
        (Some(a), _, _) => format!(
            "auto: arena + weights {} + staging {} = {} fit {}",
            mib(a.plan_bytes),
            mib(a.staging_bytes),
            bytes(a.plan_bytes + a.staging_bytes),
            a.limit.source
        ),
        (None, _, _) => "--batch".to_string(),
    };
    let _ = writeln!(out, "batch:   {} rows ({how})", r.batch);
    let tail = match (r.rows % r.batch, r.fixed_batch) {
        (0, _) => String::new(),
        (t, true) => format!("; the last has {t} rows, padded to {}", r.batch),
        (t, false) => format!("; the last has {t} rows, run by a program compiled for {t}"),
    };
    let _ = writeln!(
        out,
        "rows:    {} in {} batch{}{tail}",
        r.rows,
        r.batches,
        if r.batches == 1 { "" } else { "es" }
    );
    let secs = r.elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        r.rows as f64 / secs
    } else {
        0.0
    };
    let _ = writeln!(out, "time:    {} ({rate:.0} rows/s)", duration(r.elapsed));
    let _ = writeln!(out, "arena:   {}", bytes(r.arena_bytes));
    let _ = writeln!(out, "weights: {}", bytes(r.weights_bytes));
    let _ = writeln!(
        out,
        "staging: {} (reader: 2 batches of input rows, writer: 2 of output rows)",
        bytes(r.staging_bytes)
    );
    if let Some(t) = r.tail_plan_bytes {
        let _ = writeln!(
            out,
            "tail:    arena + weights {} (the tail program replaced the main one's {})",
            bytes(t),
            bytes(r.arena_bytes + r.weights_bytes)
        );
    }
    if let Some(peak) = peak_rss_bytes() {
        let _ = writeln!(out, "peak RSS: {} (VmHWM)", bytes(peak));
    }
    let _ = writeln!(out, "compiled in {}", duration(r.compile_time));
    if let Some(dir) = job.output_dir {
        let files: Vec<String> = r
            .written
            .iter()
            .map(|(name, path)| {
                let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
                format!("{} ({name})", file.unwrap_or_default())
            })
            .collect();
        let _ = writeln!(
            out,
            "wrote {} output(s) to {}: {}",
            r.written.len(),
            dir.display(),
            files.join(", ")
        );
    }
    if let Some((correct, rows)) = r.accuracy {
        let pct = if rows == 0 {
            0.0
        } else {
            100.0 * correct as f64 / rows as f64
        };
        let _ = writeln!(out, "accuracy: {correct}/{rows} ({pct:.1}%)");
    }
    Ok(())
}

fn mib(n: usize) -> String {
    format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
}
