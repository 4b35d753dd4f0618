//! The read-only weights region: every constant a node reads, each at a 64-aligned offset
//! (identical byte buffers stored once), plus compile-time transforms of constants (Gemm's
//! packed B with alpha folded in, BatchNormalization's scale and shift).

use std::collections::HashMap;

use super::ARENA_ALIGN;
pub use super::aligned::AlignedBytes;
use crate::gemm::lowp::WeightType;
use crate::ir::tensor::Tensor;

/// Collects the weights region, writing each piece once, in place: the region is an
/// [`AlignedBytes`] reserved up front (an anonymous map for large sizes, whose untouched pages
/// are not resident) and grown when a piece doesn't fit (a map is remapped, not copied).
/// Compile-time forms are built straight into it ([`WeightsBuilder::form_f32`]), so a large
/// weight is never held twice besides its source, and each form of a constant is stored once
/// however many nodes read it (layers sharing weights share their packed forms).
pub struct WeightsBuilder<'a> {
    region: AlignedBytes,
    len: usize,
    /// Offsets of the pieces stored so far, by what they hold.
    seen: HashMap<FormKey, usize>,
    /// A constant decoded to f32 when it cannot be borrowed as `&[f32]` (unaligned in the
    /// mapped file, or another dtype): reused from one form to the next, so its pages are
    /// faulted in once for the largest such constant, not once per constant.
    decoded: Vec<f32>,
    /// The type the GEMM paths' weights are stored in ([`WeightsBuilder::storage`]).
    storage: WeightType,
    /// Told which source bytes have been read for the last time (`Some`) or that every
    /// constant read so far may go (`None`): see `codegen::compile_with`.
    release: Option<&'a mut ReleaseHook<'a>>,
    /// Bytes of the pieces stored in a reduced type, and the f32 bytes of their sources.
    reduced: (usize, usize),
    /// Nodes whose weights were stored in the reduced type.
    pub(crate) reduced_nodes: std::collections::HashSet<crate::ir::graph::NodeId>,
}

/// The source-release hook: `Some(bytes)` names source bytes read for now, `None` every
/// constant read so far.
pub type ReleaseHook<'a> = dyn FnMut(Option<&[u8]>) + 'a;

/// What a stored piece holds: a form (`form`, e.g. "packed B 256x768 rs=1 cs=256") computed
/// from constant buffers (by address and length; a buffer shared by several tensors, such as
/// a folded Reshape's, is one source). The raw bytes of one constant have the empty form.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FormKey {
    sources: Vec<(usize, usize)>,
    form: String,
}

impl FormKey {
    fn new(sources: &[&Tensor], form: String) -> FormKey {
        FormKey {
            sources: sources
                .iter()
                .map(|t| (t.bytes().as_ptr() as usize, t.bytes().len()))
                .collect(),
            form,
        }
    }
}

impl Default for WeightsBuilder<'_> {
    fn default() -> Self {
        WeightsBuilder::with_capacity(0)
    }
}

