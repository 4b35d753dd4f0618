//! Interpolating Resize (f32; linear, cubic, antialiased, tf_crop_and_resize):
//! `out[o] = sum over the tap combinations of prod_d w_d * in[taps]`, the tensor-product form
//! of the separable per-axis interpolation. Each resized dim reads a compile-time table
//! (weights region) with, per output index, `n` byte offsets (`i64`), `n` weights (`f32`) and,
//! when the resize extrapolates, a keep flag (`f32` 1 or 0: an output whose keep product is 0
//! is the extrapolation value, selected). Dims that are not resized are plain strides, and trailing ones
//! that map onto themselves form a contiguous row computed over f32x4.

use cranelift_codegen::ir::condcodes::FloatCC;
use cranelift_codegen::ir::types::{F32, F32X4, I64};
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::{for_range, mem, offset};

/// Most tap combinations unrolled per output element; dims beyond it loop over their taps at
/// run time (wide antialiased filters on several axes).
pub const MAX_UNROLLED: usize = 256;

/// Unrolled tap combinations a looping kernel keeps.
const LOOP_UNROLLED: usize = 16;

/// How one output dim finds its sources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinMap {
    /// One source at `i * bytes`, weight 1.
    Stride(i64),
    /// `n` weighted sources from the entries (of `entry` bytes) at this byte offset of the
    /// tables operand.
    Taps {
        /// Byte offset of the dim's first entry.
        at: usize,
        /// Taps per entry.
        n: usize,
        /// Bytes per entry.
        entry: usize,
        /// Taps looped over at run time (else unrolled).
        looped: bool,
    },
}

/// An interpolating Resize over `dims` (output dims before the row).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinearDesc {
    /// Output dims before the row.
    pub dims: Vec<usize>,
    /// Source of each dim.
    pub maps: Vec<LinMap>,
    /// f32 elements computed contiguously per innermost step.
    pub row: usize,
    /// Bits of the extrapolation value when some output is extrapolated.
    pub extrap: Option<u32>,
}

/// One axis of an interpolation: output index `o` reads input indices `idx[o*n..(o+1)*n]`
/// with weights `w[o*n..(o+1)*n]`, or is the extrapolation value when `extrap[o]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// Taps per output index.
    pub n: usize,
    /// Input indices (in range).
    pub idx: Vec<usize>,
    /// Weights.
    pub w: Vec<f32>,
    /// Extrapolated output indices.
    pub extrap: Vec<bool>,
}

/// Per output index, the distinct taps of nonzero weight (none when extrapolated).
fn compact(a: &Axis) -> Vec<Vec<(usize, f32)>> {
    (0..a.extrap.len())
        .map(|o| {
            let mut v: Vec<(usize, f32)> = Vec::new();
            if a.extrap[o] {
                return v;
            }
            for k in o * a.n..(o + 1) * a.n {
                let (i, w) = (a.idx[k], a.w[k]);
                if w == 0.0 {
                    continue;
                }
                match v.iter_mut().find(|t| t.0 == i) {
                    Some(t) => t.1 += w,
                    None => v.push((i, w)),
                }
            }
            v
        })
        .collect()
}

