//! ConvTranspose (f32, 1-d to 3-d spatial, groups): per image and group, the output starts as
//! the bias (or 0); then per tile of whole input rows (at most [`crate::gemm::IM2COL_TILE`]
//! pixels, at least one row) the tile is packed as GEMM B (`arenac_pack_b`), one
//! `arenac_sgemm` computes the column panel `col[(m, tap), pixel] = sum_c W[c, m, tap] X[c,
//! pixel]` from the compile-time rearranged weights, and col2im scatter-adds every panel row
//! into the output (f32x4 along the row when the stride is 1).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::immediates::Ieee32;
use cranelift_codegen::ir::types::{F32, F32X4, I32, I64};
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::{for_range, mem, offset};
use crate::codegen::program::Externs;

/// Geometry of one ConvTranspose, spatial dims padded in front to 3 (`[d, h, w]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvTDesc {
    /// Images.
    pub n: usize,
    /// Groups.
    pub groups: usize,
    /// Input channels per group.
    pub cg: usize,
    /// Output channels per group.
    pub mg: usize,
    /// Input spatial dims.
    pub in_sp: [usize; 3],
    /// Output spatial dims.
    pub out_sp: [usize; 3],
    /// Kernel dims.
    pub kernel: [usize; 3],
    /// Strides.
    pub strides: [usize; 3],
    /// Dilations.
    pub dilations: [usize; 3],
    /// Begin pads.
    pub pads: [usize; 3],
    /// Input rows (of `d * h`) per tile.
    pub tile_rows: usize,
    /// Whether a bias operand is read.
    pub has_bias: bool,
    /// Byte offsets in the scratch of the packed B tile, the column panel and the sgemm A
    /// scratch.
    pub scratch: [usize; 3],
    /// Run-time weights (`[C, M/group, taps]` as the model gives them): the byte offset in
    /// the scratch where the kernel first rearranges them into the GEMM's A blocks.
    pub arrange_at: Option<usize>,
}

impl ConvTDesc {
    fn taps(&self) -> usize {
        self.kernel.iter().product()
    }

