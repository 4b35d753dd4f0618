//! Window geometry (shared with Conv, which is precompiled: `crate::gemm::conv`) and pooling.
//!
//! Padding is branch-free: an out-of-image tap reads element 0 and is masked.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{F32, F32X4, I64};
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::{Math, for_range, mem, offset};

/// Spatial geometry of a 2-d window op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Input height and width.
    pub in_hw: [usize; 2],
    /// Output height and width.
    pub out_hw: [usize; 2],
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Strides.
    pub strides: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Leading pads (top, left).
    pub pads: [usize; 2],
}

impl Window {
    /// For output pixel `(oh, ow)` and tap `(kh, kw)`: the element offset of the input
    /// pixel (0 when outside) and whether it is inside (an `i8` 0/1).
    fn tap(
        &self,
        b: &mut FunctionBuilder<'_>,
        oh: Value,
        ow: Value,
        kh: Value,
        kw: Value,
    ) -> (Value, Value) {
        let coord = |b: &mut FunctionBuilder<'_>, o: Value, k: Value, d: usize| {
            let s = b.ins().imul_imm_u(o, self.strides[d] as i64);
            let kd = b.ins().imul_imm_u(k, self.dilations[d] as i64);
            let c = b.ins().iadd(s, kd);
            // Wraps below zero: the unsigned compare below rejects it.
            b.ins().iadd_imm_s(c, -(self.pads[d] as i64))
        };
        let ih = coord(b, oh, kh, 0);
        let iw = coord(b, ow, kw, 1);
        let vh = b
            .ins()
            .icmp_imm_u(IntCC::UnsignedLessThan, ih, self.in_hw[0] as i64);
        let vw = b
            .ins()
            .icmp_imm_u(IntCC::UnsignedLessThan, iw, self.in_hw[1] as i64);
        let valid = b.ins().band(vh, vw);
        let row = b.ins().imul_imm_u(ih, self.in_hw[1] as i64);
        let off = b.ins().iadd(row, iw);
        let zero = b.ins().iconst(I64, 0);
        let off = b.ins().select(valid, off, zero);
        (off, valid)
    }
}

impl Window {
    /// Whether tap `(kh, kw)` of output pixel `(oh, ow)` lies inside the input plus its
    /// declared pads (`pad_end` the trailing ones): an `i8` 0/1.
    fn in_padded(&self, b: &mut FunctionBuilder<'_>, at: [Value; 4], pad_end: [usize; 2]) -> Value {
        let [oh, ow, kh, kw] = at;
        let raw = |b: &mut FunctionBuilder<'_>, o: Value, k: Value, d: usize| {
            let s = b.ins().imul_imm_u(o, self.strides[d] as i64);
            let kd = b.ins().imul_imm_u(k, self.dilations[d] as i64);
            let c = b.ins().iadd(s, kd);
            let bound = self.in_hw[d] + self.pads[d] + pad_end[d];
            b.ins().icmp_imm_u(IntCC::UnsignedLessThan, c, bound as i64)
        };
        let h = raw(b, oh, kh, 0);
        let w = raw(b, ow, kw, 1);
        b.ins().band(h, w)
    }
}

/// Max pooling (2-d) or global average pooling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolDesc {
    /// Max over windows of `planes` images of `win`.
    Max {
        /// N * C.
        planes: usize,
        /// Geometry.
        win: Window,
    },
    /// Average over windows (`include_pad`: the divisor counts taps in the declared pads).
    Average {
        /// N * C.
        planes: usize,
        /// Geometry.
        win: Window,
        /// Trailing pads.
        pad_end: [usize; 2],
        /// ONNX `count_include_pad`.
        include_pad: bool,
    },
    /// Mean over each contiguous plane of `len` elements.
    GlobalAverage {
        /// N * C.
        planes: usize,
        /// Spatial elements per plane.
        len: usize,
    },
}