impl<'a> WeightsBuilder<'a> {
    /// A builder whose region can take `bytes` before it has to grow.
    pub fn with_capacity(bytes: usize) -> WeightsBuilder<'a> {
        WeightsBuilder {
            region: AlignedBytes::zeroed(bytes.max(ARENA_ALIGN)),
            len: 0,
            seen: HashMap::new(),
            decoded: Vec::new(),
            storage: WeightType::F32,
            release: None,
            reduced: (0, 0),
            reduced_nodes: Default::default(),
        }
    }

    /// Stores the GEMM paths' weights (Conv, Gemm and MatMul with a constant B) in `t`.
    pub fn set_storage(&mut self, t: WeightType) {
        self.storage = t;
    }

    /// The type the GEMM paths' weights are stored in.
    pub fn storage(&self) -> WeightType {
        self.storage
    }

    /// Gives the builder the hook that drops source pages (see `codegen::compile_with`).
    pub fn set_release(&mut self, release: &'a mut ReleaseHook<'a>) {
        self.release = Some(release);
    }

    /// Tells the hook that `bytes` (of a constant's source) have been read for the last time.
    pub fn release_part(&mut self, bytes: &[u8]) {
        if let Some(r) = self.release.as_mut() {
            r(Some(bytes));
        }
    }

    /// Tells the hook that every constant read so far may go.
    pub fn release_all(&mut self) {
        if let Some(r) = self.release.as_mut() {
            r(None);
        }
    }

    /// Bytes stored in the reduced type so far, and the f32 bytes their sources hold.
    pub fn reduced_bytes(&self) -> (usize, usize) {
        self.reduced
    }

    /// The offset of `n` bytes computed from the constants `sources` by `form` (as
    /// [`WeightsBuilder::form_f32`], for a piece of any layout): `fill` gets the zeroed bytes
    /// and this builder's release hook (to report source bytes it has read for the last time).
    /// `reduced`: the f32 bytes the same weights take when this piece stores them in a reduced
    /// type (counted in [`WeightsBuilder::reduced_bytes`]).
    pub fn form_bytes(
        &mut self,
        sources: &[&Tensor],
        form: String,
        n: usize,
        reduced: Option<usize>,
        fill: impl FnOnce(&mut [u8], &mut dyn FnMut(&[u8])),
    ) -> usize {
        let key = FormKey::new(sources, form);
        if let Some(&off) = self.seen.get(&key) {
            return off;
        }
        let off = reserve_in(&mut self.region, &mut self.len, n);
        let dst = &mut self.region.as_mut_slice()[off..off + n];
        let mut hook = |b: &[u8]| {
            if let Some(r) = self.release.as_mut() {
                r(Some(b));
            }
        };
        fill(dst, &mut hook);
        self.seen.insert(key, off);
        if let Some(f) = reduced {
            self.reduced.0 += n;
            self.reduced.1 += f;
        }
        off
    }

    /// Reserves `n` bytes at the next aligned offset; returns the offset.
    fn reserve(&mut self, n: usize) -> usize {
        reserve_in(&mut self.region, &mut self.len, n)
    }

    /// Appends a copy of `data` at the next aligned offset and returns that offset.
    pub fn add(&mut self, data: &[u8]) -> usize {
        let off = self.reserve(data.len());
        self.region.as_mut_slice()[off..off + data.len()].copy_from_slice(data);
        off
    }

    /// A constant tensor's offset (stored once per distinct byte buffer).
    pub fn tensor(&mut self, t: &Tensor) -> usize {
        let key = FormKey::new(&[t], String::new());
        if let Some(&off) = self.seen.get(&key) {
            return off;
        }
        let off = self.add(t.bytes());
        self.seen.insert(key, off);
        off
    }

    /// The offset of `n` floats computed from the constants `sources` by the transform
    /// `form`: `fill` writes them straight into the region (zeroed beforehand) the first time
    /// this (sources, form) pair is asked for; later calls return the same offset without
    /// calling `fill`. `form` must name the transform and every parameter `fill` depends on
    /// besides the sources' bytes (shapes, strides, scales...).
    pub fn form_f32(
        &mut self,
        sources: &[&Tensor],
        form: String,
        n: usize,
        fill: impl FnOnce(&mut [f32]),
    ) -> usize {
        let key = FormKey::new(sources, form);
        if let Some(&off) = self.seen.get(&key) {
            return off;
        }
        let (off, dst) = self.alloc_f32(n);
        fill(dst);
        self.seen.insert(key, off);
        off
    }

    /// [`WeightsBuilder::form_f32`] of one constant `t`, whose elements `fill` reads as f32
    /// (first argument): its own floats when they can be borrowed, else a decoded copy in a
    /// buffer the builder reuses.
    pub fn form_f32_of(
        &mut self,
        t: &Tensor,
        form: String,
        n: usize,
        fill: impl FnOnce(&[f32], &mut [f32]),
    ) -> usize {
        let key = FormKey::new(&[t], form);
        if let Some(&off) = self.seen.get(&key) {
            return off;
        }
        // A large decoded copy lives in an anonymous map of its own, unmapped (returned to
        // the system) right after use instead of lingering in the heap as the region grows.
        let mut big: Option<memmap2::MmapMut> = None;
        if t.f32_slice().is_none() {
            let numel = t.numel();
            let dst: &mut [f32] = if numel > DECODED_KEEP
                && let Ok(m) = memmap2::MmapMut::map_anon(numel * 4)
            {
                let m = big.insert(m);
                // SAFETY: any bytes are valid f32s; the map is page-aligned, so the middle
                // part is all of it.
                let (_, floats, _) = unsafe { m.align_to_mut::<f32>() };
                floats
            } else {
                self.decoded.clear();
                self.decoded.resize(numel, 0.0);
                &mut self.decoded
            };
            // Decoded a block at a time, each block's source pages (usually the mapped
            // file's) released as soon as it is read: the source and its copy are never both
            // resident whole.
            const BLOCK: usize = 1 << 16;
            let dtype = t.dtype();
            let size = dtype.size().max(1);
            let bytes = t.bytes();
            for (i, out) in dst.chunks_mut(BLOCK).enumerate() {
                let start = (i * BLOCK * size).min(bytes.len());
                let part = &bytes[start..(start + out.len() * size).min(bytes.len())];
                write_f32s_from(dtype, part, out);
                if let Some(r) = self.release.as_mut() {
                    r(Some(part));
                }
            }
        }
        let src: &[f32] = match (t.f32_slice(), &big) {
            (Some(s), _) => s,
            (None, Some(m)) => {
                // SAFETY: as above (page-aligned, any bytes are f32s).
                let (_, floats, _) = unsafe { m.align_to::<f32>() };
                &floats[..t.numel()]
            }
            (None, None) => &self.decoded,
        };
        let off = reserve_in(&mut self.region, &mut self.len, n * 4);
        fill(src, f32s_at(&mut self.region, off, n));
        self.seen.insert(key, off);
        // Its source pages (often the mapped file's) may go now, not a few MiB later.
        self.release_part(t.bytes());
        drop(big);
        off
    }

    /// The offset of constant `t` as f32 (its own bytes for an f32 tensor, else converted),
    /// stored once.
    pub fn tensor_f32(&mut self, t: &Tensor) -> usize {
        if t.dtype() == crate::ir::types::DType::F32 {
            return self.tensor(t);
        }
        self.form_f32(&[t], "as f32".into(), t.numel(), |dst| t.write_f32s(dst))
    }

    /// Appends floats (little-endian).
    pub fn f32s(&mut self, v: &[f32]) -> usize {
        let (off, dst) = self.alloc_f32(v.len());
        dst.copy_from_slice(v);
        off
    }

    /// Reserves `n` zeroed floats at the next aligned offset, to be written in place (e.g. a
    /// packed matrix); returns the offset and the floats.
    pub fn alloc_f32(&mut self, n: usize) -> (usize, &mut [f32]) {
        let off = self.reserve(n * 4);
        (off, f32s_at(&mut self.region, off, n))
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

/// Reserves `n` bytes of `region` at the next aligned offset past `len` (growing the region
/// when needed) and moves `len` past them; returns the offset.
fn reserve_in(region: &mut AlignedBytes, len: &mut usize, n: usize) -> usize {
    let off = len.next_multiple_of(ARENA_ALIGN);
    let end = off + n;
    if end > region.len() {
        region.grow(end.max(region.len().saturating_mul(2)));
    }
    *len = end;
    off
}

/// The `n` floats of `region` at byte offset `off` (64-aligned, inside the region).
fn f32s_at(region: &mut AlignedBytes, off: usize, n: usize) -> &mut [f32] {
    let bytes = &mut region.as_mut_slice()[off..off + n * 4];
    // SAFETY: `bytes` is 4-byte aligned (the region is 64-aligned and so is `off`), holds
    // exactly `n * 4` initialized bytes, and any bit pattern is a valid f32; the result
    // borrows the region mutably, so nothing else reaches these bytes meanwhile. Floats are
    // stored in the host's order, little-endian on every target arenac compiles for.
    unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<f32>(), n) }
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

