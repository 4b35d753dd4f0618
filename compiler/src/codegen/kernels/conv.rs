//! 2-d convolution (direct, NCHW) and pooling.
//!
//! Conv: for each output pixel, four output channels at once in the lanes of an f32x4
//! accumulator: `acc += splat(x[c, ih, iw]) * w[c, kh, kw, m..m+4]`, the weights rearranged at
//! compile time (`[group][m chunk][kh][kw][c][4]`, zero-padded lanes) and the bias preloaded.
//! Padding is branch-free: an out-of-image tap reads element 0 and is multiplied by 0.
//! (A direct kernel needs no scratch; the im2col + GEMM path is still to come.)

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

/// A direct 2-d convolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvDesc {
    /// Batch.
    pub n: usize,
    /// Groups.
    pub groups: usize,
    /// Input channels per group.
    pub c: usize,
    /// Output channels per group.
    pub m: usize,
    /// Geometry.
    pub win: Window,
}

impl ConvDesc {
    /// Chunks of four output channels per group.
    pub fn chunks(&self) -> usize {
        self.m.div_ceil(4)
    }

    /// The weights `[M, C, kh, kw]` rearranged to `[group][chunk][kh][kw][c][4]` and the bias
    /// to `[group][chunk][4]`.
    pub fn arrange(&self, w: &[f32], bias: Option<&[f32]>) -> (Vec<f32>, Vec<f32>) {
        let [kh, kw] = self.win.kernel;
        let ch = self.chunks();
        let mut out = vec![0.0f32; self.groups * ch * kh * kw * self.c * 4];
        let mut bo = vec![0.0f32; self.groups * ch * 4];
        for g in 0..self.groups {
            for q in 0..ch {
                for lane in 0..4 {
                    let mm = q * 4 + lane;
                    if mm >= self.m {
                        continue;
                    }
                    let oc = g * self.m + mm;
                    bo[(g * ch + q) * 4 + lane] = bias.map_or(0.0, |b| b[oc]);
                    for y in 0..kh {
                        for x in 0..kw {
                            for c in 0..self.c {
                                let src = ((oc * self.c + c) * kh + y) * kw + x;
                                let dst =
                                    ((((g * ch + q) * kh + y) * kw + x) * self.c + c) * 4 + lane;
                                out[dst] = w[src];
                            }
                        }
                    }
                }
            }
        }
        (out, bo)
    }

    /// Emits the body for `(x, w, bias, y)`.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, p: &[Value]) {
        let (x, w, bias, y) = (p[0], p[1], p[2], p[3]);
        let [ih, iw] = self.win.in_hw;
        let [oh, ow] = self.win.out_hw;
        let [kh, kw] = self.win.kernel;
        let ch = self.chunks();
        let chunk_w = kh * kw * self.c * 16;
        let vm = Math { ty: F32X4 };
        for_range(b, self.n * self.groups, &mut |b, ng| {
            // Image n, group g: input channels ng*C.., output channels ng*M.. (the
            // batch-major layout makes (n, g) one flat index for both).
            let xg = offset(b, x, ng, self.c * ih * iw * 4);
            let yg = offset(b, y, ng, self.m * oh * ow * 4);
            let g = b.ins().urem_imm_u(ng, self.groups as i64);
            let wg = offset(b, w, g, ch * chunk_w);
            let bg = offset(b, bias, g, ch * 16);
            for_range(b, ch, &mut |b, q| {
                let wq = offset(b, wg, q, chunk_w);
                let bq = offset(b, bg, q, 16);
                let yq = offset(b, yg, q, 4 * oh * ow * 4);
                let lanes = if (ch - 1) * 4 + 4 <= self.m {
                    4
                } else {
                    self.m - (ch - 1) * 4
                };
                for_range(b, oh, &mut |b, r| {
                    for_range(b, ow, &mut |b, s| {
                        let acc = b.declare_var(F32X4);
                        let init = vm.load(b, bq, 0);
                        b.def_var(acc, init);
                        for_range(b, kh, &mut |b, u| {
                            for_range(b, kw, &mut |b, v| {
                                let (off, valid) = self.win.tap(b, r, s, u, v);
                                let one = b.ins().f32const(1.0);
                                let zero = b.ins().f32const(0.0);
                                let scale = b.ins().select(valid, one, zero);
                                let xp = offset(b, xg, off, 4);
                                let tap = b.ins().imul_imm_u(u, kw as i64);
                                let tap = b.ins().iadd(tap, v);
                                let wt = offset(b, wq, tap, self.c * 16);
                                for_range(b, self.c, &mut |b, c| {
                                    let xc = offset(b, xp, c, ih * iw * 4);
                                    let xv = b.ins().load(F32, mem(), xc, 0);
                                    let xv = b.ins().fmul(xv, scale);
                                    let xv = b.ins().splat(F32X4, xv);
                                    let wc = offset(b, wt, c, 16);
                                    let wv = vm.load(b, wc, 0);
                                    let a = b.use_var(acc);
                                    let a = b.ins().fma(xv, wv, a);
                                    b.def_var(acc, a);
                                });
                            });
                        });
                        let a = b.use_var(acc);
                        let pix = b.ins().imul_imm_u(r, ow as i64);
                        let pix = b.ins().iadd(pix, s);
                        let yp = offset(b, yq, pix, 4);
                        // Lanes past the group's last channel exist only in the last chunk.
                        let last = b.ins().icmp_imm_u(IntCC::Equal, q, (ch - 1) as i64);
                        for lane in 0..4u8 {
                            let val = b.ins().extractlane(a, lane);
                            let at = i32::from(lane) * (oh * ow * 4) as i32;
                            if usize::from(lane) < lanes {
                                b.ins().store(mem(), val, yp, at);
                            } else {
                                let store = b.create_block();
                                let done = b.create_block();
                                b.ins().brif(last, done, &[], store, &[]);
                                b.switch_to_block(store);
                                b.ins().store(mem(), val, yp, at);
                                b.ins().jump(done, &[]);
                                b.switch_to_block(done);
                            }
                        }
                    });
                });
            });
        });
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
