//! Kernels of the index-driven movement ops: GatherElements / ScatterElements, GatherND /
//! ScatterND, OneHot, Trilu, ReverseSequence, Col2Im. Loops run over static shapes; run-time indices
//! are loaded, negative ones counted from the end, and an out-of-range one is replaced by 0
//! so no access leaves its tensor. ONNX calls out-of-range indices (and sequence lengths) an error:
//! a kernel built `checked` reports the first one through the fault record
//! ([`crate::codegen::fault`]; two extra params after the output: the record, the node's tag)
//! and replaces it all the same. OneHot ignores out-of-range indices, as its spec says.

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::immediates::{Ieee32, Ieee64};
use cranelift_codegen::ir::types::{F32, F64, I8, I16, I32, I64};
use cranelift_codegen::ir::{InstBuilder, Type, Value};
use cranelift_frontend::FunctionBuilder;

use super::super::{for_range, mem, offset};
use super::CopyDesc;
use crate::codegen::fault::FaultSink;
use crate::ops::Reduction;

/// How a scatter writes an update: the reduction and how the element's bits are numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Combine {
    /// The reduction.
    pub reduction: Reduction,
    /// Elements are IEEE floats (f32 or f64 by size).
    pub float: bool,
    /// Integer elements are signed (for max/min).
    pub signed: bool,
}

/// The integer type of `elem` bytes.
fn int_ty(elem: usize) -> Type {
    match elem {
        1 => I8,
        2 => I16,
        8 => I64,
        _ => I32,
    }
}

impl Combine {
    fn ty(self, elem: usize) -> Type {
        match (self.float && self.reduction != Reduction::None, elem) {
            (true, 8) => F64,
            (true, _) => F32,
            (false, e) => int_ty(e),
        }
    }

    /// Reads `*t` and `*u`, stores the combination at `t`.
    fn emit(self, b: &mut FunctionBuilder<'_>, elem: usize, t: Value, u: Value) {
        let ty = self.ty(elem);
        let new = b.ins().load(ty, mem(), u, 0);
        let v = if self.reduction == Reduction::None {
            new
        } else {
            let old = b.ins().load(ty, mem(), t, 0);
            match (self.reduction, self.float, self.signed) {
                (Reduction::Add, true, _) => b.ins().fadd(old, new),
                (Reduction::Add, false, _) => b.ins().iadd(old, new),
                (Reduction::Mul, true, _) => b.ins().fmul(old, new),
                (Reduction::Mul, false, _) => b.ins().imul(old, new),
                (Reduction::Max, true, _) => b.ins().fmax(old, new),
                (Reduction::Max, false, true) => b.ins().smax(old, new),
                (Reduction::Max, false, false) => b.ins().umax(old, new),
                (Reduction::Min, true, _) => b.ins().fmin(old, new),
                (Reduction::Min, false, true) => b.ins().smin(old, new),
                (Reduction::Min, false, false) => b.ins().umin(old, new),
                (Reduction::None, ..) => new,
            }
        };
        b.ins().store(mem(), v, t, 0);
    }
}

/// Loads an i32/i64 index at `p` as i64.
fn load_index(b: &mut FunctionBuilder<'_>, p: Value, bytes: usize) -> Value {
    if bytes == 8 {
        b.ins().load(I64, mem(), p, 0)
    } else {
        let k = b.ins().load(I32, mem(), p, 0);
        b.ins().sextend(I64, k)
    }
}

/// The fault sink of a kernel built `checked`: its last two params, after `n` others.
pub(crate) fn sink(checked: bool, p: &[Value], n: usize) -> Option<FaultSink> {
    match (checked, p.get(n), p.get(n + 1)) {
        (true, Some(&record), Some(&tag)) => Some(FaultSink { record, tag }),
        _ => None,
    }
}

/// Index `k` into a dim of `dim` (`dim >= 1`): negative counts from the end; outside
/// `-dim..dim` it is reported (with a sink) and replaced by 0, so no access leaves the
/// tensor. After the wrap, one unsigned compare tells both sides.
pub(crate) fn index_in(
    b: &mut FunctionBuilder<'_>,
    k: Value,
    dim: usize,
    sink: Option<&FaultSink>,
) -> Value {
    let d = dim as i64;
    let neg = b.ins().icmp_imm_s(IntCC::SignedLessThan, k, 0);
    let wrapped = b.ins().iadd_imm_s(k, d);
    let w = b.ins().select(neg, wrapped, k);
    let bad = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, w, d);
    if let Some(s) = sink {
        s.report_if(b, bad, k, -d, d - 1);
    }
    let zero = b.ins().iconst(I64, 0);
    b.ins().select(bad, zero, w)
}

