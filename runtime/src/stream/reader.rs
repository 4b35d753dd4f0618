//! The reader thread: batch k + 1's input rows copied from the mappings into a staging
//! buffer while batch k runs, and the copied pages given back to the kernel.

use std::sync::mpsc::{Receiver, SyncSender};

use arenac_compiler::ir::types::DType;

use super::{MappedNpy, StreamError};

/// Copy (and release) at most this many bytes of a file between two `MADV_DONTNEED` calls:
/// what a reader holds of the mapping besides the staging buffers.
pub(super) const CHUNK_BYTES: usize = 1 << 20;

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
/// `free` (waiting while both are in use), fills it and sends it on `filled`. Each input is
/// copied in chunks of about [`CHUNK_BYTES`], whose mapped pages are released as soon as
/// they are copied; the next batch's rows are then asked for (`MADV_WILLNEED`) so the disk
/// reads them while the reader waits. An error is sent as the last message. Returns when
/// every batch is sent, or when the running side hangs up (it stopped: error or done).
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

/// Copies rows `start..start + n` of every input into `bufs` (padded as the job says).
fn fill(
    job: &ReadJob<'_>,
    start: usize,
    n: usize,
    bufs: &mut [Vec<u8>],
) -> Result<(), StreamError> {
    for ((m, &dtype), buf) in job.inputs.iter().zip(&job.dtypes).zip(bufs.iter_mut()) {
        buf.clear();
        let chunk = (CHUNK_BYTES / m.row_bytes().max(1)).max(1);
        let mut at = start;
        while at < start + n {
            let end = (at + chunk).min(start + n);
            let bytes = m.rows_bytes(at..end).ok_or_else(|| {
                StreamError::Input(format!(
                    "{}: rows {at}..{end} are past the end of the file",
                    m.path().display()
                ))
            })?;
            if dtype == DType::Bool && bytes.iter().any(|&b| b > 1) {
                return Err(StreamError::Input(format!(
                    "{}: bool data holds a byte other than 0 or 1 in rows {at}..{end}",
                    m.path().display()
                )));
            }
            buf.extend_from_slice(bytes);
            m.release_rows(at..end);
            at = end;
        }
        if job.pad_tail && n < job.batch {
            buf.resize(job.batch * m.row_bytes(), 0);
        }
    }
    Ok(())
}
