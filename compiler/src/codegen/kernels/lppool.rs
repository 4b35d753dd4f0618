//! LpPool on f32/f64 `N x C x spatial...` (any number of spatial dims): for each output
//! position a loop nest over the window taps; a tap outside the input reads the plane's
//! first element (always in bounds) and contributes 0. Computed in f64 exactly as the
//! reference (`ops::reduce::lppool`): `|x|^p` by multiplications up to
//! [`LP_MUL_MAX`], else `powf`; the root by `sqrt` (p = 2) or `powf(s, 1/p)`.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::{FunctionBuilder, Variable};

use super::reduce_any::{Dom, arenac_reduce_pow, call_f64, load, store};
use super::{for_range, offset};
use crate::ir::types::DType;
use crate::ops::reduce::lppool::LP_MUL_MAX;

/// One LpPool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LpPoolDesc {
    /// f32 or f64.
    pub dtype: DType,
    /// `N * C`.
    pub planes: usize,
    /// Input spatial dims.
    pub input: Vec<usize>,
    /// Output spatial dims.
    pub output: Vec<usize>,
    /// Window per spatial dim.
    pub kernel: Vec<usize>,
    /// Stride per spatial dim.
    pub strides: Vec<usize>,
    /// Dilation per spatial dim.
    pub dilations: Vec<usize>,
    /// Begin padding per spatial dim.
    pub pads: Vec<usize>,
    /// The norm's order.
    pub p: u32,
}

fn pow_addr() -> usize {
    (arenac_reduce_pow as extern "C" fn(f64, f64) -> f64) as usize
}

impl LpPoolDesc {
    /// Emits the body for `(x, y)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) {
        let Some(dom) = Dom::of(self.dtype) else {
            return;
        };
        let es = self.dtype.size();
        let in_plane: usize = self.input.iter().product();
        let out_plane: usize = self.output.iter().product();
        if in_plane == 0 {
            return;
        }
        for_range(b, self.planes, &mut |b, pl| {
            let xp = offset(b, x, pl, in_plane * es);
            let yp = offset(b, y, pl, out_plane * es);
            let mut coords = Vec::new();
            self.out_level(b, dom, 0, xp, yp, &mut coords);
        });
    }

    fn out_level(
        &self,
        b: &mut FunctionBuilder<'_>,
        dom: Dom,
        d: usize,
        xp: Value,
        yp: Value,
        coords: &mut Vec<Value>,
    ) {
        let es = self.dtype.size();
        if d == self.output.len() {
            let acc = b.declare_var(Dom::F64.ty());
            let z = Dom::F64.c(b, 0.0);
            b.def_var(acc, z);
            let mut taps = Vec::new();
            self.tap_level(b, dom, 0, xp, coords, &mut taps, acc);
            let s = b.use_var(acc);
            let r = match self.p {
                1 => s,
                2 => b.ins().sqrt(s),
                p => {
                    let e = Dom::F64.c(b, 1.0 / f64::from(p));
                    call_f64(b, pow_addr(), &[s, e])
                }
            };
            let r = Dom::F64.to(b, r, dom);
            store(b, self.dtype, r, yp);
            return;
        }
        let stride: usize = self.output[d + 1..].iter().product();
        for_range(b, self.output[d], &mut |b, o| {
            let yq = offset(b, yp, o, stride * es);
            coords.push(o);
            self.out_level(b, dom, d + 1, xp, yq, coords);
            coords.pop();
        });
    }

    /// Walks the taps of one window; `taps` holds `(clamped coordinate, inside)` per dim.
    #[allow(clippy::too_many_arguments)]
    fn tap_level(
        &self,
        b: &mut FunctionBuilder<'_>,
        dom: Dom,
        d: usize,
        xp: Value,
        coords: &[Value],
        taps: &mut Vec<(Value, Value)>,
        acc: Variable,
    ) {
        let es = self.dtype.size();
        if d == self.kernel.len() {
            let mut off = b.ins().iconst(I64, 0);
            let mut inside = None;
            for (i, &(c, ok)) in taps.iter().enumerate() {
                let st: usize = self.input[i + 1..].iter().product();
                let t = b.ins().imul_imm_u(c, (st * es) as i64);
                off = b.ins().iadd(off, t);
                inside = Some(match inside {
                    Some(all) => b.ins().band(all, ok),
                    None => ok,
                });
            }
            let p = b.ins().iadd(xp, off);
            let v = load(b, self.dtype, p);
            let v = dom.to(b, v, Dom::F64);
            let a = b.ins().fabs(v);
            let pw = if self.p > LP_MUL_MAX {
                let e = Dom::F64.c(b, f64::from(self.p));
                call_f64(b, pow_addr(), &[a, e])
            } else {
                let mut r = a;
                for _ in 1..self.p {
                    r = b.ins().fmul(r, a);
                }
                r
            };
            let zero = Dom::F64.c(b, 0.0);
            let pw = match inside {
                Some(ok) => b.ins().select(ok, pw, zero),
                None => pw,
            };
            let s = b.use_var(acc);
            let s = b.ins().fadd(s, pw);
            b.def_var(acc, s);
            return;
        }
        let (s, dil, pb, n) = (
            self.strides[d],
            self.dilations[d],
            self.pads[d],
            self.input[d],
        );
        let o = coords[d];
        for_range(b, self.kernel[d], &mut |b, k| {
            let os = b.ins().imul_imm_u(o, s as i64);
            let kd = b.ins().imul_imm_u(k, dil as i64);
            let c = b.ins().iadd(os, kd);
            let c = b.ins().iadd_imm_s(c, -(pb as i64));
            // Negative coordinates are huge unsigned.
            let ok = b.ins().icmp_imm_u(IntCC::UnsignedLessThan, c, n as i64);
            let zero = b.ins().iconst(I64, 0);
            let cl = b.ins().select(ok, c, zero);
            taps.push((cl, ok));
            self.tap_level(b, dom, d + 1, xp, coords, taps, acc);
            taps.pop();
        });
    }
}
