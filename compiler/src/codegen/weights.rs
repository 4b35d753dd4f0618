//! The read-only weights region: every constant a node reads, each at a 64-aligned offset
//! (identical byte buffers stored once), plus compile-time transforms of constants (Gemm's
//! packed B with alpha folded in, BatchNormalization's scale and shift).

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::collections::HashMap;

use super::ARENA_ALIGN;
use crate::ir::tensor::Tensor;

/// Collects the weights region's bytes.
#[derive(Default)]
pub struct WeightsBuilder {
    bytes: Vec<u8>,
    seen: HashMap<(usize, usize), usize>,
}

impl WeightsBuilder {
    /// Appends `data` at the next aligned offset and returns that offset.
    pub fn add(&mut self, data: &[u8]) -> usize {
        let off = self.bytes.len().next_multiple_of(ARENA_ALIGN);
        self.bytes.resize(off, 0);
        self.bytes.extend_from_slice(data);
        off
    }

    /// A constant tensor's offset (stored once per distinct byte buffer).
    pub fn tensor(&mut self, t: &Tensor) -> usize {
        let key = (t.bytes().as_ptr() as usize, t.bytes().len());
        if let Some(&off) = self.seen.get(&key) {
            return off;
        }
        let off = self.add(t.bytes());
        self.seen.insert(key, off);
        off
    }

    /// Appends floats.
    pub fn f32s(&mut self, v: &[f32]) -> usize {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        self.add(&bytes)
    }

    /// The finished, aligned region.
    pub fn finish(self) -> AlignedBytes {
        AlignedBytes::from_slice(&self.bytes)
    }
}

/// A 64-byte-aligned heap block (never empty: at least one alignment unit).
pub struct AlignedBytes {
    ptr: *mut u8,
    layout: Layout,
    len: usize,
}

// SAFETY: an `AlignedBytes` owns its heap block alone (like a `Box<[u8]>`): moving it to
// another thread moves that ownership.
unsafe impl Send for AlignedBytes {}
// SAFETY: `&AlignedBytes` only gives reads (`as_ptr`, `as_slice`); writes need `&mut`.
unsafe impl Sync for AlignedBytes {}

impl AlignedBytes {
    /// Zeroed block of `len` bytes.
    pub fn zeroed(len: usize) -> AlignedBytes {
        let size = len.max(1).next_multiple_of(ARENA_ALIGN);
        let layout = match Layout::from_size_align(size, ARENA_ALIGN) {
            Ok(l) => l,
            Err(_) => std::alloc::handle_alloc_error(Layout::new::<u8>()),
        };
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBytes { ptr, layout, len }
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
        // SAFETY: allocated in `zeroed` with this layout, freed once.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}
