//! Batch inference over a data set of any size, in one fixed arena: rows of memory-mapped
//! `.npy` inputs go through the model in batches, each batch's output rows handed to a
//! [`RowSink`] (caller-provided buffers, or `.npy` files written as batches finish).
//!
//! - [`MappedNpy`]: a C-order `.npy` mapped read-only; pages behind the cursor are released
//!   (`MADV_DONTNEED`), so the resident set stays flat however large the file.
//! - [`BatchRunner`]: the model compiled for a batch of N rows (a symbolic first dim bound to
//!   N; a fixed one used as is). A reader thread reads batch k + 1's rows (`pread`) into
//!   one of two recycled staging buffers per input while batch k runs. The tail batch runs on a program compiled for
//!   its row count (exact for any model); a fixed-batch model pads it with zero rows whose
//!   outputs are dropped.
//! - [`NpyRowWriter`]: an output `.npy` whose header (with the full row count) is written
//!   first, under a temporary name renamed when every row is in.
//! - [`auto_batch`]: the largest N whose arena + weights + staging fit the memory limit.
//! - [`bind_row_dims`]: the free dims of a row (`H`, `W`) bound from the input files.
//! - [`run_files`]: all of it between files, as `arenac run --batch` does.
//!
//! ```
//! use arenac::CompileOptions;
//! use arenac::stream::{BatchRunner, MappedNpy};
//! # std::env::set_current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).unwrap();
//!
//! // 100 digit images of 64 floats, run in batches of 32 (the last, of 4 rows, by a program
// compiled for 4).
//! let samples = MappedNpy::open("models/digits/samples.npy".as_ref())?;
//! let model = "models/digits/digits.onnx".as_ref();
//! let mut runner = BatchRunner::new(model, &CompileOptions::default(), 32)?;
//! assert_eq!(runner.batch(), 32);
//!
//! // The caller's buffer for output 0 (`probs`, 10 floats a row), filled batch by batch.
//! let mut probs = vec![0u8; samples.rows() * 10 * 4];
//! let stats = runner.run(&[("pixels", &samples)], &mut [probs.as_mut_slice()][..])?;
//! assert_eq!((stats.rows, stats.batches), (100, 4));
//!
//! // The same rows run as one batch of 100 give the same outputs.
//! let mut whole = BatchRunner::new(model, &CompileOptions::default(), 100)?;
//! let mut expected = vec![0u8; probs.len()];
//! whole.run(&[("pixels", &samples)], &mut [expected.as_mut_slice()][..])?;
//! assert_eq!(probs, expected);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod auto;
mod dims;
mod drain;
mod files;
mod mapped;
mod reader;
mod runner;
mod writer;

pub use auto::{AutoBatch, auto_batch, staging_bytes};
pub use dims::bind_row_dims;
pub use files::{FileJob, FileReport, peak_rss_bytes, run_files};
pub use mapped::MappedNpy;
pub use runner::{BatchRunner, RowSink, RowSlot, StreamStats, batch_symbol};
pub use writer::NpyRowWriter;

/// Why streaming failed: one line naming the file, input or output.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// A tensor file could not be read or written.
    #[error(transparent)]
    Io(#[from] crate::io::IoError),
    /// Compiling (or planning a candidate batch) failed.
    #[error(transparent)]
    Compile(#[from] crate::Error),
    /// A batch failed to run.
    #[error(transparent)]
    Run(#[from] crate::RunError),
    /// The inputs, labels or batch do not fit the model or each other.
    #[error("{0}")]
    Input(String),
}
