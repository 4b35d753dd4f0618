//! `TensorProto` → [`Tensor`]: raw data, typed fields, and external data files.
//!
//! External data (`data_location = EXTERNAL`, keys `location`, `offset`, `length`) is memory
//! mapped, never copied: the tensor's bytes point into the map. A location must be a relative
//! path that stays inside the model's folder (after resolving `..` and symlinks); anything else
//! is [`Error::ExternalData`] before any read. The 4- and 2-bit types, packed in files (two or
//! four elements per byte, `crate::ir::lowp`), are unpacked into a copy with one byte per
//! element, as everywhere in memory.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Component, Path, PathBuf};

use arenac_proto::TensorProto;
use arenac_proto::tensor_proto::DataLocation;
use bytes::Bytes;

use crate::error::Error;
use crate::ir::lowp;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, checked_numel};

/// Resolves external-data locations against the model's folder, mapping each file once.
#[derive(Debug)]
pub struct ExternalData {
    dir: PathBuf,
    maps: HashMap<PathBuf, Bytes>,
}

impl ExternalData {
    /// External data relative to `dir`, the folder holding the model file.
    pub fn new(dir: impl Into<PathBuf>) -> ExternalData {
        ExternalData {
            dir: dir.into(),
            maps: HashMap::new(),
        }
    }

    fn file(&mut self, name: &str, location: &str) -> Result<Bytes, Error> {
        let ext = |reason: String| Error::ExternalData {
            name: name.to_string(),
            reason,
        };
        let rel = Path::new(location);
        if location.is_empty()
            || rel.is_absolute()
            || rel
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(ext(format!(
                "location '{location}' must be a relative path inside the model's folder"
            )));
        }
        let dir = self.dir.canonicalize().map_err(|source| Error::Io {
            path: self.dir.clone(),
            source,
        })?;
        let joined = dir.join(rel);
        let path = joined.canonicalize().map_err(|source| Error::Io {
            path: joined.clone(),
            source,
        })?;
        if !path.starts_with(&dir) {
            return Err(ext(format!(
                "location '{location}' resolves outside the model's folder (a symlink?)"
            )));
        }
        if let Some(b) = self.maps.get(&path) {
            return Ok(b.clone());
        }
        let bytes = map_file(&path)?;
        self.maps.insert(path, bytes.clone());
        Ok(bytes)
    }
}

/// A read-only file mapping whose resident pages can be dropped on demand (see
/// [`SourceMap::release`]), e.g. once compile-time packing has copied the weights out of it.
#[derive(Clone, Debug)]
pub struct SourceMap(std::sync::Arc<memmap2::Mmap>);

/// Owner of a mapping's bytes inside a [`Bytes`].
struct SharedMap(std::sync::Arc<memmap2::Mmap>);

impl AsRef<[u8]> for SharedMap {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl SourceMap {
    /// The mapped file's length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the mapped file is empty (never: empty files are not mapped).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Asks the kernel to drop the mapping's resident pages (`MADV_DONTNEED`). Its bytes stay
    /// readable and unchanged: the mapping is private, read-only and never written, so its
    /// pages are clean copies of the file, read again from it on the next access.
    pub fn release(&self) {
        #[cfg(unix)]
        // SAFETY: DONTNEED on a private, read-only, never-written file mapping only discards
        // clean pages; the next read faults the same bytes back in from the file (the same
        // contract as mapping the file at all: nobody truncates or rewrites it meanwhile). No
        // reference into the mapping can observe a change.
        let _ = unsafe { self.0.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
    }
}

impl SourceMap {
    /// Drops the resident pages wholly inside `bytes` when they lie in this mapping (other
    /// memory, e.g. a decoded copy, is left alone): a large weight's pages can go panel by
    /// panel as it is packed. Same safety as [`SourceMap::release`].
    pub fn release_range(&self, bytes: &[u8]) {
        let (base, len) = (self.0.as_ptr() as usize, self.0.len());
        let (start, end) = (
            bytes.as_ptr() as usize,
            bytes.as_ptr() as usize + bytes.len(),
        );
        if bytes.is_empty() || start < base || end > base + len {
            return;
        }
        const PAGE: usize = 4096;
        // Whole pages only, rounded inwards from the mapping's (page-aligned) start.
        let first = (start - base).next_multiple_of(PAGE);
        let last = (end - base) / PAGE * PAGE;
        if last <= first {
            return;
        }
        #[cfg(unix)]
        // SAFETY: as in `release`: a private, read-only, never-written file mapping; the range
        // lies inside it, and its pages read back the same bytes from the file.
        let _ = unsafe {
            self.0
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, first, last - first)
        };
    }
}

/// Maps a whole file read-only into a [`Bytes`], with a handle to release its resident pages
/// later (empty files give empty bytes and no handle).
pub fn map_file_shared(path: &Path) -> Result<(Bytes, Option<SourceMap>), Error> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len == 0 {
        return Ok((Bytes::new(), None));
    }
    // SAFETY: as in `map_file`.
    let map = std::sync::Arc::new(unsafe { memmap2::Mmap::map(&file) }.map_err(io)?);
    let bytes = Bytes::from_owner(SharedMap(map.clone()));
    Ok((bytes, Some(SourceMap(map))))
}

/// Maps a whole file read-only into a [`Bytes`] (empty files give empty bytes).
pub fn map_file(path: &Path) -> Result<Bytes, Error> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: the map is read-only and private to this process. arenac never writes to model
    // files; as with every mmap-based loader, another process truncating the file while it is
    // mapped would fault, which is the documented contract of loading a model from disk.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
    Ok(Bytes::from_owner(map))
}

