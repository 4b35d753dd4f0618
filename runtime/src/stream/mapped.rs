//! A `.npy` file memory-mapped for streaming: its header parsed, its data read row by row
//! through the map, pages already consumed given back to the kernel.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};

use arenac_compiler::ir::types::{DType, ShapeDisplay};
use memmap2::{Advice, Mmap, UncheckedAdvice};

use crate::io::IoError;
use crate::io::npy::{NpyHeader, parse_npy_header};

/// A C-order, little-endian `.npy` array of at least one dimension, mapped read-only. Row `r`
/// is the sub-array at index `r` of the first dim. The file is never read whole: rows are
/// paged in as they are touched and [`MappedNpy::release_before`] drops the pages behind a
/// cursor, so a file larger than RAM streams in flat memory.
///
/// Contract: the file must not be truncated or rewritten while mapped (as for any memory
/// map, another process shrinking it makes later reads fault).
#[derive(Debug)]
pub struct MappedNpy {
    path: PathBuf,
    /// The open file, for [`MappedNpy::read_rows`].
    file: File,
    map: Mmap,
    header: NpyHeader,
    row_bytes: usize,
}

impl MappedNpy {
    /// Maps `path` and checks its header and length. Errors (one line naming the file): not a
    /// `.npy` file, Fortran order, big-endian data, a 0-d array (no rows), a dtype numpy has
    /// but arenac lacks, data shorter (truncated) or longer than the shape says.
    pub fn open(path: &Path) -> Result<MappedNpy, IoError> {
        let format = |reason: String| IoError::Format {
            path: path.to_path_buf(),
            reason,
        };
        let io = |source| IoError::Io {
            what: "read",
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        // SAFETY: the map is read-only and private; the contract above (the file is not
        // shrunk while mapped) is documented for callers, as for every mmap-based reader.
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        let header = parse_npy_header(&map).map_err(format)?;
        if header.fortran_order {
            return Err(format(
                "Fortran-order arrays cannot be streamed by rows (save a C-order array, e.g. \
                 np.save(f, np.ascontiguousarray(a)))"
                    .into(),
            ));
        }
        if header.big_endian {
            return Err(format(
                "big-endian data cannot be streamed (save it little-endian, e.g. \
                 a.astype(a.dtype.newbyteorder('<')))"
                    .into(),
            ));
        }
        if header.shape.is_empty() {
            return Err(format(
                "a 0-d array has no rows to stream (give an array whose first dim is the rows)"
                    .into(),
            ));
        }
        let have = map.len().saturating_sub(header.data_offset);
        if have != header.data_bytes {
            let what = if have < header.data_bytes {
                "truncated: data has"
            } else {
                "data has"
            };
            return Err(format(format!(
                "{what} {have} bytes but {}{} needs {}",
                header.dtype,
                ShapeDisplay(&header.shape),
                header.data_bytes
            )));
        }
        let rows = header.shape[0];
        let row_bytes = header.data_bytes.checked_div(rows).unwrap_or_else(|| {
            arenac_compiler::ir::types::checked_numel(&header.shape[1..])
                .unwrap_or(0)
                .saturating_mul(header.dtype.size())
        });
        // Rows are read once, front to back: ask for read-ahead.
        let _ = map.advise(Advice::Sequential);
        Ok(MappedNpy {
            path: path.to_path_buf(),
            file,
            map,
            header,
            row_bytes,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.header.dtype
    }

    /// The whole shape (`[rows, ...]`).
    pub fn shape(&self) -> &[usize] {
        &self.header.shape
    }

    /// Number of rows: the first dim.
    pub fn rows(&self) -> usize {
        self.header.shape[0]
    }

    /// The shape of one row (the shape without its first dim).
    pub fn row_shape(&self) -> &[usize] {
        &self.header.shape[1..]
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// The bytes of `rows` (C order, little-endian); `None` when the range passes the end.
    pub fn rows_bytes(&self, rows: Range<usize>) -> Option<&[u8]> {
        let start = self.byte_of(rows.start)?;
        let end = self.byte_of(rows.end)?;
        self.map.get(start..end)
    }

    /// Gives back to the kernel the mapped pages wholly before row `row` (`madvise
    /// MADV_DONTNEED`): they leave this process's resident set; touching them again would
    /// read them back from the file. Failures are ignored (the pages merely stay resident).
    pub fn release_before(&self, row: usize) {
        let Some(end) = self.byte_of(row.min(self.rows())) else {
            return;
        };
        let page = page_size();
        let end = end - end % page;
        if end > 0 {
            // SAFETY: the map is a read-only private file mapping that we never write, so
            // dropping its pages loses nothing: a later read of them re-reads the file. No
            // reference into the map is held across this call by the streaming code, and a
            // caller's `&[u8]` from `rows_bytes` still reads the same bytes after it.
            let _ = unsafe {
                self.map
                    .unchecked_advise_range(UncheckedAdvice::DontNeed, 0, end)
            };
        }
    }

    /// Copies rows `rows` into `dst` with positioned reads of the file (`pread`), not through
    /// the map: no page of the mapping becomes resident, and the kernel's read-ahead for
    /// file reads applies (on a cold page cache several times faster here than faulting the
    /// map in). `dst` must be exactly the rows' bytes. Errors name the file.
    pub fn read_rows(&self, rows: Range<usize>, dst: &mut [u8]) -> Result<(), IoError> {
        use std::os::unix::fs::FileExt;
        let span = self
            .byte_of(rows.start)
            .zip(self.byte_of(rows.end))
            .filter(|&(a, b)| a <= b && b <= self.map.len() && b - a == dst.len());
        let Some((start, _)) = span else {
            return Err(IoError::Format {
                path: self.path.clone(),
                reason: format!(
                    "rows {}..{} are past the end of the file or do not fit {} bytes",
                    rows.start,
                    rows.end,
                    dst.len()
                ),
            });
        };
        self.file
            .read_exact_at(dst, start as u64)
            .map_err(|source| IoError::Io {
                what: "read",
                path: self.path.clone(),
                source,
            })
    }

    /// Gives back the mapped pages holding rows `rows` (`MADV_DONTNEED`), from the page where
    /// row `rows.start` begins to the page where row `rows.end` begins (that one is kept: the
    /// next rows start on it). For a reader going front to back, called on each chunk it has
    /// copied, so at most a chunk of the file is resident. Failures are ignored.
    pub fn release_rows(&self, rows: Range<usize>) {
        let end = rows.end.min(self.rows());
        let (Some(a), Some(b)) = (self.byte_of(rows.start.min(end)), self.byte_of(end)) else {
            return;
        };
        let page = page_size();
        let (a, b) = (a - a % page, b - b % page);
        if b > a {
            // SAFETY: as in `release_before`: a read-only private file mapping, never written,
            // so the dropped pages are read back from the file if touched again; callers
            // copy the rows out before releasing them.
            let _ = unsafe {
                self.map
                    .unchecked_advise_range(UncheckedAdvice::DontNeed, a, b - a)
            };
        }
    }

    /// Asks the kernel to drop the file's pages holding rows `rows` from the page cache
    /// (`posix_fadvise POSIX_FADV_DONTNEED`; clean pages only, whole pages within the
    /// range): for a reader done with them, so streaming a file larger than RAM does not
    /// evict other files' pages. A later read reads them from disk again. Failures (and
    /// offsets past `i64`) are ignored.
    pub fn drop_cached(&self, rows: Range<usize>) {
        use std::os::fd::AsRawFd;
        let span = self.byte_of(rows.start).zip(self.byte_of(rows.end));
        let Some((a, b)) = span.filter(|&(a, b)| b > a) else {
            return;
        };
        if let (Ok(offset), Ok(len)) = (i64::try_from(a), i64::try_from(b - a)) {
            // SAFETY: posix_fadvise only reads its arguments; the descriptor is our open file.
            let _ = unsafe {
                libc::posix_fadvise(
                    self.file.as_raw_fd(),
                    offset,
                    len,
                    libc::POSIX_FADV_DONTNEED,
                )
            };
        }
    }

    /// Asks the kernel to start reading `rows` in now (`madvise MADV_WILLNEED`), so they are
    /// resident when a later batch reads them: called for batch k + 1 before batch k runs.
    /// Rows past the end are ignored; failures too (the rows are then read on first touch).
    pub fn prefetch(&self, rows: Range<usize>) {
        let end = rows.end.min(self.rows());
        if let (Some(a), Some(b)) = (self.byte_of(rows.start.min(end)), self.byte_of(end))
            && b > a
        {
            let _ = self.map.advise_range(Advice::WillNeed, a, b - a);
        }
    }

    fn byte_of(&self, row: usize) -> Option<usize> {
        row.checked_mul(self.row_bytes)?
            .checked_add(self.header.data_offset)
    }
}

/// The page size (4 KiB where it cannot be read).
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}
