//! A `.npy` file written row by row: the header, with the full row count, first; the data
//! appended as batches finish; the file under a temporary name until every row is in.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use arenac_compiler::ir::types::DType;

use crate::io::IoError;
use crate::io::npy::encode_npy_header;

/// Streams `rows` rows of `dtype` and `row_shape` into `path`. Until [`NpyRowWriter::finish`]
/// the data goes to `.NAME.partial` beside `path` (dot-prefixed, another extension: nothing
/// that looks like a finished `.npy`); `finish` checks the row count and renames it. Dropped
/// unfinished (an error, a panic), the partial file is removed; a killed process leaves only
/// the `.partial` file.
#[derive(Debug)]
pub struct NpyRowWriter {
    path: PathBuf,
    partial: PathBuf,
    file: Option<BufWriter<File>>,
    row_bytes: usize,
    rows: usize,
    written: usize,
    /// Bytes handed to the file so far (header included).
    pos: u64,
    /// Bytes whose write-back to disk has been started ([`WRITEBACK_CHUNK`]).
    kicked: u64,
}

/// Every this many bytes written, the writer flushes and asks the kernel to start writing
/// them to disk (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, which does not wait), so the disk
/// writes while later batches run and the `fdatasync` in [`NpyRowWriter::finish`] has little
/// left to do (160 MiB of outputs left all to the end took 65 ms there).
const WRITEBACK_CHUNK: u64 = 8 << 20;

impl NpyRowWriter {
    /// Creates the partial file and writes the header. Fails (one line naming the file) when
    /// numpy has no such dtype or the file cannot be created.
    pub fn create(
        path: &Path,
        dtype: DType,
        row_shape: &[usize],
        rows: usize,
    ) -> Result<NpyRowWriter, IoError> {
        let mut shape = Vec::with_capacity(row_shape.len() + 1);
        shape.push(rows);
        shape.extend_from_slice(row_shape);
        let header = encode_npy_header(dtype, &shape).map_err(|reason| IoError::Format {
            path: path.to_path_buf(),
            reason,
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "output".into());
        let partial = path.with_file_name(format!(".{name}.partial"));
        let write_err = |source| IoError::Io {
            what: "write",
            path: partial.clone(),
            source,
        };
        let file = File::create(&partial).map_err(write_err)?;
        let mut writer = NpyRowWriter {
            path: path.to_path_buf(),
            partial: partial.clone(),
            file: Some(BufWriter::with_capacity(1 << 16, file)),
            row_bytes: arenac_compiler::ir::types::checked_numel(row_shape)
                .unwrap_or(0)
                .saturating_mul(dtype.size()),
            rows,
            written: 0,
            pos: 0,
            kicked: 0,
        };
        writer.write(&header)?;
        Ok(writer)
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rows written so far.
    pub fn rows_written(&self) -> usize {
        self.written
    }

    /// Appends whole rows. Fails when `bytes` is not a whole number of rows or would pass
    /// the row count given to [`NpyRowWriter::create`].
    pub fn write_rows(&mut self, bytes: &[u8]) -> Result<(), IoError> {
        let rows = bytes.len().checked_div(self.row_bytes).unwrap_or(0);
        if rows * self.row_bytes != bytes.len() || self.written + rows > self.rows {
            return Err(IoError::Format {
                path: self.path.clone(),
                reason: format!(
                    "{} bytes are not whole rows of {} bytes within the {} rows declared \
                     ({} written)",
                    bytes.len(),
                    self.row_bytes,
                    self.rows,
                    self.written
                ),
            });
        }
        self.write(bytes)?;
        self.written += rows;
        Ok(())
    }

    /// Flushes the data and renames the partial file to the final path. Fails, removing the
    /// partial file, when fewer rows than declared were written.
    pub fn finish(mut self) -> Result<PathBuf, IoError> {
        if self.written != self.rows {
            return Err(IoError::Format {
                path: self.path.clone(),
                reason: format!("only {} of {} rows were written", self.written, self.rows),
            });
        }
        let err = |source, path: &Path| IoError::Io {
            what: "write",
            path: path.to_path_buf(),
            source,
        };
        if let Some(file) = self.file.take() {
            let file = file
                .into_inner()
                .map_err(|e| err(e.into_error(), &self.partial))?;
            file.sync_data().map_err(|e| err(e, &self.partial))?;
        }
        std::fs::rename(&self.partial, &self.path).map_err(|e| err(e, &self.path))?;
        Ok(self.path.clone())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), IoError> {
        let file = self.file.as_mut().ok_or_else(|| IoError::Format {
            path: self.path.clone(),
            reason: "written after it was finished".into(),
        })?;
        let io_err = |source| IoError::Io {
            what: "write",
            path: self.partial.clone(),
            source,
        };
        file.write_all(bytes).map_err(io_err)?;
        self.pos += bytes.len() as u64;
        if self.pos - self.kicked >= WRITEBACK_CHUNK {
            file.flush().map_err(io_err)?;
            start_writeback(file.get_ref(), self.kicked, self.pos - self.kicked);
            self.kicked = self.pos;
        }
        Ok(())
    }
}

/// Starts writing `len` bytes of `file` from `offset` back to disk without waiting for it.
/// Best effort: a failure (or another OS) only leaves the work to the final sync.
fn start_writeback(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) {
            // SAFETY: sync_file_range only reads its arguments; the descriptor is our open
            // file, and SYNC_FILE_RANGE_WRITE starts write-back without waiting.
            let _ = unsafe {
                libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
            };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

impl Drop for NpyRowWriter {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}
