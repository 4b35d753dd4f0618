//! A 64-byte-aligned, zero-initialized block of bytes: the weights region while it is built
//! (and arenas in tests and tools). Large blocks are anonymous memory maps, which grow
//! without a copy (`mremap` moves the pages).

use std::alloc::{Layout, alloc_zeroed, dealloc};

use super::ARENA_ALIGN;

/// A 64-byte-aligned, zero-initialized block (never empty: at least one alignment unit).
/// Blocks of [`AlignedBytes::MAP_MIN`] bytes or more are anonymous memory maps: their pages
/// stay untouched (not resident) until written, unlike an aligned heap allocation, which the
/// allocator zeroes eagerly.
pub struct AlignedBytes {
    pub(super) ptr: *mut u8,
    layout: Layout,
    pub(super) len: usize,
    /// The mapping owning the block when it is mapped (then `ptr` points into it).
    pub(super) map: Option<memmap2::MmapMut>,
    /// The block is owned elsewhere (a sealed weights region's mapping): nothing to free.
    pub(super) borrowed: bool,
}

// SAFETY: an `AlignedBytes` owns its heap block alone (like a `Box<[u8]>`): moving it to
// another thread moves that ownership.
unsafe impl Send for AlignedBytes {}
// SAFETY: `&AlignedBytes` only gives reads (`as_ptr`, `as_slice`); writes need `&mut`.
unsafe impl Sync for AlignedBytes {}

/// The layout of a block of `len` bytes: at least one alignment unit, rounded up to it.
fn layout_for(len: usize) -> Layout {
    let size = len.max(1).next_multiple_of(ARENA_ALIGN);
    match Layout::from_size_align(size, ARENA_ALIGN) {
        Ok(l) => l,
        Err(_) => std::alloc::handle_alloc_error(Layout::new::<u8>()),
    }
}

impl AlignedBytes {
    /// Size from which a block is an anonymous memory map.
    pub const MAP_MIN: usize = 1 << 20;

    /// Zeroed block of `len` bytes.
    pub fn zeroed(len: usize) -> AlignedBytes {
        let layout = layout_for(len);
        if layout.size() >= Self::MAP_MIN
            && let Ok(mut map) = memmap2::MmapMut::map_anon(layout.size())
        {
            // Page-aligned (a multiple of 64), zero-filled on first touch. No transparent huge
            // pages: measured, MADV_HUGEPAGE cut EfficientNet-B0's compile CPU time by 15% on
            // fresh memory but doubled VGG-19's (479 -> 1362 ms) once onnxruntime had run
            // before it: with the usual `defrag=madvise`, each huge page fault may compact
            // memory first (docs/BENCHMARKS.md).
            let ptr = map.as_mut_ptr();
            return AlignedBytes {
                ptr,
                layout,
                len,
                map: Some(map),
                borrowed: false,
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
            borrowed: false,
        }
    }

    /// A copy of `data`.
    pub fn from_slice(data: &[u8]) -> AlignedBytes {
        let out = AlignedBytes::zeroed(data.len());
        // SAFETY: the block holds at least `data.len()` bytes and does not overlap `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), out.ptr, data.len()) };
        out
    }

    /// Grows the block to `len` bytes (no-op when it is not larger), keeping its contents;
    /// the new bytes are zero. A mapped block is remapped (its pages move, nothing is
    /// copied); a heap block is copied into a new block (a map once large enough).
    pub fn grow(&mut self, len: usize) {
        if len <= self.len {
            return;
        }
        if len <= self.layout.size() {
            self.len = len;
            return;
        }
        let layout = layout_for(len);
        #[cfg(target_os = "linux")]
        if let Some(map) = self.map.as_mut() {
            // SAFETY: an anonymous mapping (no file behind it), so every byte up to the new
            // length is valid zero-filled memory; `ptr` is refreshed from the (possibly moved)
            // mapping right after, and no reference into the old pages is alive (`&mut self`).
            let moved =
                unsafe { map.remap(layout.size(), memmap2::RemapOptions::new().may_move(true)) };
            if moved.is_ok() {
                self.ptr = map.as_mut_ptr();
                self.layout = layout;
                self.len = len;
                return;
            }
        }
        let mut bigger = AlignedBytes::zeroed(len);
        bigger.as_mut_slice()[..self.len].copy_from_slice(self.as_slice());
        *self = bigger;
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

    /// Bytes the block holds (at least [`AlignedBytes::len`]).
    pub fn capacity(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        if self.map.take().is_some() || self.borrowed {
            return; // the mapping is unmapped as it drops (or by its owner)
        }
        // SAFETY: allocated in `zeroed` with this layout (not mapped), freed once.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growing_keeps_contents_and_zeroes_the_rest() {
        for start in [100, AlignedBytes::MAP_MIN + 7] {
            let mut b = AlignedBytes::zeroed(start);
            for (i, x) in b.as_mut_slice().iter_mut().enumerate() {
                *x = (i % 251) as u8 + 1;
            }
            // Across the heap/map boundary, then within a map (remapped).
            for len in [
                start + 10,
                3 * AlignedBytes::MAP_MIN + 5,
                9 * AlignedBytes::MAP_MIN,
            ] {
                b.grow(len);
                assert_eq!(b.len(), len);
                assert_eq!(b.as_ptr() as usize % ARENA_ALIGN, 0);
                let s = b.as_slice();
                assert!(
                    s[..start]
                        .iter()
                        .enumerate()
                        .all(|(i, &x)| x == (i % 251) as u8 + 1)
                );
                assert!(s[start..].iter().all(|&x| x == 0));
            }
            b.grow(10);
            assert_eq!(b.len(), 9 * AlignedBytes::MAP_MIN, "never shrinks");
        }
    }
}