/// `p + i * scale` with a signed byte scale.
fn add_scaled(b: &mut FunctionBuilder<'_>, p: Value, i: Value, scale: i64) -> Value {
    if scale == 0 {
        return p;
    }
    let s = b.ins().imul_imm_s(i, scale);
    b.ins().iadd(p, s)
}

/// Nested loops over `dims`, each pointer advancing by its own byte stride per dim.
fn nest(
    b: &mut FunctionBuilder<'_>,
    dims: &[usize],
    strides: &[Vec<i64>],
    ptrs: &[Value],
    body: &mut dyn FnMut(&mut FunctionBuilder<'_>, &[Value]),
) {
    let Some((&n, rest)) = dims.split_first() else {
        body(b, ptrs);
        return;
    };
    let depth = strides.first().map_or(0, |s| s.len() - dims.len());
    for_range(b, n, &mut |b, i| {
        let next: Vec<Value> = ptrs
            .iter()
            .zip(strides)
            .map(|(&p, s)| add_scaled(b, p, i, s[depth]))
            .collect();
        nest(b, rest, strides, &next, body);
    });
}

/// Row-major element strides of `shape`, times `elem` bytes.
pub fn byte_strides(shape: &[usize], elem: usize) -> Vec<i64> {
    let mut st = vec![elem as i64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        st[k] = st[k + 1] * shape[k + 1] as i64;
    }
    st
}

/// GatherElements (`scatter: None`; params data, indices, out) and ScatterElements
/// (params data, indices, updates, out: the data copied, then the updates combined in); then
/// the fault record and tag when `checked`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementsDesc {
    /// Bytes per data element.
    pub elem: usize,
    /// Bytes per index (4 or 8).
    pub index_bytes: usize,
    /// The indices' shape (also the updates' and a gather's output).
    pub dims: Vec<usize>,
    /// The data's shape.
    pub data: Vec<usize>,
    /// The indexed axis.
    pub axis: usize,
    /// Scatter combination, `None` for a gather.
    pub scatter: Option<Combine>,
    /// Out-of-range indices are reported.
    pub checked: bool,
}

impl ElementsDesc {
    /// Emits the body for the params listed on the type.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, p: &[Value]) {
        let n = if self.scatter.is_some() { 4 } else { 3 };
        let sink = sink(self.checked, p, n);
        let e = self.elem;
        let mut dst = byte_strides(&self.data, e);
        let axis_stride = dst[self.axis];
        dst[self.axis] = 0;
        let istr = byte_strides(&self.dims, self.index_bytes);
        let ostr = byte_strides(&self.dims, e);
        let dim = self.data[self.axis];
        match self.scatter {
            None => {
                let strides = [dst, istr, ostr];
                nest(b, &self.dims, &strides, &[p[0], p[1], p[2]], &mut |b, q| {
                    let k = load_index(b, q[1], self.index_bytes);
                    let k = index_in(b, k, dim, sink.as_ref());
                    let src = add_scaled(b, q[0], k, axis_stride);
                    let v = b.ins().load(int_ty(e), mem(), src, 0);
                    b.ins().store(mem(), v, q[2], 0);
                });
            }
            Some(c) => {
                let n: usize = self.data.iter().product();
                CopyDesc::new(e, &[n], &[1], &[1]).emit(b, p[0], p[3]);
                let strides = [dst, istr, ostr];
                nest(b, &self.dims, &strides, &[p[3], p[1], p[2]], &mut |b, q| {
                    let k = load_index(b, q[1], self.index_bytes);
                    let k = index_in(b, k, dim, sink.as_ref());
                    let t = add_scaled(b, q[0], k, axis_stride);
                    c.emit(b, e, t, q[2]);
                });
            }
        }
    }
}

