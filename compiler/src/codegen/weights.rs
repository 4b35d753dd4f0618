//! The read-only weights region: every constant a node reads, each at a 64-aligned offset
//! (identical byte buffers stored once), plus compile-time transforms of constants (Gemm's
//! packed B with alpha folded in, BatchNormalization's scale and shift).

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::collections::HashMap;

use super::ARENA_ALIGN;
use crate::ir::tensor::Tensor;

/// One piece of the weights region, kept as it came until [`WeightsBuilder::finish`].
enum Chunk {
    /// A constant's bytes, shared with the graph (often a slice of the memory-mapped file).
    Shared(bytes::Bytes),
    /// Bytes built at compile time.
    Bytes(Vec<u8>),
    /// Floats built at compile time (packed GEMM B, conv weights...), stored little-endian.
    F32(Vec<f32>),
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Chunk::Shared(b) => b.len(),
            Chunk::Bytes(v) => v.len(),
            Chunk::F32(v) => v.len() * 4,
        }
    }
}

/// Collects the weights region's pieces. Memory: pieces are kept as they came (constants
/// shared with the graph, compile-time forms moved in, never copied while collecting), and
/// [`WeightsBuilder::finish`] copies them into one region, freeing each piece as it goes, so
/// the region's pages and the pieces' are not both resident for long.
#[derive(Default)]
pub struct WeightsBuilder {
    chunks: Vec<(usize, Chunk)>,
    len: usize,
    seen: HashMap<(usize, usize), usize>,
}

impl WeightsBuilder {
    fn push(&mut self, chunk: Chunk) -> usize {
        let off = self.len.next_multiple_of(ARENA_ALIGN);
        self.len = off + chunk.len();
        self.chunks.push((off, chunk));
        off
    }

    /// Appends a copy of `data` at the next aligned offset and returns that offset.
    pub fn add(&mut self, data: &[u8]) -> usize {
        self.push(Chunk::Bytes(data.to_vec()))
    }

    /// A constant tensor's offset (stored once per distinct byte buffer, without a copy
    /// until [`WeightsBuilder::finish`]).
    pub fn tensor(&mut self, t: &Tensor) -> usize {
        let key = (t.bytes().as_ptr() as usize, t.bytes().len());
        if let Some(&off) = self.seen.get(&key) {
            return off;
        }
        let off = self.push(Chunk::Shared(t.bytes().clone()));
        self.seen.insert(key, off);
        off
    }

    /// Appends a copy of `v`.
    pub fn f32s(&mut self, v: &[f32]) -> usize {
        self.push(Chunk::F32(v.to_vec()))
    }

    /// Appends `v`, moved in (no copy until [`WeightsBuilder::finish`]).
    pub fn f32_vec(&mut self, v: Vec<f32>) -> usize {
        self.push(Chunk::F32(v))
    }

    /// Bytes so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The finished, aligned region. Large regions come from the allocator as untouched
    /// zero pages; each piece is copied in and dropped in turn.
    pub fn finish(self) -> AlignedBytes {
        let mut out = AlignedBytes::zeroed(self.len);
        for (off, chunk) in self.chunks {
            let dst = &mut out.as_mut_slice()[off..off + chunk.len()];
            match &chunk {
                Chunk::Shared(b) => dst.copy_from_slice(b),
                Chunk::Bytes(v) => dst.copy_from_slice(v),
                Chunk::F32(v) => {
                    for (d, x) in dst.chunks_exact_mut(4).zip(v) {
                        d.copy_from_slice(&x.to_le_bytes());
                    }
                }
            }
            drop(chunk);
        }
        out
    }
}

/// A 64-byte-aligned, zero-initialized block (never empty: at least one alignment unit).
/// Blocks of [`AlignedBytes::MAP_MIN`] bytes or more are anonymous memory maps: their pages
/// stay untouched (not resident) until written, unlike an aligned heap allocation, which the
/// allocator zeroes eagerly.
pub struct AlignedBytes {
    ptr: *mut u8,
    layout: Layout,
    len: usize,
    /// The mapping owning the block when it is mapped (then `ptr` points into it).
    map: Option<memmap2::MmapMut>,
}

// SAFETY: an `AlignedBytes` owns its heap block alone (like a `Box<[u8]>`): moving it to
// another thread moves that ownership.
unsafe impl Send for AlignedBytes {}
// SAFETY: `&AlignedBytes` only gives reads (`as_ptr`, `as_slice`); writes need `&mut`.
unsafe impl Sync for AlignedBytes {}

impl AlignedBytes {
    /// Size from which a block is an anonymous memory map.
    pub const MAP_MIN: usize = 1 << 20;

    /// Zeroed block of `len` bytes.
    pub fn zeroed(len: usize) -> AlignedBytes {
        let size = len.max(1).next_multiple_of(ARENA_ALIGN);
        let layout = match Layout::from_size_align(size, ARENA_ALIGN) {
            Ok(l) => l,
            Err(_) => std::alloc::handle_alloc_error(Layout::new::<u8>()),
        };
        if size >= Self::MAP_MIN
            && let Ok(mut map) = memmap2::MmapMut::map_anon(size)
        {
            // Page-aligned (a multiple of 64), zero-filled on first touch.
            let ptr = map.as_mut_ptr();
            return AlignedBytes {
                ptr,
                layout,
                len,
                map: Some(map),
            };
        }
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBytes {
            ptr,
            layout,
            len,
            map: None,
        }
    }

    /// A copy of `data`.
    pub fn from_slice(data: &[u8]) -> AlignedBytes {
        let out = AlignedBytes::zeroed(data.len());
        // SAFETY: the block holds at least `data.len()` bytes and does not overlap `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), out.ptr, data.len()) };
        out
    }

    /// Base address.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// Base address, writable.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    /// The bytes, read-only.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to an initialized (zeroed at allocation) block of at least
        // `len` bytes that lives as long as `self`; the shared borrow forbids writes through
        // `as_mut_ptr` while the slice lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as `as_slice`; the exclusive borrow of `self` makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Bytes requested.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no bytes were requested.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        if self.map.take().is_some() {
            return; // the mapping is unmapped as it drops
        }
        // SAFETY: allocated in `zeroed` with this layout (not mapped), freed once.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}
