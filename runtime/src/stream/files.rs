//! Streaming between files: `.npy` inputs (and labels) mapped, outputs written as
//! `DIR/output_<i>.npy` batch by batch: what `arenac run --batch` does.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::drain::Drain;
use super::{
    AutoBatch, BatchRunner, MappedNpy, NpyRowWriter, RowSink, StreamError, auto_batch,
    bind_row_dims, staging_bytes,
};
use crate::CompileOptions;
use crate::session::TensorRef;

/// A streaming job over files.
pub struct FileJob<'a> {
    /// The `.onnx` file.
    pub model: &'a Path,
    /// Compile options (the memory limit also bounds `--batch auto`).
    pub opts: CompileOptions,
    /// `(graph input name, .npy file)` for every input.
    pub inputs: Vec<(String, PathBuf)>,
    /// Rows per batch; `None` picks it ([`auto_batch`]).
    pub batch: Option<usize>,
    /// Where `output_<i>.npy` go; `None` writes nothing.
    pub output_dir: Option<&'a Path>,
    /// Integer labels, one per row: top-1 accuracy of output 0.
    pub labels: Option<&'a Path>,
    /// Called with `(rows done, rows)` after each batch.
    pub progress: Option<&'a mut dyn FnMut(usize, usize)>,
}

/// What a streaming job did.
#[derive(Clone, Debug)]
pub struct FileReport {
    /// Rows run.
    pub rows: usize,
    /// Rows per batch used.
    pub batch: usize,
    /// The batch asked for (`None`: auto).
    pub asked: Option<usize>,
    /// The model fixes its batch (ran at its own, whatever was asked).
    pub fixed_batch: bool,
    /// How `--batch auto` chose.
    pub auto: Option<AutoBatch>,
    /// Batches run.
    pub batches: usize,
    /// Time running, from the first batch until every output file is flushed, synced and
    /// renamed (compiling the main program excluded; a tail program's compile included).
    pub elapsed: Duration,
    /// Time compiling the program that ran (the auto search excluded).
    pub compile_time: Duration,
    /// The session's arena bytes.
    pub arena_bytes: usize,
    /// The model's weight bytes.
    pub weights_bytes: usize,
    /// Staging at the batch used ([`super::staging_bytes`]): what the run holds besides
    /// arena + weights.
    pub staging_bytes: usize,
    /// Arena + weights of the tail program, when the last batch ran on one; it replaced the
    /// main program (never both at once).
    pub tail_plan_bytes: Option<usize>,
    /// Outputs written: `(graph output name, file)`.
    pub written: Vec<(String, PathBuf)>,
    /// `(correct, rows)` with labels.
    pub accuracy: Option<(usize, usize)>,
}

/// Runs a [`FileJob`]. Every check (file formats, row counts, labels, the output directory,
/// the batch) happens before the first batch runs; on any error no `output_<i>.npy` is
/// written (partial files are removed).
pub fn run_files(job: FileJob<'_>) -> Result<FileReport, StreamError> {
    let mut mapped = Vec::with_capacity(job.inputs.len());
    for (name, file) in &job.inputs {
        mapped.push((name.as_str(), open_npy(file, &format!("input '{name}'"))?));
    }
    let rows = mapped.first().map_or(0, |(_, m)| m.rows());
    if mapped.iter().any(|(_, m)| m.rows() != rows) {
        let counts: Vec<String> = mapped
            .iter()
            .map(|(n, m)| format!("'{n}' {} rows ({})", m.rows(), m.path().display()))
            .collect();
        return Err(StreamError::Input(format!(
            "inputs have different row counts (first dims): {}",
            counts.join(", ")
        )));
    }
    let labels = match job.labels {
        Some(path) => Some(open_labels(path, rows)?),
        None => None,
    };
    let named: Vec<(&str, &MappedNpy)> = mapped.iter().map(|(n, m)| (*n, m)).collect();
    // Free dims past the batch (`H`, `W`...) from the files, unless --shape binds them.
    let opts = bind_row_dims(job.model, &job.opts, &named)?;
    let auto = match job.batch {
        Some(_) => None,
        None => {
            // The labels' batch buffer is counted as one more input (twice: conservative).
            let label_bytes = labels.as_ref().map_or(0, MappedNpy::row_bytes);
            let row_bytes = mapped.iter().map(|(_, m)| m.row_bytes()).sum::<usize>() + label_bytes;
            Some(auto_batch(job.model, &opts, row_bytes, rows)?)
        }
    };
    let batch = job.batch.or(auto.as_ref().map(|a| a.batch)).unwrap_or(1);
    let started = Instant::now();
    let mut runner = BatchRunner::new(job.model, &opts, batch)?;
    let compile_time = started.elapsed();

    let mut writers = Vec::new();
    if let Some(dir) = job.output_dir {
        std::fs::create_dir_all(dir).map_err(|source| crate::io::IoError::Io {
            what: "write",
            path: dir.to_path_buf(),
            source,
        })?;
        for (i, o) in runner.outputs().iter().enumerate() {
            let path = dir.join(format!("output_{i}.npy"));
            writers.push(NpyRowWriter::create(&path, o.dtype, &o.row_shape, rows)?);
        }
    }
    let drain = if writers.is_empty() {
        None
    } else {
        Some(Drain::start(writers)?)
    };
    let mut sink = FileSink {
        drain,
        labels: labels.as_ref(),
        label_buf: Vec::new(),
        correct: 0,
        rows,
        progress: job.progress,
    };
    let running = Instant::now();
    let stats = runner.run(&named, &mut sink)?;
    let (correct, has_labels) = (sink.correct, sink.labels.is_some());
    let mut written = Vec::new();
    let writers = match sink.drain {
        Some(d) => d.finish()?,
        None => Vec::new(),
    };
    for (w, o) in writers.into_iter().zip(runner.outputs()) {
        written.push((o.name.clone(), w.finish()?));
    }
    Ok(FileReport {
        rows,
        batch: stats.batch,
        asked: job.batch,
        fixed_batch: runner.fixed_batch(),
        auto,
        batches: stats.batches,
        elapsed: running.elapsed(),
        compile_time,
        arena_bytes: runner.arena_bytes(),
        weights_bytes: runner.weights_bytes(),
        staging_bytes: staging_bytes(
            stats.batch,
            runner.inputs().iter().map(|s| s.row_bytes).sum(),
            runner.outputs().iter().map(|s| s.row_bytes).sum(),
        ),
        tail_plan_bytes: stats.tail_plan_bytes,
        written,
        accuracy: has_labels.then_some((correct, rows)),
    })
}

