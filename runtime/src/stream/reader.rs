//! The reader thread: batch k + 1's input rows read from the files into a staging buffer
//! while batch k runs.

use std::sync::mpsc::{Receiver, SyncSender};

use arenac_compiler::ir::types::DType;

use super::{MappedNpy, StreamError};

/// One batch of input rows, staged: rows `start..start + rows` of every input, one buffer
/// per input in graph-input order. A padded batch's buffers hold `batch` rows, the rows
/// past `rows` zero.
pub(super) struct Staged {
    /// First row.
    pub start: usize,
    /// Rows of the data set in this batch.
    pub rows: usize,
    /// The staging buffers (recycled: sent back to the reader once the batch ran).
    pub bufs: Vec<Vec<u8>>,
}

/// What the reader reads.
pub(super) struct ReadJob<'m> {
    /// The inputs in graph-input order.
    pub inputs: Vec<&'m MappedNpy>,
    /// Element type of each input (bool data is checked to be 0 or 1).
    pub dtypes: Vec<DType>,
    /// Rows per batch.
    pub batch: usize,
    /// Zero-pad the last, partial batch to `batch` rows (a fixed-batch model) instead of
    /// staging its rows only (a tail program runs them).
    pub pad_tail: bool,
}

/// The reader thread's body: for each batch, takes a free set of staging buffers from
/// `free` (waiting while both are in use; each buffer `batch` rows long), fills it and
/// sends it on `filled`. Rows are read with `pread` ([`MappedNpy::read_rows`]), so the
/// mapping's pages never become resident, then dropped from the page cache
/// ([`MappedNpy::drop_cached`]); the next batch's rows are then asked for
/// (`MADV_WILLNEED`) so the disk reads them while the reader waits. An error is sent as
/// the last message. Returns when every batch is sent, or when the running side hangs up
/// (it stopped: error or done).
pub(super) fn read_batches(
    job: ReadJob<'_>,
    free: Receiver<Vec<Vec<u8>>>,
    filled: SyncSender<Result<Staged, StreamError>>,
) {
    let rows = job.inputs.first().map_or(0, |m| m.rows());
    let mut start = 0;
    while start < rows {
        let n = job.batch.min(rows - start);
        let Ok(mut bufs) = free.recv() else {
            return;
        };
        let staged = fill(&job, start, n, &mut bufs).map(|()| Staged {
            start,
            rows: n,
            bufs,
        });
        let failed = staged.is_err();
        if filled.send(staged).is_err() || failed {
            return;
        }
        start += n;
        for m in &job.inputs {
            m.prefetch(start..start + job.batch);
        }
    }
}

/// Reads rows `start..start + n` of every input into the front of `bufs` (each `batch`
/// rows long); a padded tail's remaining rows are zeroed.
fn fill(
    job: &ReadJob<'_>,
    start: usize,
    n: usize,
    bufs: &mut [Vec<u8>],
) -> Result<(), StreamError> {
    for ((m, &dtype), buf) in job.inputs.iter().zip(&job.dtypes).zip(bufs.iter_mut()) {
        let used = (n * m.row_bytes()).min(buf.len());
        let (rows, rest) = buf.split_at_mut(used);
        m.read_rows(start..start + n, rows)?;
        // Pages of the map a caller touched (`rows_bytes`) leave the resident set, and the
        // rows leave the page cache: a file larger than RAM does not push out everyone
        // else's cache, and reading it costs no page reclaim (on this 2-core machine a
        // cold-cache run took 2.5-3.7 s with it, 4.9-5.3 s without).
        m.release_rows(start..start + n);
        m.drop_cached(start..start + n);
        if dtype == DType::Bool && rows.iter().any(|&b| b > 1) {
            return Err(StreamError::Input(format!(
                "{}: bool data holds a byte other than 0 or 1 in rows {start}..{}",
                m.path().display(),
                start + n
            )));
        }
        if job.pad_tail && n < job.batch {
            rest.fill(0);
        }
    }
    Ok(())
}
