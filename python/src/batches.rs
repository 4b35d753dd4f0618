//! `run_batches`' native half: the batch size `batch="auto"` picks ([`arenac::stream::auto_batch`])
//! and the streaming run between `.npy` files ([`arenac::stream::run_files`]). In-memory arrays
//! are cut into batches by the Python side, which runs each through the session.

use std::path::PathBuf;

use arenac::CompileOptions;
use arenac::stream::{self, FileJob};
use pyo3::prelude::*;

use crate::errors::Failure;
use crate::session::Session;

/// What `run_files` did: rows, rows per batch, batches, and `(output name, file)` written.
type FilesReport = (usize, usize, usize, Vec<(String, PathBuf)>);

impl Session {
    fn batch_options(&self, memory_limit: Option<&str>) -> Result<CompileOptions, Failure> {
        let opts = self.options().clone();
        Ok(match memory_limit {
            Some(m) => opts.with_memory_limit(m)?,
            None => opts,
        })
    }
}

/// The largest batch (at most `rows`) whose arena + weights + staging fit the memory limit
/// (`memory_limit`, else the session's, else the physical RAM), for inputs of
/// `input_row_bytes` bytes a row. Fails with `MemoryLimitExceeded`-like `InvalidInput` when
/// not even one row fits.
#[pyfunction]
#[pyo3(signature = (session, input_row_bytes, rows, memory_limit=None))]
pub fn auto_batch(
    py: Python<'_>,
    session: &Bound<'_, Session>,
    input_row_bytes: usize,
    rows: usize,
    memory_limit: Option<String>,
) -> PyResult<usize> {
    let this = session.get();
    let batch = py.detach(|| -> Result<usize, Failure> {
        let opts = this.batch_options(memory_limit.as_deref())?;
        Ok(stream::auto_batch(this.path(), &opts, input_row_bytes, rows)?.batch)
    })?;
    Ok(batch)
}

/// Streams the rows of `.npy` files (`(input name, path)`) through the model in batches
/// of `batch` rows (`None`: the largest that fits the memory limit), writing one
/// `output_<i>.npy`-style file per output into `output_dir` (as `arenac run --batch`).
#[pyfunction]
#[pyo3(signature = (session, inputs, output_dir, batch=None, memory_limit=None))]
pub fn run_files(
    py: Python<'_>,
    session: &Bound<'_, Session>,
    inputs: Vec<(String, PathBuf)>,
    output_dir: PathBuf,
    batch: Option<usize>,
    memory_limit: Option<String>,
) -> PyResult<FilesReport> {
    let this = session.get();
    let report = py.detach(|| -> Result<FilesReport, Failure> {
        let opts = this.batch_options(memory_limit.as_deref())?;
        let r = stream::run_files(FileJob {
            model: this.path(),
            opts,
            inputs,
            batch,
            output_dir: Some(&output_dir),
            labels: None,
            progress: None,
        })?;
        Ok((r.rows, r.batch, r.batches, r.written))
    })?;
    Ok(report)
}
