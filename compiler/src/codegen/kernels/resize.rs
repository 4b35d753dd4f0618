//! Linear Resize (f32): `out[o] = sum over the 2^k corners of prod_d w_d * in[corner]`, the
//! tensor-product form of the separable per-axis interpolation. Each resized dim reads a
//! compile-time table (weights region) of `(offset0: i64, offset1: i64, w0: f32, w1: f32)` per
//! output index; dims that are not resized are plain strides, and trailing ones that map onto
//! themselves form a contiguous row computed over f32x4.

use cranelift_codegen::ir::types::{F32, F32X4, I64};
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::{for_range, mem, offset};

/// Bytes of one table entry.
pub const ENTRY: usize = 24;

/// How one output dim finds its sources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinMap {
    /// One source at `i * bytes`, weight 1.
    Stride(i64),
    /// Two weighted sources from the entry at this byte offset of the tables operand.
    Lerp(usize),
}

/// A linear Resize over `dims` (output dims before the row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinearDesc {
    /// Output dims before the row.
    pub dims: Vec<usize>,
    /// Source of each dim.
    pub maps: Vec<LinMap>,
    /// f32 elements computed contiguously per innermost step.
    pub row: usize,
}

/// One output index's two taps: `(i0, i1, w0, w1)`.
pub type Tap = (usize, usize, f32, f32);

impl LinearDesc {
    /// Builds the kernel for input `in_shape` (f32) whose output dim `k` at index `o`
    /// interpolates input indices `taps[k][o]`, and the tables it reads.
    pub fn new(in_shape: &[usize], taps: &[Vec<Tap>]) -> (LinearDesc, Vec<u8>) {
        let r = taps.len();
        let mut st = vec![4i64; r];
        for k in (0..r.saturating_sub(1)).rev() {
            st[k] = st[k + 1] * in_shape.get(k + 1).copied().unwrap_or(1) as i64;
        }
        let norm = |t: &Tap| -> Tap {
            if t.0 == t.1 || t.3 == 0.0 {
                (t.0, t.0, 1.0, 0.0)
            } else {
                *t
            }
        };
        let taps: Vec<Vec<Tap>> = taps.iter().map(|v| v.iter().map(norm).collect()).collect();
        let single = |k: usize| taps[k].iter().all(|t| t.3 == 0.0 && t.2 == 1.0);
        let identity = |k: usize| {
            taps[k].len() == in_shape[k]
                && single(k)
                && taps[k].iter().enumerate().all(|(i, t)| t.0 == i)
        };
        let mut cut = r;
        while cut > 0 && identity(cut - 1) {
            cut -= 1;
        }
        let row: usize = taps[cut..].iter().map(Vec::len).product();
        let mut d = LinearDesc {
            dims: Vec::new(),
            maps: Vec::new(),
            row,
        };
        let mut tables = Vec::new();
        for (k, v) in taps[..cut].iter().enumerate() {
            if v.is_empty() {
                d.dims = vec![0];
                d.maps = vec![LinMap::Stride(0)];
                return (d, Vec::new());
            }
            d.dims.push(v.len());
            let step = v.get(1).map_or(0, |t| t.0 as i64 - v[0].0 as i64);
            let affine = v
                .iter()
                .enumerate()
                .all(|(i, t)| t.0 as i64 == v[0].0 as i64 + step * i as i64);
            if single(k) && affine && v[0].0 == 0 {
                d.maps.push(LinMap::Stride(step * st[k]));
                continue;
            }
            d.maps.push(LinMap::Lerp(tables.len()));
            for t in v {
                tables.extend_from_slice(&(t.0 as i64 * st[k]).to_le_bytes());
                tables.extend_from_slice(&(t.1 as i64 * st[k]).to_le_bytes());
                tables.extend_from_slice(&t.2.to_le_bytes());
                tables.extend_from_slice(&t.3.to_le_bytes());
            }
        }
        (d, tables)
    }

    /// Emits the body for `(src, tables, dst)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, src: Value, tables: Value, dst: Value) {
        if self.dims.contains(&0) || self.row == 0 {
            return;
        }
        self.level(b, 0, vec![(src, None)], tables, dst);
    }

    fn level(
        &self,
        b: &mut FunctionBuilder<'_>,
        k: usize,
        srcs: Vec<(Value, Option<Value>)>,
        t: Value,
        d: Value,
    ) {
        if k == self.dims.len() {
            self.row(b, &srcs, d);
            return;
        }
        let out_step = self.dims[k + 1..].iter().product::<usize>() * self.row * 4;
        for_range(b, self.dims[k], &mut |b, i| {
            let next: Vec<(Value, Option<Value>)> = match self.maps[k] {
                LinMap::Stride(st) => srcs
                    .iter()
                    .map(|&(p, w)| {
                        let o = b.ins().imul_imm_s(i, st);
                        (b.ins().iadd(p, o), w)
                    })
                    .collect(),
                LinMap::Lerp(at) => {
                    let tp = offset(b, t, i, ENTRY);
                    let at = at as i32;
                    let o0 = b.ins().load(I64, mem(), tp, at);
                    let o1 = b.ins().load(I64, mem(), tp, at + 8);
                    let w0 = b.ins().load(F32, mem(), tp, at + 16);
                    let w1 = b.ins().load(F32, mem(), tp, at + 20);
                    let mut out = Vec::with_capacity(srcs.len() * 2);
                    for &(p, w) in &srcs {
                        for (o, wk) in [(o0, w0), (o1, w1)] {
                            let q = b.ins().iadd(p, o);
                            let ww = match w {
                                Some(w) => b.ins().fmul(w, wk),
                                None => wk,
                            };
                            out.push((q, Some(ww)));
                        }
                    }
                    out
                }
            };
            let dp = offset(b, d, i, out_step);
            self.level(b, k + 1, next, t, dp);
        });
    }

    fn row(&self, b: &mut FunctionBuilder<'_>, srcs: &[(Value, Option<Value>)], d: Value) {
        let n = self.row;
        let vec_ws: Vec<Option<Value>> = if n >= 4 {
            srcs.iter()
                .map(|&(_, w)| w.map(|w| b.ins().splat(F32X4, w)))
                .collect()
        } else {
            Vec::new()
        };
        for_range(b, n / 4, &mut |b, j| {
            let mut acc: Option<Value> = None;
            for (&(p, _), &w) in srcs.iter().zip(&vec_ws) {
                let q = offset(b, p, j, 16);
                let v = b.ins().load(F32X4, mem(), q, 0);
                acc = Some(match (acc, w) {
                    (None, None) => v,
                    (None, Some(w)) => b.ins().fmul(v, w),
                    (Some(a), None) => b.ins().fadd(a, v),
                    (Some(a), Some(w)) => b.ins().fma(v, w, a),
                });
            }
            if let Some(a) = acc {
                let q = offset(b, d, j, 16);
                b.ins().store(mem(), a, q, 0);
            }
        });
        for t in (n / 4) * 4..n {
            let off = (t * 4) as i32;
            let mut acc: Option<Value> = None;
            for &(p, w) in srcs {
                let v = b.ins().load(F32, mem(), p, off);
                acc = Some(match (acc, w) {
                    (None, None) => v,
                    (None, Some(w)) => b.ins().fmul(v, w),
                    (Some(a), None) => b.ins().fadd(a, v),
                    (Some(a), Some(w)) => b.ins().fma(v, w, a),
                });
            }
            if let Some(a) = acc {
                b.ins().store(mem(), a, d, off);
            }
        }
    }
}
