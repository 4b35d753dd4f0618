//! LRN (local response normalization across channels, f32, `N x C x D1...`), per the ONNX
//! spec: `square_sum[c] = sum of x[c']^2` for `c'` in
//! `[c - floor((size-1)/2), c + ceil((size-1)/2)]` clipped to the channels, and
//! `y = x * (bias + alpha / size * square_sum)^(-beta)`, the power as `exp(-beta ln(.))` (any
//! beta). One channel plane at a time: the plane of `y` first accumulates the squares of
//! its window's planes (f32x4 over the spatial elements), then is turned into the output.
//!
//! In place ([`LrnDesc::emit_in_place`], `y` may equal `x`): before plane `c` of `y` is
//! written over plane `c` of `x`, that input plane is copied into a ring of
//! [`LrnDesc::ring_planes`] planes (the node's scratch, [`lrn_scratch_bytes`]); the taps
//! `c' <= c` read the ring (their input planes may already be overwritten), the taps `c' > c`
//! read `x` (not yet written).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{F32, F32X4};
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::{Math, for_range, offset};

/// The per-element step of [`LrnDesc::plane`]: `(width, builder, y, src) -> new y`.
type PlaneFn<'a> = dyn FnMut(Math, &mut FunctionBuilder<'_>, Value, Option<Value>) -> Value + 'a;

/// One LRN kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct LrnDesc {
    /// Batch.
    pub n: usize,
    /// Channels.
    pub c: usize,
    /// Elements per channel plane (product of the spatial dims).
    pub inner: usize,
    /// Window size (channels).
    pub size: usize,
    /// Scale.
    pub alpha: f32,
    /// Exponent.
    pub beta: f32,
    /// Bias.
    pub bias: f32,
}

/// Scratch bytes of the in-place LRN kernel on an f32 input of `shape` (`N x C x D1...`) with
/// window `size`: [`LrnDesc::ring_planes`] channel planes. The planner and the lowering both
/// size the node's scratch by this function.
pub fn lrn_scratch_bytes(shape: &[usize], size: usize) -> usize {
    let inner = shape
        .get(2..)
        .unwrap_or_default()
        .iter()
        .fold(1usize, |a, &d| a.saturating_mul(d));
    (size.saturating_sub(1) / 2)
        .saturating_add(1)
        .saturating_mul(inner)
        .saturating_mul(4)
}

impl LrnDesc {
    /// Planes in the in-place ring: the current input plane and the `floor((size-1)/2)`
    /// before it, the ones a later output plane still reads.
    pub fn ring_planes(&self) -> usize {
        self.size.saturating_sub(1) / 2 + 1
    }

    /// Emits the in-place body for `(x, y, ring)`: `y` may equal `x` (or not overlap it at
    /// all), `ring` holds [`LrnDesc::ring_planes`] planes and overlaps neither.
    pub fn emit_in_place(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value, ring: Value) {
        let plane = self.inner * 4;
        let below = self.size.saturating_sub(1) / 2;
        let r = self.ring_planes();
        for_range(b, self.n * self.c, &mut |b, row| {
            let yr = offset(b, y, row, plane);
            let xr = offset(b, x, row, plane);
            let slot = b.ins().urem_imm_u(row, r as i64);
            let rr = offset(b, ring, slot, plane);
            // Save the input plane before its output overwrites it.
            self.plane(b, rr, Some(xr), &mut |_, _, acc, v| v.unwrap_or(acc));
            self.plane(b, yr, None, &mut |m, b, _, _| m.c(b, 0.0));
            let ch = b.ins().urem_imm_u(row, self.c.max(1) as i64);
            // Taps c - below ..= c from the ring, c + 1 ..= c + above from x.
            for (lo, n, from_ring) in [(0, below + 1, true), (below + 1, self.size, false)] {
                for_range(b, n.saturating_sub(lo), &mut |b, k| {
                    let k = b.ins().iadd_imm_s(k, lo as i64);
                    let cc = b.ins().iadd(ch, k);
                    let cc = b.ins().iadd_imm_s(cc, -(below as i64));
                    let inside = b
                        .ins()
                        .icmp_imm_u(IntCC::UnsignedLessThan, cc, self.c as i64);
                    let body = b.create_block();
                    let skip = b.create_block();
                    b.ins().brif(inside, body, &[], skip, &[]);
                    b.switch_to_block(body);
                    // Row of the tap: row + k - below (>= 0 since the tap is inside).
                    let src_row = b.ins().iadd(row, k);
                    let src_row = b.ins().iadd_imm_s(src_row, -(below as i64));
                    let src = if from_ring {
                        let s = b.ins().urem_imm_u(src_row, r as i64);
                        offset(b, ring, s, plane)
                    } else {
                        offset(b, x, src_row, plane)
                    };
                    self.plane(b, yr, Some(src), &mut |_, b, acc, v| {
                        let v = v.unwrap_or(acc);
                        b.ins().fma(v, v, acc)
                    });
                    b.ins().jump(skip, &[]);
                    b.switch_to_block(skip);
                });
            }
            self.finish(b, yr, rr);
        });
    }