impl LinearDesc {
    /// Builds the kernel for input `in_shape` (f32) resized along `axes` (one per dim), and
    /// the tables it reads.
    pub fn new(in_shape: &[usize], axes: &[Axis], extrap_value: f32) -> (LinearDesc, Vec<u8>) {
        let r = axes.len();
        let mut st = vec![4i64; r];
        for k in (0..r.saturating_sub(1)).rev() {
            st[k] = st[k + 1] * in_shape.get(k + 1).copied().unwrap_or(1) as i64;
        }
        let taps: Vec<Vec<Vec<(usize, f32)>>> = axes.iter().map(compact).collect();
        let extrap = axes.iter().any(|a| a.extrap.contains(&true));
        let single = |k: usize| {
            !axes[k].extrap.contains(&true) && taps[k].iter().all(|t| t.len() == 1 && t[0].1 == 1.0)
        };
        let identity = |k: usize| {
            taps[k].len() == in_shape[k]
                && single(k)
                && taps[k].iter().enumerate().all(|(i, t)| t[0].0 == i)
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
            extrap: extrap.then_some(extrap_value.to_bits()),
        };
        let mut tables = Vec::new();
        for (k, v) in taps[..cut].iter().enumerate() {
            if v.is_empty() {
                d.dims = vec![0];
                d.maps = vec![LinMap::Stride(0)];
                return (d, Vec::new());
            }
            d.dims.push(v.len());
            let first = |t: &Vec<(usize, f32)>| t.first().map_or(0, |x| x.0 as i64);
            let step = v.get(1).map_or(0, |t| first(t) - first(&v[0]));
            let affine = v
                .iter()
                .enumerate()
                .all(|(i, t)| first(t) == first(&v[0]) + step * i as i64);
            if single(k) && affine && first(&v[0]) == 0 {
                d.maps.push(LinMap::Stride(step * st[k]));
                continue;
            }
            let n = v.iter().map(Vec::len).max().unwrap_or(1).max(1);
            let entry = (12 * n + 4).next_multiple_of(8);
            d.maps.push(LinMap::Taps {
                at: tables.len(),
                n,
                entry,
                looped: false,
            });
            for (o, t) in v.iter().enumerate() {
                let start = tables.len();
                // Padding taps repeat the first source (weight 0), reading a value in use.
                let pad = t.first().map_or(0, |x| x.0);
                for j in 0..n {
                    let i = t.get(j).map_or(pad, |x| x.0);
                    tables.extend_from_slice(&(i as i64 * st[k]).to_le_bytes());
                }
                for j in 0..n {
                    let w = t.get(j).map_or(0.0, |x| x.1);
                    tables.extend_from_slice(&w.to_le_bytes());
                }
                let keep: f32 = if axes[k].extrap[o] { 0.0 } else { 1.0 };
                tables.extend_from_slice(&keep.to_le_bytes());
                tables.resize(start + entry, 0);
            }
        }
        // Unroll every dim's taps when the combinations are few, else the first dims up to
        // a small budget and loop over the rest.
        let total = d.maps.iter().fold(1usize, |p, m| match m {
            LinMap::Taps { n, .. } => p.saturating_mul(*n),
            LinMap::Stride(_) => p,
        });
        if total > MAX_UNROLLED {
            let mut unrolled = 1usize;
            for m in &mut d.maps {
                if let LinMap::Taps { n, looped, .. } = m {
                    if unrolled * *n <= LOOP_UNROLLED {
                        unrolled *= *n;
                    } else {
                        *looped = true;
                    }
                }
            }
        }
        (d, tables)
    }