/// GatherND (`scatter: None`; params data, indices, out) and ScatterND (params data,
/// indices, updates, out; `batches == 1`); then the fault record and tag when `checked`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NdDesc {
    /// Bytes per data element.
    pub elem: usize,
    /// Bytes per index (4 or 8).
    pub index_bytes: usize,
    /// Product of the batch dims.
    pub batches: usize,
    /// Index rows per batch.
    pub rows: usize,
    /// The data dims a row addresses (`k` of them).
    pub dims: Vec<usize>,
    /// Their element strides in the data.
    pub strides: Vec<usize>,
    /// Elements per addressed slice.
    pub slice: usize,
    /// Data elements per batch.
    pub data_batch: usize,
    /// Scatter combination, `None` for a gather.
    pub scatter: Option<Combine>,
    /// Out-of-range indices are reported.
    pub checked: bool,
}

impl NdDesc {
    /// Byte offset of the slice index row `row` (a pointer to its `k` indices) addresses.
    fn row_offset(
        &self,
        b: &mut FunctionBuilder<'_>,
        row: Value,
        sink: Option<&FaultSink>,
    ) -> Value {
        let mut off = b.ins().iconst(I64, 0);
        for (j, (&d, &s)) in self.dims.iter().zip(&self.strides).enumerate() {
            let q = b.ins().iadd_imm_s(row, (j * self.index_bytes) as i64);
            let k = load_index(b, q, self.index_bytes);
            let k = index_in(b, k, d, sink);
            let t = b.ins().imul_imm_s(k, (s * self.elem) as i64);
            off = b.ins().iadd(off, t);
        }
        off
    }

    /// Emits the body for the params listed on the type.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, p: &[Value]) {
        let n = if self.scatter.is_some() { 4 } else { 3 };
        let sink = sink(self.checked, p, n);
        let sink = sink.as_ref();
        let (e, k) = (self.elem, self.dims.len());
        let row_bytes = k * self.index_bytes;
        let slice_bytes = self.slice * e;
        let copy = CopyDesc::new(e, &[self.slice], &[1], &[1]);
        match self.scatter {
            None => for_range(b, self.batches, &mut |b, bt| {
                let dp = offset(b, p[0], bt, self.data_batch * e);
                let ip = offset(b, p[1], bt, self.rows * row_bytes);
                let op = offset(b, p[2], bt, self.rows * slice_bytes);
                for_range(b, self.rows, &mut |b, r| {
                    let row = offset(b, ip, r, row_bytes);
                    let off = self.row_offset(b, row, sink);
                    let src = b.ins().iadd(dp, off);
                    let dst = offset(b, op, r, slice_bytes);
                    copy.emit(b, src, dst);
                });
            }),
            Some(c) => {
                let n = self.data_batch * self.batches;
                CopyDesc::new(e, &[n], &[1], &[1]).emit(b, p[0], p[3]);
                for_range(b, self.rows, &mut |b, r| {
                    let row = offset(b, p[1], r, row_bytes);
                    let off = self.row_offset(b, row, sink);
                    let t0 = b.ins().iadd(p[3], off);
                    let u0 = offset(b, p[2], r, slice_bytes);
                    if c.reduction == Reduction::None {
                        copy.emit(b, u0, t0);
                        return;
                    }
                    for_range(b, self.slice, &mut |b, i| {
                        let t = offset(b, t0, i, e);
                        let u = offset(b, u0, i, e);
                        c.emit(b, e, t, u);
                    });
                });
            }
        }
    }
}

/// How OneHot reads its indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexKind {
    /// Integers of this many bytes, signed or not.
    Int {
        /// Bytes.
        bytes: usize,
        /// Signed.
        signed: bool,
    },
    /// f32 (or f64 with 8 bytes); a non-integral value hits nothing.
    Float {
        /// Bytes.
        bytes: usize,
    },
}

/// OneHot: params indices, values (`[off, on]`), out (`outer x depth x inner`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OneHotDesc {
    /// Bytes per value element.
    pub elem: usize,
    /// The indices' element kind.
    pub index: IndexKind,
    /// Index positions before the new axis.
    pub outer: usize,
    /// The new axis' size.
    pub depth: usize,
    /// Index positions after it.
    pub inner: usize,
}