/// Maps a `.npy` file; any other extension is a clear error (only `.npy` streams by rows).
fn open_npy(file: &Path, what: &str) -> Result<MappedNpy, StreamError> {
    if !file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
    {
        return Err(StreamError::Input(format!(
            "{what}: {} is not a .npy file; --batch streams rows of .npy files only (save the \
             array with np.save, e.g. from onnx.numpy_helper.to_array of a .pb), or run \
             without --batch",
            file.display()
        )));
    }
    Ok(MappedNpy::open(file)?)
}

/// Maps the labels: integers, `[rows]` or `[rows, 1]`.
fn open_labels(path: &Path, rows: usize) -> Result<MappedNpy, StreamError> {
    let m = open_npy(path, "--labels")?;
    if !m.dtype().is_int() {
        return Err(StreamError::Input(format!(
            "{}: labels must be integers (int8 to int64, uint8 to uint64), not {}",
            path.display(),
            m.dtype()
        )));
    }
    if m.rows() != rows || m.row_shape().iter().product::<usize>() != 1 {
        return Err(StreamError::Input(format!(
            "{}: {} labels of shape {:?} for {rows} input rows (want one label per row)",
            path.display(),
            m.rows(),
            m.shape()
        )));
    }
    Ok(m)
}

/// The CLI's sink: writers, the label count, progress.
struct FileSink<'l, 'a> {
    drain: Option<Drain>,
    labels: Option<&'l MappedNpy>,
    /// One batch of labels, read with `pread` (no page of the labels' map becomes resident:
    /// faulting them in kept about 4 MiB resident at large batches).
    label_buf: Vec<u8>,
    correct: usize,
    rows: usize,
    progress: Option<&'a mut dyn FnMut(usize, usize)>,
}

impl RowSink for FileSink<'_, '_> {
    fn write_rows(
        &mut self,
        output: usize,
        first_row: usize,
        rows: TensorRef<'_>,
    ) -> Result<(), StreamError> {
        if let Some(d) = self.drain.as_mut() {
            d.send(output, rows.bytes())?;
        }
        if output == 0
            && let Some(labels) = self.labels
        {
            let n = rows.shape().first().copied().unwrap_or(1);
            let classes = rows.numel().checked_div(n).unwrap_or(0);
            let lb = labels.row_bytes();
            // Sized once, at the first (largest) batch: later batches reuse it.
            self.label_buf.resize(n * lb, 0);
            labels.read_rows(first_row..first_row + n, &mut self.label_buf)?;
            for r in 0..n {
                let predicted = (0..classes).max_by(|&a, &b| {
                    let v = |c: usize| rows.get_f32(r * classes + c).unwrap_or(f32::NAN);
                    v(a).total_cmp(&v(b)).then(b.cmp(&a))
                });
                let label = self
                    .label_buf
                    .get(r * lb..(r + 1) * lb)
                    .and_then(|b| TensorRef::from_bytes(labels.dtype(), &[1], b).ok())
                    .and_then(|t| t.get_f32(0));
                if let (Some(p), Some(l)) = (predicted, label)
                    && p as f32 == l
                {
                    self.correct += 1;
                }
            }
        }
        Ok(())
    }

    fn batch_done(&mut self, rows_done: usize) {
        if let Some(l) = self.labels {
            // Read with pread: only the page cache holds them; drop what is behind.
            l.drop_cached(0..rows_done);
        }
        if let Some(p) = self.progress.as_mut() {
            p(rows_done, self.rows);
        }
    }
}

/// The process's peak resident set (`VmHWM` of `/proc/self/status`) in bytes; `None` where
/// it cannot be read.
pub fn peak_rss_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: usize = line["VmHWM:".len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kb.checked_mul(1024)
}