    /// Emits the body for `(src, tables, dst)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, src: Value, tables: Value, dst: Value) {
        if self.dims.contains(&0) || self.row == 0 {
            return;
        }
        let mut st = State {
            srcs: vec![(src, None)],
            keep: None,
            loops: Vec::new(),
        };
        self.level(b, 0, &mut st, tables, dst);
    }

    fn level(&self, b: &mut FunctionBuilder<'_>, k: usize, st: &mut State, t: Value, d: Value) {
        if k == self.dims.len() {
            self.row(b, st, d);
            return;
        }
        let out_step = self.dims[k + 1..].iter().product::<usize>() * self.row * 4;
        for_range(b, self.dims[k], &mut |b, i| {
            let mut next = State {
                srcs: st.srcs.clone(),
                keep: st.keep,
                loops: st.loops.clone(),
            };
            match self.maps[k] {
                LinMap::Stride(s) => {
                    let o = b.ins().imul_imm_s(i, s);
                    for p in &mut next.srcs {
                        p.0 = b.ins().iadd(p.0, o);
                    }
                }
                LinMap::Taps {
                    at,
                    n,
                    entry,
                    looped,
                } => {
                    let tp = offset(b, t, i, entry);
                    let at = at as i32;
                    if self.extrap.is_some() {
                        let kv = b.ins().load(F32, mem(), tp, at + 12 * n as i32);
                        next.keep = Some(match next.keep {
                            Some(k) => b.ins().fmul(k, kv),
                            None => kv,
                        });
                    }
                    if looped {
                        next.loops.push((tp, at, n));
                    } else {
                        let taps: Vec<(Value, Value)> = (0..n as i32)
                            .map(|j| {
                                let o = b.ins().load(I64, mem(), tp, at + 8 * j);
                                let w = b.ins().load(F32, mem(), tp, at + 8 * n as i32 + 4 * j);
                                (o, w)
                            })
                            .collect();
                        next.srcs = spread(b, &next.srcs, &taps);
                    }
                }
            }
            let dp = offset(b, d, i, out_step);
            self.level(b, k + 1, &mut next, t, dp);
        });
    }

    fn row(&self, b: &mut FunctionBuilder<'_>, st: &State, d: Value) {
        let n = self.row;
        // Extrapolation: an output whose keep product is 0 is the value (selected, so that
        // its zero-weight padding taps cannot turn it into NaN).
        let extra = match (self.extrap, st.keep) {
            (Some(bits), Some(k)) => {
                let zero = b.ins().f32const(0.0);
                let out = b.ins().fcmp(FloatCC::Equal, k, zero);
                Some((out, b.ins().f32const(f32::from_bits(bits))))
            }
            _ => None,
        };
        // Without run-time tap loops the weights are splatted once, outside the row loop.
        let pre: Option<Vec<Option<Value>>> = (st.loops.is_empty() && n >= 4).then(|| {
            st.srcs
                .iter()
                .map(|&(_, w)| w.map(|w| b.ins().splat(F32X4, w)))
                .collect()
        });
        for_range(b, n / 4, &mut |b, j| {
            let acc = b.declare_var(F32X4);
            let z = b.ins().f32const(0.0);
            let z = b.ins().splat(F32X4, z);
            b.def_var(acc, z);
            tap_loops(b, &st.loops, &st.srcs, &mut |b, srcs| {
                let mut a = b.use_var(acc);
                for (k, &(p, w)) in srcs.iter().enumerate() {
                    let q = offset(b, p, j, 16);
                    let v = b.ins().load(F32X4, mem(), q, 0);
                    let w = match &pre {
                        Some(ws) => ws.get(k).copied().flatten(),
                        None => w.map(|w| b.ins().splat(F32X4, w)),
                    };
                    a = match w {
                        None => b.ins().fadd(a, v),
                        Some(w) => b.ins().fma(v, w, a),
                    };
                }
                b.def_var(acc, a);
            });
            let mut a = b.use_var(acc);
            if let Some((out, e)) = extra {
                let e = b.ins().splat(F32X4, e);
                a = b.ins().select(out, e, a);
            }
            let q = offset(b, d, j, 16);
            b.ins().store(mem(), a, q, 0);
        });
        for t in (n / 4) * 4..n {
            let off = (t * 4) as i32;
            let acc = b.declare_var(F32);
            let z = b.ins().f32const(0.0);
            b.def_var(acc, z);
            tap_loops(b, &st.loops, &st.srcs, &mut |b, srcs| {
                let mut a = b.use_var(acc);
                for &(p, w) in srcs {
                    let v = b.ins().load(F32, mem(), p, off);
                    a = match w {
                        None => b.ins().fadd(a, v),
                        Some(w) => b.ins().fma(v, w, a),
                    };
                }
                b.def_var(acc, a);
            });
            let mut a = b.use_var(acc);
            if let Some((out, e)) = extra {
                a = b.ins().select(out, e, a);
            }
            b.ins().store(mem(), a, d, off);
        }
    }
}

/// A source pointer and its weight (`None`: 1).
type Src = (Value, Option<Value>);

/// The sources and weights of the output being computed: unrolled `(pointer, weight)`
/// pairs, the product of the keep flags, and the tap tables still to loop over at run time
/// `(entry pointer, byte offset in it, taps)`.
struct State {
    srcs: Vec<Src>,
    keep: Option<Value>,
    loops: Vec<(Value, i32, usize)>,
}

/// Every source combined with every tap `(byte offset, weight)`.
fn spread(b: &mut FunctionBuilder<'_>, srcs: &[Src], taps: &[(Value, Value)]) -> Vec<Src> {
    let mut out = Vec::with_capacity(srcs.len() * taps.len());
    for &(p, w) in srcs {
        for &(o, wk) in taps {
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

/// Runs `body` on the sources of every tap combination of `loops` (run-time loops).
fn tap_loops(
    b: &mut FunctionBuilder<'_>,
    loops: &[(Value, i32, usize)],
    srcs: &[Src],
    body: &mut dyn FnMut(&mut FunctionBuilder<'_>, &[Src]),
) {
    let Some((&(tp, at, n), rest)) = loops.split_first() else {
        body(b, srcs);
        return;
    };
    for_range(b, n, &mut |b, j| {
        let op = offset(b, tp, j, 8);
        let o = b.ins().load(I64, mem(), op, at);
        let wp = offset(b, tp, j, 4);
        let w = b.ins().load(F32, mem(), wp, at + 8 * n as i32);
        let next = spread(b, srcs, &[(o, w)]);
        tap_loops(b, rest, &next, body);
    });
}