impl PoolDesc {
    /// Emits the body for `(x, y)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) {
        let sm = Math { ty: F32 };
        match self {
            PoolDesc::Max { planes, win } => {
                let [ih, iw] = win.in_hw;
                let [oh, ow] = win.out_hw;
                for_range(b, *planes, &mut |b, pl| {
                    let xp = offset(b, x, pl, ih * iw * 4);
                    let yp = offset(b, y, pl, oh * ow * 4);
                    for_range(b, oh, &mut |b, r| {
                        for_range(b, ow, &mut |b, s| {
                            let acc = b.declare_var(F32);
                            let ninf = sm.c(b, f32::NEG_INFINITY);
                            b.def_var(acc, ninf);
                            for_range(b, win.kernel[0], &mut |b, u| {
                                for_range(b, win.kernel[1], &mut |b, v| {
                                    let (off, valid) = win.tap(b, r, s, u, v);
                                    let p = offset(b, xp, off, 4);
                                    let xv = b.ins().load(F32, mem(), p, 0);
                                    let ninf = sm.c(b, f32::NEG_INFINITY);
                                    let xv = b.ins().select(valid, xv, ninf);
                                    let a = b.use_var(acc);
                                    let a = sm.max(b, a, xv);
                                    b.def_var(acc, a);
                                });
                            });
                            let a = b.use_var(acc);
                            let pix = b.ins().imul_imm_u(r, ow as i64);
                            let pix = b.ins().iadd(pix, s);
                            let q = offset(b, yp, pix, 4);
                            b.ins().store(mem(), a, q, 0);
                        });
                    });
                });
            }
            PoolDesc::Average {
                planes,
                win,
                pad_end,
                include_pad,
            } => {
                let [ih, iw] = win.in_hw;
                let [oh, ow] = win.out_hw;
                for_range(b, *planes, &mut |b, pl| {
                    let xp = offset(b, x, pl, ih * iw * 4);
                    let yp = offset(b, y, pl, oh * ow * 4);
                    for_range(b, oh, &mut |b, r| {
                        for_range(b, ow, &mut |b, s| {
                            let (sum, count) = (b.declare_var(F32), b.declare_var(F32));
                            let z = sm.c(b, 0.0);
                            b.def_var(sum, z);
                            b.def_var(count, z);
                            for_range(b, win.kernel[0], &mut |b, u| {
                                for_range(b, win.kernel[1], &mut |b, v| {
                                    let (off, valid) = win.tap(b, r, s, u, v);
                                    let p = offset(b, xp, off, 4);
                                    let xv = b.ins().load(F32, mem(), p, 0);
                                    let (one, zero) = (sm.c(b, 1.0), sm.c(b, 0.0));
                                    let xv = b.ins().select(valid, xv, zero);
                                    let counted = if *include_pad {
                                        win.in_padded(b, [r, s, u, v], *pad_end)
                                    } else {
                                        valid
                                    };
                                    let inc = b.ins().select(counted, one, zero);
                                    let a = b.use_var(sum);
                                    let a = b.ins().fadd(a, xv);
                                    b.def_var(sum, a);
                                    let c = b.use_var(count);
                                    let c = b.ins().fadd(c, inc);
                                    b.def_var(count, c);
                                });
                            });
                            let (a, c) = (b.use_var(sum), b.use_var(count));
                            // 0 / 0 = NaN for an empty window, like the reference.
                            let mean = b.ins().fdiv(a, c);
                            let pix = b.ins().imul_imm_u(r, ow as i64);
                            let pix = b.ins().iadd(pix, s);
                            let q = offset(b, yp, pix, 4);
                            b.ins().store(mem(), mean, q, 0);
                        });
                    });
                });
            }
            PoolDesc::GlobalAverage { planes, len } => {
                let len = *len;
                let vm = Math { ty: F32X4 };
                for_range(b, *planes, &mut |b, pl| {
                    let xp = offset(b, x, pl, len * 4);
                    let acc = b.declare_var(F32X4);
                    let z = vm.c(b, 0.0);
                    b.def_var(acc, z);
                    for_range(b, len / 4, &mut |b, i| {
                        let p = offset(b, xp, i, 16);
                        let v = vm.load(b, p, 0);
                        let a = b.use_var(acc);
                        let a = b.ins().fadd(a, v);
                        b.def_var(acc, a);
                    });
                    let a = b.use_var(acc);
                    let mut sum = Math::hreduce(b, a, |b, x, y| b.ins().fadd(x, y));
                    for t in (len / 4) * 4..len {
                        let v = sm.load(b, xp, (t * 4) as i32);
                        sum = b.ins().fadd(sum, v);
                    }
                    let k = sm.c(b, 1.0 / len as f32);
                    let mean = b.ins().fmul(sum, k);
                    let q = offset(b, y, pl, 4);
                    b.ins().store(mem(), mean, q, 0);
                });
            }
        }
    }
}