/// A decoded copy longer than this many floats (1 MiB) gets an anonymous map of its own,
/// unmapped after use, rather than the builder's reused vector.
const DECODED_KEEP: usize = 1 << 18;

/// Writes the elements of `bytes` (little-endian `dtype`) as f32 into `out`, stopping at the
/// shorter of the two: [`Tensor::write_f32s`] over a part of a tensor's bytes.
fn write_f32s_from(dtype: crate::ir::types::DType, bytes: &[u8], out: &mut [f32]) {
    let size = dtype.size().max(1);
    if dtype == crate::ir::types::DType::F32 {
        for (x, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
    } else {
        for (x, c) in out.iter_mut().zip(bytes.chunks_exact(size)) {
            *x = crate::ir::tensor::read_f64(dtype, c) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_f32_source_is_decoded_in_blocks_and_released_as_it_goes() {
        use crate::ir::types::DType;
        // More floats than DECODED_KEEP (its own map) and several blocks, one byte off
        // 4-byte alignment, as a weight inside a protobuf often is; then a small one (the
        // reused vector) and an f16 source.
        for (dtype, numel) in [
            (DType::F32, DECODED_KEEP + 70_001),
            (DType::F32, 1001),
            (DType::F16, 70_000),
        ] {
            let vals: Vec<f32> = (0..numel).map(|i| (i % 1999) as f32 - 999.0).collect();
            let mut raw = vec![0u8];
            for v in &vals {
                match dtype {
                    DType::F16 => raw.extend(half::f16::from_f32(*v).to_le_bytes()),
                    _ => raw.extend(v.to_le_bytes()),
                }
            }
            let all = bytes::Bytes::from(raw);
            let t = Tensor::from_bytes(dtype, vec![numel], all.slice(1..)).expect("tensor");
            assert!(t.f32_slice().is_none());
            let base = t.bytes().as_ptr() as usize;
            let mut released: Vec<(usize, usize)> = Vec::new();
            let mut hook = |part: Option<&[u8]>| {
                if let Some(p) = part {
                    released.push((p.as_ptr() as usize - base, p.len()));
                }
            };
            {
                let mut w = WeightsBuilder::with_capacity(100);
                w.set_release(&mut hook);
                let off = w.form_f32_of(&t, "reversed".into(), numel, |src, out| {
                    for (o, x) in out.iter_mut().zip(src.iter().rev()) {
                        *o = *x;
                    }
                });
                let region = w.finish().expect("seals");
                let got: Vec<f32> = region.as_slice()[off..off + 4 * numel]
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                let want: Vec<f32> = vals.iter().rev().copied().collect();
                assert_eq!(got, want, "{dtype:?} {numel}");
            }
            // Every byte released, in order, block by block before the whole at the end.
            let size = dtype.size();
            let blocks = numel.div_ceil(1 << 16);
            assert_eq!(released.len(), blocks + 1, "{dtype:?} {numel}");
            let mut at = 0;
            for &(start, len) in &released[..blocks] {
                assert_eq!(start, at);
                at += len;
            }
            assert_eq!(at, numel * size);
            assert_eq!(released[blocks], (0, numel * size));
        }
    }

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
