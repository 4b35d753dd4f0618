//! Data movement: a strided copy (Transpose, Slice, Concat, Split) over collapsed dims with
//! signed element strides on both sides; an innermost dim contiguous on both sides is one run
//! of bytes ([`copy_run`]: 16-byte vectors whatever the element size). Every kernel here moves bytes, so it serves any dtype of element
//! size 1, 2, 4 or 8. `gather.rs` holds the index-table gathers (Pad, Expand, Tile, nearest
//! Resize) and the fill; `index.rs` the run-time-index kernels (GatherElements, GatherND,
//! the scatters, OneHot) and Trilu, ReverseSequence.

mod gather;
mod index;

pub use gather::{DimMap, FillDesc, IndexGatherDesc};
pub use index::{
    Col2ImDesc, Combine, ElementsDesc, IndexKind, NdDesc, OneHotDesc, ReverseDesc, TriluDesc,
    byte_strides,
};

use cranelift_codegen::ir::types::{F32X4, I8, I16, I32, I64};
use cranelift_codegen::ir::{InstBuilder, Type, Value};
use cranelift_frontend::FunctionBuilder;

use super::{for_range, mem};

/// `dst[sum i_k dst_k] = src[sum i_k src_k]` over `dims`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyDesc {
    /// Bytes per element (1, 2, 4 or 8).
    pub elem: usize,
    /// Dims (collapsed).
    pub dims: Vec<usize>,
    /// Source element strides.
    pub src: Vec<i64>,
    /// Destination element strides.
    pub dst: Vec<i64>,
}

impl CopyDesc {
    /// Builds the descriptor, dropping size-1 dims and merging runs contiguous on both sides.
    pub fn new(elem: usize, dims: &[usize], src: &[i64], dst: &[i64]) -> CopyDesc {
        let mut d = CopyDesc {
            elem,
            dims: Vec::new(),
            src: Vec::new(),
            dst: Vec::new(),
        };
        for k in 0..dims.len() {
            if dims[k] != 1 {
                d.dims.push(dims[k]);
                d.src.push(src[k]);
                d.dst.push(dst[k]);
            }
        }
        let mut k = d.dims.len();
        while k >= 2 {
            let (a, b) = (k - 2, k - 1);
            let n = d.dims[b] as i64;
            if d.src[a] == d.src[b] * n && d.dst[a] == d.dst[b] * n {
                d.dims[a] *= d.dims[b];
                d.src[a] = d.src[b];
                d.dst[a] = d.dst[b];
                d.dims.remove(b);
                d.src.remove(b);
                d.dst.remove(b);
            }
            k -= 1;
        }
        if d.dims.is_empty() {
            d.dims.push(1);
            d.src.push(1);
            d.dst.push(1);
        }
        d
    }

    fn ty(&self) -> Type {
        match self.elem {
            1 => I8,
            2 => I16,
            8 => I64,
            _ => I32,
        }
    }

    fn off(b: &mut FunctionBuilder<'_>, p: Value, i: Value, stride: i64) -> Value {
        if stride == 0 {
            return p;
        }
        let s = b.ins().imul_imm_s(i, stride);
        b.ins().iadd(p, s)
    }

    /// Emits the body for `(src, dst)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, src: Value, dst: Value) {
        self.level(b, 0, src, dst);
    }

    fn level(&self, b: &mut FunctionBuilder<'_>, k: usize, s: Value, d: Value) {
        let e = self.elem as i64;
        let last = k + 1 == self.dims.len();
        let n = self.dims[k];
        if last && self.src[k] == 1 && self.dst[k] == 1 {
            copy_run(b, s, d, n * self.elem);
            return;
        }
        let ty = self.ty();
        for_range(b, n, &mut |b, i| {
            let sp = Self::off(b, s, i, self.src[k] * e);
            let dp = Self::off(b, d, i, self.dst[k] * e);
            if last {
                let v = b.ins().load(ty, mem(), sp, 0);
                b.ins().store(mem(), v, dp, 0);
            } else {
                self.level(b, k + 1, sp, dp);
            }
        });
    }
}

/// Copies `bytes` contiguous bytes from `s` to `d` whatever the element size: 64 bytes per
/// loop step (four 16-byte vectors, all loaded before any is stored), then at most three
/// 16-byte vectors and an 8/4/2/1-byte tail, straight-line. Safe when `d == s` or `d` lies
/// before `s` (each block is read before it is written).
pub(crate) fn copy_run(b: &mut FunctionBuilder<'_>, s: Value, d: Value, bytes: usize) {
    let blocks = bytes / 64;
    if blocks > 0 {
        for_range(b, blocks, &mut |b, i| {
            let sp = CopyDesc::off(b, s, i, 64);
            let dp = CopyDesc::off(b, d, i, 64);
            let v: Vec<Value> = (0..4)
                .map(|j| b.ins().load(F32X4, mem(), sp, 16 * j))
                .collect();
            for (j, v) in (0i32..).zip(v) {
                b.ins().store(mem(), v, dp, 16 * j);
            }
        });
    }
    let mut at = blocks * 64;
    for (size, ty) in [(16, F32X4), (8, I64), (4, I32), (2, I16), (1, I8)] {
        while bytes - at >= size {
            let o = at as i32;
            let v = b.ins().load(ty, mem(), s, o);
            b.ins().store(mem(), v, d, o);
            at += size;
        }
    }
}

/// Gather along an axis with runtime indices (i64 or i32), negative indices counted from
/// the end, out-of-range ones replaced by 0 (memory safety) and, when `checked`, reported through
/// the fault record (ONNX calls them an error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatherDesc {
    /// Bytes per data element.
    pub elem: usize,
    /// Bytes per index (4 or 8).
    pub index_bytes: usize,
    /// Product of the data dims before the axis.
    pub outer: usize,
    /// The axis' size.
    pub dim: usize,
    /// Number of indices.
    pub count: usize,
    /// Product of the data dims after the axis.
    pub inner: usize,
    /// Out-of-range indices are reported (two more params: the fault record, the tag).
    pub checked: bool,
}

impl GatherDesc {
    /// Emits the body for `(data, indices, out)`, then the fault record and tag when
    /// `checked`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, p: &[Value]) {
        let (data, idx, out) = (p[0], p[1], p[2]);
        let sink = index::sink(self.checked, p, 3);
        let row = (self.inner * self.elem) as i64;
        let copy = CopyDesc::new(self.elem, &[self.inner], &[1], &[1]);
        for_range(b, self.outer, &mut |b, o| {
            let dp = Self::mul_add(b, data, o, row * self.dim as i64);
            let op = Self::mul_add(b, out, o, row * self.count as i64);
            for_range(b, self.count, &mut |b, i| {
                let ip = Self::mul_add(b, idx, i, self.index_bytes as i64);
                let k = if self.index_bytes == 8 {
                    b.ins().load(I64, mem(), ip, 0)
                } else {
                    let k = b.ins().load(I32, mem(), ip, 0);
                    b.ins().sextend(I64, k)
                };
                let k = index::index_in(b, k, self.dim, sink.as_ref());
                let src = Self::mul_add(b, dp, k, row);
                let dst = Self::mul_add(b, op, i, row);
                copy.emit(b, src, dst);
            });
        });
    }

    fn mul_add(b: &mut FunctionBuilder<'_>, p: Value, i: Value, scale: i64) -> Value {
        let s = b.ins().imul_imm_s(i, scale);
        b.ins().iadd(p, s)
    }
}