    /// `y = x * (bias + alpha / size * y)^(-beta)` over one plane (`y` holds the square sum).
    fn finish(&self, b: &mut FunctionBuilder<'_>, yr: Value, xr: Value) {
        let (k, bias, nbeta) = (self.alpha / self.size as f32, self.bias, -self.beta);
        self.plane(b, yr, Some(xr), &mut |m, b, acc, v| {
            let kk = m.c(b, k);
            let bb = m.c(b, bias);
            let base = b.ins().fma(acc, kk, bb);
            let e = m.c(b, nbeta);
            let d = m.pow_pos(b, base, e);
            let xv = v.unwrap_or(acc);
            b.ins().fmul(xv, d)
        });
    }

    /// Emits the body for `(x, y)` (`y` must not overlap `x`).
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value) {
        let plane = self.inner * 4;
        let below = self.size.saturating_sub(1) / 2;
        for_range(b, self.n * self.c, &mut |b, row| {
            let yr = offset(b, y, row, plane);
            let xr = offset(b, x, row, plane);
            self.plane(b, yr, None, &mut |m, b, _, _| m.c(b, 0.0));
            // Channel index of this row, then each window tap that falls inside 0..c.
            let ch = b.ins().urem_imm_u(row, self.c.max(1) as i64);
            let first = b.ins().isub(row, ch);
            for_range(b, self.size, &mut |b, k| {
                let cc = b.ins().iadd(ch, k);
                let cc = b.ins().iadd_imm_s(cc, -(below as i64));
                let inside = b
                    .ins()
                    .icmp_imm_u(IntCC::UnsignedLessThan, cc, self.c as i64);
                let body = b.create_block();
                let skip = b.create_block();
                b.ins().brif(inside, body, &[], skip, &[]);
                b.switch_to_block(body);
                let src_row = b.ins().iadd(first, cc);
                let src = offset(b, x, src_row, plane);
                self.plane(b, yr, Some(src), &mut |_, b, acc, v| {
                    let v = v.unwrap_or(acc);
                    b.ins().fma(v, v, acc)
                });
                b.ins().jump(skip, &[]);
                b.switch_to_block(skip);
            });
            self.finish(b, yr, xr);
        });
    }

    /// `y[i] = f(y[i], src[i])` over one plane, f32x4 then a scalar tail.
    fn plane(
        &self,
        b: &mut FunctionBuilder<'_>,
        y: Value,
        src: Option<Value>,
        f: &mut PlaneFn<'_>,
    ) {
        let vm = Math { ty: F32X4 };
        let sm = Math { ty: F32 };
        let n = self.inner;
        for_range(b, n / 4, &mut |b, i| {
            let yp = offset(b, y, i, 16);
            let acc = vm.load(b, yp, 0);
            let v = src.map(|s| {
                let sp = offset(b, s, i, 16);
                vm.load(b, sp, 0)
            });
            let r = f(vm, b, acc, v);
            vm.store(b, r, yp, 0);
        });
        for t in (n / 4) * 4..n {
            let off = (t * 4) as i32;
            let acc = sm.load(b, y, off);
            let v = src.map(|s| sm.load(b, s, off));
            let r = f(sm, b, acc, v);
            sm.store(b, r, y, off);
        }
    }
}