    /// Emits the body for `(x, weights, bias, y, scratch)`; the weights are `groups` blocks of
    /// `(mg * taps) x cg` row-major.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, p: &[Value], ext: &Externs) {
        let (x, wts, bias, y, s) = (p[0], p[1], p[2], p[3], p[4]);
        let in_px: usize = self.in_sp.iter().product();
        let out_px: usize = self.out_sp.iter().product();
        let mk = self.mg * self.taps();
        if in_px == 0 || out_px == 0 || self.n == 0 || self.mg == 0 {
            return;
        }
        let rows = self.in_sp[0] * self.in_sp[1];
        let r = self.tile_rows.clamp(1, rows);
        let wts = match self.arrange_at {
            Some(at) => self.arrange(b, wts, s, at),
            None => wts,
        };
        for_range(b, self.n * self.groups, &mut |b, ng| {
            let xg = offset(b, x, ng, self.cg * in_px * 4);
            let yg = offset(b, y, ng, self.mg * out_px * 4);
            let g = b.ins().urem_imm_u(ng, self.groups as i64);
            let ag = offset(b, wts, g, mk * self.cg * 4);
            // Initialize with the bias.
            let bg = offset(b, bias, g, self.mg * 4);
            for_range(b, self.mg, &mut |b, m| {
                let v = if self.has_bias {
                    let bp = offset(b, bg, m, 4);
                    b.ins().load(F32, mem(), bp, 0)
                } else {
                    b.ins().f32const(Ieee32::with_float(0.0))
                };
                let vv = b.ins().splat(F32X4, v);
                let ym = offset(b, yg, m, out_px * 4);
                for_range(b, out_px / 4, &mut |b, i| {
                    let q = offset(b, ym, i, 16);
                    b.ins().store(mem(), vv, q, 0);
                });
                for t in (out_px / 4) * 4..out_px {
                    b.ins().store(mem(), v, ym, (t * 4) as i32);
                }
            });
            for_range(b, rows / r, &mut |b, t| {
                let row0 = b.ins().imul_imm_u(t, r as i64);
                self.tile(b, ext, [xg, ag, yg, s], row0, r);
            });
            if !rows.is_multiple_of(r) {
                let row0 = b.ins().iconst(I64, ((rows / r) * r) as i64);
                self.tile(b, ext, [xg, ag, yg, s], row0, rows % r);
            }
        });
    }

    /// Rearranges run-time weights `W[g*cg + c, r]` (`r < mg * taps`) into the A blocks
    /// `A_g[r, c]` at `s + at`; returns their address.
    fn arrange(&self, b: &mut FunctionBuilder<'_>, w: Value, s: Value, at: usize) -> Value {
        let mk = self.mg * self.taps();
        let a = b.ins().iadd_imm_u(s, at as i64);
        for_range(b, self.groups * self.cg, &mut |b, gc| {
            // Row gc of W (mk floats) becomes column c of block g.
            let src = offset(b, w, gc, mk * 4);
            let g = b.ins().udiv_imm_u(gc, self.cg.max(1) as i64);
            let c = b.ins().urem_imm_u(gc, self.cg.max(1) as i64);
            let blk = offset(b, a, g, mk * self.cg * 4);
            let dst = offset(b, blk, c, 4);
            for_range(b, mk, &mut |b, r| {
                let sp = offset(b, src, r, 4);
                let v = b.ins().load(F32, mem(), sp, 0);
                let dp = offset(b, dst, r, self.cg * 4);
                b.ins().store(mem(), v, dp, 0);
            });
        });
        a
    }

    /// One tile of `nr` input rows starting at row `row0`.
    fn tile(
        &self,
        b: &mut FunctionBuilder<'_>,
        ext: &Externs,
        [xg, ag, yg, s]: [Value; 4],
        row0: Value,
        nr: usize,
    ) {
        let wdt = self.in_sp[2];
        let in_px: usize = self.in_sp.iter().product();
        let out_px: usize = self.out_sp.iter().product();
        let tn = nr * wdt;
        let taps = self.taps();
        let mk = self.mg * taps;
        let c = |b: &mut FunctionBuilder<'_>, v: usize| b.ins().iconst(I64, v as i64);
        let xt = offset(b, xg, row0, wdt * 4);
        let packed = b.ins().iadd_imm_u(s, self.scratch[0] as i64);
        let col = b.ins().iadd_imm_u(s, self.scratch[1] as i64);
        let sa = b.ins().iadd_imm_u(s, self.scratch[2] as i64);
        let args = [c(b, self.cg), c(b, tn), xt, c(b, in_px), c(b, 1), packed];
        b.ins().call(ext.pack_b, &args);
        let acc = b.ins().iconst(I32, 0);
        let args = [
            c(b, mk),
            c(b, tn),
            c(b, self.cg),
            ag,
            c(b, self.cg),
            packed,
            col,
            c(b, tn),
            acc,
            sa,
            c(b, 1),
        ];
        b.ins().call(ext.sgemm, &args);
        // col2im.
        let [kd, kh, kw] = self.kernel;
        let [od, oh, ow] = self.out_sp;
        let (h_in, sw, pw, dw) = (
            self.in_sp[1],
            self.strides[2],
            self.pads[2],
            self.dilations[2],
        );
        for_range(b, self.mg, &mut |b, m| {
            let ym = offset(b, yg, m, out_px * 4);
            let cm = offset(b, col, m, taps * tn * 4);
            for a in 0..kd {
                for h in 0..kh {
                    for wk in 0..kw {
                        let tap = (a * kh + h) * kw + wk;
                        // Static input column range landing inside the output row.
                        let shift = pw as i64 - (wk * dw) as i64; // ow = iw*sw - shift
                        let lo = if shift <= 0 {
                            0
                        } else {
                            (shift as usize).div_ceil(sw)
                        };
                        let hi_excl = {
                            let top = ow as i64 - 1 + shift; // iw*sw <= top
                            if top < 0 {
                                0
                            } else {
                                ((top as usize) / sw + 1).min(wdt)
                            }
                        };
                        if lo >= hi_excl {
                            continue;
                        }
                        let ow0 = (lo * sw) as i64 - shift;
                        let crow0 = b.ins().iadd_imm_u(cm, (tap * tn * 4) as i64);
                        for_range(b, nr, &mut |b, r| {
                            let q = b.ins().iadd(row0, r);
                            let (id, ih) = if h_in == 1 {
                                (q, b.ins().iconst(I64, 0))
                            } else {
                                (
                                    b.ins().udiv_imm_u(q, h_in as i64),
                                    b.ins().urem_imm_u(q, h_in as i64),
                                )
                            };
                            let pos =
                                |b: &mut FunctionBuilder<'_>, i: Value, dim: usize, k: usize| {
                                    let v = b.ins().imul_imm_s(i, self.strides[dim] as i64);
                                    b.ins().iadd_imm_s(
                                        v,
                                        (k * self.dilations[dim]) as i64 - self.pads[dim] as i64,
                                    )
                                };
                            let pd = pos(b, id, 0, a);
                            let ph = pos(b, ih, 1, h);
                            let okd = b.ins().icmp_imm_u(IntCC::UnsignedLessThan, pd, od as i64);
                            let okh = b.ins().icmp_imm_u(IntCC::UnsignedLessThan, ph, oh as i64);
                            let ok = b.ins().band(okd, okh);
                            let body = b.create_block();
                            let next = b.create_block();
                            b.ins().brif(ok, body, &[], next, &[]);
                            b.switch_to_block(body);
                            let orow = b.ins().imul_imm_s(pd, oh as i64);
                            let orow = b.ins().iadd(orow, ph);
                            let yrow = offset(b, ym, orow, ow * 4);
                            let yrow = b.ins().iadd_imm_s(yrow, ow0 * 4);
                            let crow = offset(b, crow0, r, wdt * 4);
                            let crow = b.ins().iadd_imm_u(crow, (lo * 4) as i64);
                            self.scatter_row(b, crow, yrow, hi_excl - lo, sw);
                            b.ins().jump(next, &[]);
                            b.switch_to_block(next);
                        });
                    }
                }
            }
        });
    }

    /// `y[j * sw] += c[j]` for `j < len`.
    fn scatter_row(&self, b: &mut FunctionBuilder<'_>, c: Value, y: Value, len: usize, sw: usize) {
        if sw == 1 {
            for_range(b, len / 4, &mut |b, j| {
                let cp = offset(b, c, j, 16);
                let yp = offset(b, y, j, 16);
                let cv = b.ins().load(F32X4, mem(), cp, 0);
                let yv = b.ins().load(F32X4, mem(), yp, 0);
                let sum = b.ins().fadd(yv, cv);
                b.ins().store(mem(), sum, yp, 0);
            });
            for t in (len / 4) * 4..len {
                let off = (t * 4) as i32;
                let cv = b.ins().load(F32, mem(), c, off);
                let yv = b.ins().load(F32, mem(), y, off);
                let sum = b.ins().fadd(yv, cv);
                b.ins().store(mem(), sum, y, off);
            }
            return;
        }
        for_range(b, len, &mut |b, j| {
            let cp = offset(b, c, j, 4);
            let yp = offset(b, y, j, sw * 4);
            let cv = b.ins().load(F32, mem(), cp, 0);
            let yv = b.ins().load(F32, mem(), yp, 0);
            let sum = b.ins().fadd(yv, cv);
            b.ins().store(mem(), sum, yp, 0);
        });
    }
}
