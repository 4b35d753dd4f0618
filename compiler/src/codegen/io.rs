//! Graph inputs and outputs in the arena: [`IoSlot`], and [`IoSlot::store`], the one way an
//! input's data goes into its slot (copied, or rounded to 16 bits for an input that
//! `--activations f16|bf16` stores narrowed).

use crate::gemm::stage16::{self, N16};
use crate::ir::types::{DType, TensorType};

/// Where a graph input or output lives in the arena.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoSlot {
    /// Value name in the model.
    pub name: String,
    /// Dtype and static shape, as declared: what the caller passes (an input) or reads (an
    /// output).
    pub ty: TensorType,
    /// Byte offset in the arena: a multiple of [`super::ARENA_ALIGN`] for an input; for an
    /// output a multiple of its element size (an output stored in a Concat's buffer, e.g. a
    /// view of an in-place Concat input, sits at that input's offset in the buffer).
    pub offset: usize,
    /// The element type the arena holds it in: `ty.dtype`, except for an f32 input stored
    /// narrowed by `--activations f16|bf16` (`crate::analysis::act_type`), rounded to f16 or
    /// bf16 on copy-in by [`IoSlot::store`].
    pub stored: DType,
}

impl IoSlot {
    /// A slot stored as declared.
    pub fn new(name: impl Into<String>, ty: TensorType, offset: usize) -> IoSlot {
        let stored = ty.dtype;
        IoSlot {
            name: name.into(),
            ty,
            offset,
            stored,
        }
    }

    /// The 16-bit type an f32 input is rounded to on copy-in; `None` when stored as declared.
    pub fn narrowed(&self) -> Option<N16> {
        match (self.ty.dtype, self.stored) {
            (DType::F32, DType::F16) => Some(N16::F16),
            (DType::F32, DType::BF16) => Some(N16::Bf16),
            _ => None,
        }
    }

    /// Bytes the slot takes in the arena (`None`: a dynamic shape or an overflow).
    pub fn stored_bytes(&self) -> Option<usize> {
        if self.stored == self.ty.dtype {
            return self.ty.bytes();
        }
        self.ty.numel()?.checked_mul(self.stored.size())
    }

    /// Writes input data `data` (the declared type's bytes, in any alignment) into `dst`,
    /// the slot's bytes in the arena: copied, or, for a narrowed input, each f32 rounded to
    /// nearest even into 16 bits by [`stage16::narrow`] (the bits of the Cast kernel the
    /// narrowing replaces; AVX-512 or AVX2+F16C loops). Copies as many whole elements as
    /// both hold (they are equal for validated data). Allocates nothing.
    pub fn store(&self, data: &[u8], dst: &mut [u8]) {
        let Some(t) = self.narrowed() else {
            let n = data.len().min(dst.len());
            dst[..n].copy_from_slice(&data[..n]);
            return;
        };
        let n = (data.len() / 4).min(dst.len() / 2);
        let (data, dst) = (&data[..n * 4], &mut dst[..n * 2]);
        // SAFETY: every bit pattern is a valid u16; `align_to_mut` only puts correctly
        // aligned, whole elements in the middle part.
        let (dh, out, dt) = unsafe { dst.align_to_mut::<u16>() };
        // SAFETY: likewise for f32.
        let (sh, src, st) = unsafe { data.align_to::<f32>() };
        if dh.is_empty() && dt.is_empty() && sh.is_empty() && st.is_empty() {
            stage16::narrow(t, src, out);
            return;
        }
        // Unaligned: through a stack buffer of floats, a chunk at a time.
        narrow_unaligned(t, data, dst);
    }
}

/// [`IoSlot::store`]'s rounding for bytes of any alignment: `data` (`4 n` bytes of f32) into
/// `dst` (`2 n` bytes).
fn narrow_unaligned(t: N16, data: &[u8], dst: &mut [u8]) {
    const CHUNK: usize = stage16::CHUNK;
    let mut xs = [0f32; CHUNK];
    let mut hs = [0u16; CHUNK];
    for (src, out) in data.chunks(CHUNK * 4).zip(dst.chunks_mut(CHUNK * 2)) {
        let n = (src.len() / 4).min(out.len() / 2);
        for (x, b) in xs.iter_mut().zip(src.chunks_exact(4)) {
            *x = f32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        }
        stage16::narrow(t, &xs[..n], &mut hs[..n]);
        for (h, o) in hs[..n].iter().zip(out.chunks_exact_mut(2)) {
            o.copy_from_slice(&h.to_ne_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(stored: DType, n: usize) -> IoSlot {
        IoSlot {
            stored,
            ..IoSlot::new("x", TensorType::new(DType::F32, vec![n]), 0)
        }
    }

    /// Aligned and unaligned sources, odd lengths and 0 elements give `half`'s bits.
    #[test]
    fn store_rounds_like_half_at_any_alignment() {
        let vals: Vec<f32> = (0..2051)
            .map(|i| (i as f32 - 1000.0) * 1.000_123_4e-3 + if i % 7 == 0 { 65519.0 } else { 0.0 })
            .chain([f32::NAN, -f32::INFINITY, 1e-8, -0.0, 70000.0])
            .collect();
        for len in [0, 1, 7, 17, 1025, vals.len()] {
            let src: Vec<u8> = vals[..len].iter().flat_map(|v| v.to_ne_bytes()).collect();
            for (stored, want) in [
                (
                    DType::F16,
                    vals[..len]
                        .iter()
                        .map(|&v| half::f16::from_f32(v).to_bits())
                        .collect::<Vec<u16>>(),
                ),
                (
                    DType::BF16,
                    vals[..len]
                        .iter()
                        .map(|&v| half::bf16::from_f32(v).to_bits())
                        .collect(),
                ),
            ] {
                let s = slot(stored, len);
                assert_eq!(s.stored_bytes(), Some(2 * len));
                for shift in [0, 1, 2, 3] {
                    let mut buf = vec![0u8; src.len() + 4];
                    buf[shift..shift + src.len()].copy_from_slice(&src);
                    let mut dst = vec![0u16; len + 2];
                    // SAFETY: u16 to bytes, in bounds.
                    let bytes = unsafe {
                        std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<u8>(), 2 * len + 4)
                    };
                    for dshift in [0, 1] {
                        bytes.fill(0);
                        s.store(
                            &buf[shift..shift + src.len()],
                            &mut bytes[dshift..dshift + 2 * len],
                        );
                        let got: Vec<u16> = bytes[dshift..dshift + 2 * len]
                            .chunks_exact(2)
                            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
                            .collect();
                        assert_eq!(got, want, "{stored:?} len {len} shift {shift}/{dshift}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_slot_stored_as_declared_is_copied() {
        let s = IoSlot::new("x", TensorType::new(DType::F32, vec![3]), 64);
        assert_eq!((s.narrowed(), s.stored_bytes()), (None, Some(12)));
        let mut dst = [0u8; 12];
        s.store(&[7u8; 12], &mut dst);
        assert_eq!(dst, [7u8; 12]);
    }
}