impl OneHotDesc {
    /// Emits the body for `(indices, values, out)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, p: &[Value]) {
        let e = self.elem;
        let ty = int_ty(e);
        let off = b.ins().load(ty, mem(), p[1], 0);
        let on = b.ins().load(ty, mem(), p[1], e as i32);
        for_range(b, self.outer * self.depth * self.inner, &mut |b, i| {
            let t = offset(b, p[2], i, e);
            b.ins().store(mem(), off, t, 0);
        });
        let ib = match self.index {
            IndexKind::Int { bytes, .. } | IndexKind::Float { bytes } => bytes,
        };
        for_range(b, self.outer, &mut |b, o| {
            for_range(b, self.inner, &mut |b, i| {
                let flat = b.ins().imul_imm_s(o, self.inner as i64);
                let flat = b.ins().iadd(flat, i);
                let ip = offset(b, p[0], flat, ib);
                let (k, exact) = self.load(b, ip);
                let neg = b.ins().icmp_imm_s(IntCC::SignedLessThan, k, 0);
                let wrapped = b.ins().iadd_imm_s(k, self.depth as i64);
                let k = b.ins().select(neg, wrapped, k);
                let inr = b
                    .ins()
                    .icmp_imm_u(IntCC::UnsignedLessThan, k, self.depth as i64);
                let hit = b.ins().band(inr, exact);
                let zero = b.ins().iconst(I64, 0);
                let kc = b.ins().select(hit, k, zero);
                // ((o * depth + kc) * inner + i) * e
                let at = b.ins().imul_imm_s(o, self.depth as i64);
                let at = b.ins().iadd(at, kc);
                let at = b.ins().imul_imm_s(at, self.inner as i64);
                let at = b.ins().iadd(at, i);
                let t = offset(b, p[2], at, e);
                let cur = b.ins().load(ty, mem(), t, 0);
                let v = b.ins().select(hit, on, cur);
                b.ins().store(mem(), v, t, 0);
            });
        });
    }

    /// The index at `p` as i64, and whether it is an exact integer (always for ints).
    fn load(&self, b: &mut FunctionBuilder<'_>, p: Value) -> (Value, Value) {
        match self.index {
            IndexKind::Int { bytes, signed } => {
                let v = b.ins().load(int_ty(bytes), mem(), p, 0);
                let k = match (bytes, signed) {
                    (8, _) => v,
                    (_, true) => b.ins().sextend(I64, v),
                    (_, false) => b.ins().uextend(I64, v),
                };
                let one = b.ins().iconst(I8, 1);
                (k, one)
            }
            IndexKind::Float { bytes } => {
                let fty = if bytes == 8 { F64 } else { F32 };
                let v = b.ins().load(fty, mem(), p, 0);
                let k = b.ins().fcvt_to_sint_sat(I64, v);
                let back = b.ins().fcvt_from_sint(fty, k);
                let exact = b.ins().fcmp(FloatCC::Equal, back, v);
                (k, exact)
            }
        }
    }
}

/// Trilu over `batch` matrices of `rows x cols`: params x, out; or x, k (an i64 read at run
/// time), out when `k` is `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriluDesc {
    /// Bytes per element.
    pub elem: usize,
    /// Matrices.
    pub batch: usize,
    /// Rows per matrix.
    pub rows: usize,
    /// Columns per matrix.
    pub cols: usize,
    /// Keep `j - i >= k` (else `j - i <= k`).
    pub upper: bool,
    /// Diagonal offset; `None`: loaded at run time.
    pub k: Option<i64>,
}

impl TriluDesc {
    /// Emits the body for the params listed on the type.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, p: &[Value]) {
        let (x, out) = (p[0], p[p.len() - 1]);
        let k = match self.k {
            Some(k) => b.ins().iconst(I64, k),
            None => b.ins().load(I64, mem(), p[1], 0),
        };
        let (e, ty) = (self.elem, int_ty(self.elem));
        let cc = if self.upper {
            IntCC::SignedGreaterThanOrEqual
        } else {
            IntCC::SignedLessThanOrEqual
        };
        for_range(b, self.batch * self.rows, &mut |b, bi| {
            let i = b.ins().urem_imm_u(bi, self.rows as i64);
            let xr = offset(b, x, bi, self.cols * e);
            let or = offset(b, out, bi, self.cols * e);
            for_range(b, self.cols, &mut |b, j| {
                let d = b.ins().isub(j, i);
                let keep = b.ins().icmp(cc, d, k);
                let src = offset(b, xr, j, e);
                let v = b.ins().load(ty, mem(), src, 0);
                let z = b.ins().iconst(ty, 0);
                let y = b.ins().select(keep, v, z);
                let dst = offset(b, or, j, e);
                b.ins().store(mem(), y, dst, 0);
            });
        });
    }
}

