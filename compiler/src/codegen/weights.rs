//! The read-only weights region: every constant a node reads, each at a 64-aligned offset
//! (identical byte buffers stored once), plus compile-time transforms of constants (Gemm's
//! packed B with alpha folded in, BatchNormalization's scale and shift).

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::collections::HashMap;

use super::ARENA_ALIGN;
use crate::ir::tensor::Tensor;

/// Collects the weights region, writing each piece once, in place: the region is an
/// [`AlignedBytes`] reserved up front (an anonymous map for large sizes, whose untouched pages
/// are not resident) and doubled when a piece doesn't fit (a copy, only when the estimate
/// given to [`WeightsBuilder::with_capacity`] was short). Compile-time forms can be built
/// straight into it ([`WeightsBuilder::alloc_f32`]), so a large weight is never held twice
/// besides its source.
pub struct WeightsBuilder {
    region: AlignedBytes,
    len: usize,
    seen: HashMap<(usize, usize), usize>,
}

impl Default for WeightsBuilder {
    fn default() -> Self {
        WeightsBuilder::with_capacity(0)
    }
}

impl WeightsBuilder {
    /// A builder whose region can take `bytes` before it has to grow.
    pub fn with_capacity(bytes: usize) -> WeightsBuilder {
        WeightsBuilder {
            region: AlignedBytes::zeroed(bytes.max(ARENA_ALIGN)),
            len: 0,
            seen: HashMap::new(),
        }
    }

    /// Reserves `n` bytes at the next aligned offset; returns the offset.
    fn reserve(&mut self, n: usize) -> usize {
        let off = self.len.next_multiple_of(ARENA_ALIGN);
        let end = off + n;
        if end > self.region.len() {
            let mut bigger = AlignedBytes::zeroed(end.max(self.region.len().saturating_mul(2)));
            bigger.as_mut_slice()[..self.len].copy_from_slice(&self.region.as_slice()[..self.len]);
            self.region = bigger;
        }
        self.len = end;
        off
    }

    /// Appends a copy of `data` at the next aligned offset and returns that offset.
    pub fn add(&mut self, data: &[u8]) -> usize {
        let off = self.reserve(data.len());
        self.region.as_mut_slice()[off..off + data.len()].copy_from_slice(data);
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

    /// Appends floats (little-endian).
    pub fn f32s(&mut self, v: &[f32]) -> usize {
        let (off, dst) = self.alloc_f32(v.len());
        dst.copy_from_slice(v);
        off
    }

    /// Appends `v` (dropped once copied in).
    pub fn f32_vec(&mut self, v: Vec<f32>) -> usize {
        self.f32s(&v)
    }

    /// Reserves `n` zeroed floats at the next aligned offset, to be written in place (e.g. a
    /// packed matrix); returns the offset and the floats.
    pub fn alloc_f32(&mut self, n: usize) -> (usize, &mut [f32]) {
        let off = self.reserve(n * 4);
        let bytes = &mut self.region.as_mut_slice()[off..off + n * 4];
        // SAFETY: `bytes` is 4-byte aligned (the region is 64-aligned and so is `off`), holds
        // exactly `n * 4` initialized bytes, and any bit pattern is a valid f32; the result
        // borrows `self` mutably, so nothing else reaches these bytes meanwhile. Floats are
        // stored in the host's order, little-endian on every target arenac compiles for.
        let floats = unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<f32>(), n) };
        (off, floats)
    }

    /// Bytes so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The finished, aligned region, sealed read-only (the reserved block itself; its unused
    /// tail is never touched, so for a mapped block it is never resident).
    pub fn finish(mut self) -> std::io::Result<WeightsRegion> {
        self.region.len = self.len;
        WeightsRegion::seal(self.region)
    }
}

/// The finished weights region, read-only: a mapped region is sealed with `PROT_READ`
/// (a stray write through it faults instead of corrupting a weight); a small one stays a heap
/// block that nothing writes.
pub struct WeightsRegion {
    /// The bytes (the mapping inside is writable only until sealed below).
    bytes: AlignedBytes,
    /// The sealed mapping, when the region was mapped.
    sealed: Option<memmap2::Mmap>,
}

impl WeightsRegion {
    fn seal(mut bytes: AlignedBytes) -> std::io::Result<WeightsRegion> {
        let sealed = match bytes.map.take() {
            // On failure the mapping is gone with the error: `bytes` (its pointer dangling) is
            // marked borrowed so it never frees it, and is dropped right here.
            Some(map) => match map.make_read_only() {
                Ok(ro) => Some(ro),
                Err(e) => {
                    bytes.borrowed = true;
                    return Err(e);
                }
            },
            None => None,
        };
        if let Some(ro) = &sealed {
            // The mapping moved into `sealed`; `bytes` must not free it again.
            bytes.ptr = ro.as_ptr().cast_mut();
            bytes.borrowed = true;
        }
        Ok(WeightsRegion { bytes, sealed })
    }

    /// Base address (64-aligned).
    pub fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// Bytes in the region.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Whether the region is sealed read-only by the kernel.
    pub fn is_sealed(&self) -> bool {
        self.sealed.is_some()
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
    /// The block is owned elsewhere (a sealed [`WeightsRegion`]'s mapping): nothing to free.
    borrowed: bool,
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
    fn region_grows_and_keeps_every_piece_aligned_and_intact() {
        // A short estimate: the region has to grow (copy) several times, once past the size
        // at which blocks become anonymous maps.
        let mut w = WeightsBuilder::with_capacity(100);
        let mut pieces = Vec::new();
        for i in 0..40usize {
            let v: Vec<f32> = (0..i * 997).map(|j| (i * 31 + j) as f32).collect();
            let off = if i % 2 == 0 {
                w.f32s(&v)
            } else {
                let (off, dst) = w.alloc_f32(v.len());
                dst.copy_from_slice(&v);
                off
            };
            assert_eq!(off % ARENA_ALIGN, 0);
            let b = [i as u8; 3];
            pieces.push((off, v, w.add(&b), b));
        }
        assert!(w.len() > AlignedBytes::MAP_MIN);
        let region = w.finish().expect("seals");
        assert!(region.is_sealed());
        for (off, v, boff, b) in pieces {
            let got: Vec<f32> = region.as_slice()[off..off + 4 * v.len()]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            assert_eq!(got, v);
            assert_eq!(&region.as_slice()[boff..boff + 3], &b);
        }
    }
}