/// Converts a `TensorProto` into a [`Tensor`]. `external` resolves external data; `None` makes
/// external data an error (e.g. inside attributes).
pub fn tensor_from_proto(
    t: &TensorProto,
    external: Option<&mut ExternalData>,
) -> Result<Tensor, Error> {
    let name = t.name().to_string();
    let invalid = |reason: String| Error::InvalidTensor {
        name: name.clone(),
        reason,
    };
    let dtype = DType::from_onnx(t.data_type()).ok_or_else(|| Error::UnsupportedDType {
        name: name.clone(),
        code: t.data_type(),
    })?;
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        let d =
            usize::try_from(d).map_err(|_| invalid(format!("negative dim {d} in {:?}", t.dims)))?;
        shape.push(d);
    }
    let numel =
        checked_numel(&shape).ok_or_else(|| invalid(format!("dims {:?} overflow", t.dims)))?;
    // Bytes in the file: 4- and 2-bit types are packed there (one byte per element in memory).
    let nbytes = lowp::packed_len(dtype, numel)
        .ok_or_else(|| invalid(format!("dims {:?} overflow", t.dims)))?;

    let data: Bytes = if t.data_location() == DataLocation::External {
        let Some(external) = external else {
            return Err(Error::ExternalData {
                name,
                reason: "is not allowed here".into(),
            });
        };
        external_bytes(t, &name, nbytes, external)?
    } else if t.raw_data.is_some() {
        t.raw_data.clone().unwrap_or_default()
    } else {
        typed_field_bytes(t, dtype, numel).map_err(invalid)?
    };
    let data = if dtype.packed_bits().is_some() {
        let unpacked = lowp::unpack(dtype, &data, numel).ok_or_else(|| {
            invalid(format!(
                "{} bytes of packed {dtype} data, the dims need {nbytes}",
                data.len()
            ))
        })?;
        Bytes::from(unpacked)
    } else {
        data
    };
    Tensor::from_bytes(dtype, shape, data).map_err(|e| invalid(e.to_string()))
}

fn external_bytes(
    t: &TensorProto,
    name: &str,
    nbytes: usize,
    external: &mut ExternalData,
) -> Result<Bytes, Error> {
    let ext = |reason: String| Error::ExternalData {
        name: name.to_string(),
        reason,
    };
    let mut location = None;
    let mut offset = 0usize;
    let mut length = None;
    for kv in &t.external_data {
        let parse = |v: &str| {
            v.parse::<usize>()
                .map_err(|_| ext(format!("{}='{v}' is not a byte count", kv.key())))
        };
        match kv.key() {
            "location" => location = Some(kv.value().to_string()),
            "offset" => offset = parse(kv.value())?,
            "length" => length = Some(parse(kv.value())?),
            _ => {}
        }
    }
    let location = location.ok_or_else(|| ext("has no 'location'".into()))?;
    let file = external.file(name, &location)?;
    let length = length.unwrap_or(nbytes);
    let end = offset
        .checked_add(length)
        .filter(|&e| e <= file.len())
        .ok_or_else(|| {
            ext(format!(
                "range {offset}+{length} exceeds '{location}' ({} bytes)",
                file.len()
            ))
        })?;
    Ok(file.slice(offset..end))
}

/// Re-encodes the typed repeated fields (`float_data`, `int32_data`...) as raw little-endian
/// (4- and 2-bit types stay packed: each `int32_data` entry holds one packed byte, or, when
/// there is one entry per element and that is not the packed count, one element).
fn typed_field_bytes(t: &TensorProto, dtype: DType, numel: usize) -> Result<Bytes, String> {
    let want = match dtype.packed_bits() {
        Some(_) => lowp::packed_len(dtype, numel).unwrap_or(usize::MAX),
        None => numel,
    };
    let count = |n: usize, field: &str| {
        if n == want {
            Ok(())
        } else {
            Err(format!("{field} has {n} elements, the dims need {want}"))
        }
    };
    if dtype.packed_bits().is_some() {
        let bytes: Vec<u8> = t.int32_data.iter().map(|&v| v as u8).collect();
        if bytes.len() == numel && numel != want {
            // One element per entry (as ONNX's text syntax parser writes them): pack them.
            return Ok(Bytes::from(lowp::pack(dtype, &bytes)));
        }
        count(bytes.len(), "int32_data")?;
        return Ok(Bytes::from(bytes));
    }
    let mut out = Vec::with_capacity(numel.saturating_mul(dtype.size()).min(1 << 30));
    match dtype {
        DType::F32 => {
            count(t.float_data.len(), "float_data")?;
            t.float_data
                .iter()
                .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        }
        DType::F64 => {
            count(t.double_data.len(), "double_data")?;
            t.double_data
                .iter()
                .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        }
        DType::I64 => {
            count(t.int64_data.len(), "int64_data")?;
            t.int64_data
                .iter()
                .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
        }
        DType::U32 | DType::U64 => {
            count(t.uint64_data.len(), "uint64_data")?;
            for &v in &t.uint64_data {
                if dtype == DType::U32 {
                    out.extend_from_slice(&(v as u32).to_le_bytes());
                } else {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
        // int32_data carries every type of 32 bits or fewer (f16/bf16 as their bit patterns,
        // 8-bit floats as their codes, 4-/2-bit types as packed bytes).
        _ => {
            count(t.int32_data.len(), "int32_data")?;
            for &v in &t.int32_data {
                match dtype.size() {
                    1 => out.push(v as u8),
                    2 => out.extend_from_slice(&(v as u16).to_le_bytes()),
                    _ => out.extend_from_slice(&v.to_le_bytes()),
                }
            }
        }
    }
    Ok(Bytes::from(out))
}