/// ReverseSequence: params x, sequence_lens, out; then the fault record and tag when
/// `checked` (a length outside `0..=steps` is reported).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReverseDesc {
    /// Bytes per element.
    pub elem: usize,
    /// Bytes per length (4 or 8).
    pub len_bytes: usize,
    /// Batch entries.
    pub batch: usize,
    /// Time steps.
    pub steps: usize,
    /// Element stride of the batch axis.
    pub batch_stride: usize,
    /// Element stride of the time axis.
    pub time_stride: usize,
    /// Elements per (batch, time) row.
    pub inner: usize,
    /// Out-of-range lengths are reported.
    pub checked: bool,
}

impl ReverseDesc {
    /// Emits the body for the params listed on the type.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, p: &[Value]) {
        let sink = sink(self.checked, p, 3);
        let e = self.elem;
        let copy = CopyDesc::new(e, &[self.inner], &[1], &[1]);
        for_range(b, self.batch, &mut |b, bi| {
            let lp = offset(b, p[1], bi, self.len_bytes);
            let len = load_index(b, lp, self.len_bytes);
            if let Some(s) = &sink {
                // A negative length is huge as unsigned: one compare tells both sides.
                let steps = self.steps as i64;
                let bad = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, len, steps);
                s.report_if(b, bad, len, 0, steps);
            }
            let zero = b.ins().iconst(I64, 0);
            let top = b.ins().iconst(I64, self.steps as i64);
            let len = b.ins().smax(len, zero);
            let len = b.ins().smin(len, top);
            let xb = offset(b, p[0], bi, self.batch_stride * e);
            let ob = offset(b, p[2], bi, self.batch_stride * e);
            for_range(b, self.steps, &mut |b, t| {
                let inside = b.ins().icmp(IntCC::SignedLessThan, t, len);
                let rev = b.ins().isub(len, t);
                let rev = b.ins().iadd_imm_s(rev, -1);
                let st = b.ins().select(inside, rev, t);
                let src = offset(b, xb, st, self.time_stride * e);
                let dst = offset(b, ob, t, self.time_stride * e);
                copy.emit(b, src, dst);
            });
        });
    }
}

/// Col2Im: params x (`planes` chunks of `per` elements), table (`per` i64 byte offsets into
/// an image plane, -1 in the padding), out (`planes` planes of `plane` elements). Each plane
/// is zeroed, then every element is added at its table offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Col2ImDesc {
    /// f64 elements (else f32).
    pub f64: bool,
    /// `N * C`.
    pub planes: usize,
    /// Input elements per plane (`taps * blocks`).
    pub per: usize,
    /// Output elements per plane.
    pub plane: usize,
}

impl Col2ImDesc {
    /// Emits the body for `(x, table, out)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, p: &[Value]) {
        let (ty, e) = if self.f64 { (F64, 8) } else { (F32, 4) };
        let zero = if self.f64 {
            b.ins().f64const(Ieee64::with_float(0.0))
        } else {
            b.ins().f32const(Ieee32::with_float(0.0))
        };
        for_range(b, self.planes, &mut |b, pl| {
            let op = offset(b, p[2], pl, self.plane * e);
            for_range(b, self.plane, &mut |b, i| {
                let t = offset(b, op, i, e);
                b.ins().store(mem(), zero, t, 0);
            });
            let xp = offset(b, p[0], pl, self.per * e);
            for_range(b, self.per, &mut |b, j| {
                let tp = offset(b, p[1], j, 8);
                let t = b.ins().load(I64, mem(), tp, 0);
                let valid = b.ins().icmp_imm_s(IntCC::SignedGreaterThanOrEqual, t, 0);
                let z = b.ins().iconst(I64, 0);
                let tc = b.ins().select(valid, t, z);
                let at = b.ins().iadd(op, tc);
                let src = offset(b, xp, j, e);
                let v = b.ins().load(ty, mem(), src, 0);
                let v = b.ins().select(valid, v, zero);
                let cur = b.ins().load(ty, mem(), at, 0);
                let sum = b.ins().fadd(cur, v);
                b.ins().store(mem(), sum, at, 0);
            });
        });
    }
}
