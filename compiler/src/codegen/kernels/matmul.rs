//! Gemm / MatMul: a loop nest over batch slices calling `arenac_sgemm` once per slice; a
//! runtime B is packed with `arenac_pack_b` into the node's scratch first; a runtime
//! transposed A (Gemm `transA`) is transposed into scratch by a scalar loop.

use cranelift_codegen::ir::types::{F32, I32, I64};
use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;

use super::{for_range, mem, offset};
use crate::codegen::program::Externs;

/// One batched product `C[b] (+)= A[b] * B[b]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatMulDesc {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Contraction length.
    pub k: usize,
    /// Output batch dims.
    pub batch: Vec<usize>,
    /// Byte strides over `batch` of A, B (packed slices when `b_packed`) and C.
    pub a_stride: Vec<usize>,
    /// See `a_stride`.
    pub b_stride: Vec<usize>,
    /// See `a_stride`.
    pub c_stride: Vec<usize>,
    /// B is already packed (a constant packed at compile time).
    pub b_packed: bool,
    /// The type a packed B is stored in (`WeightType::code`: 0 f32; else it is called through
    /// `arenac_sgemm_lowp`).
    pub b_type: u64,
    /// Element strides of a runtime B's rows and columns.
    pub b_rs: usize,
    /// See `b_rs`.
    pub b_cs: usize,
    /// A is stored transposed (`k x m`) at run time: transpose it into scratch first.
    pub a_transposed: bool,
    /// Add to C instead of overwriting it.
    pub accumulate: bool,
    /// Byte offsets in the scratch of the packed B, the transposed A and the sgemm A scratch.
    pub scratch: [usize; 3],
    /// Threads the sgemm A scratch has slots for.
    pub threads: usize,
}

impl MatMulDesc {
    /// Emits the body for `(a, b, c, scratch)`.
    pub fn emit(&self, bld: &mut FunctionBuilder<'_>, p: &[Value], ext: &Externs) {
        self.level(bld, 0, p[0], p[1], p[2], p[3], ext);
    }

    #[allow(clippy::too_many_arguments)]
    fn level(
        &self,
        bld: &mut FunctionBuilder<'_>,
        d: usize,
        a: Value,
        b: Value,
        c: Value,
        s: Value,
        ext: &Externs,
    ) {
        if d == self.batch.len() {
            self.slice(bld, a, b, c, s, ext);
            return;
        }
        for_range(bld, self.batch[d], &mut |bld, i| {
            let a2 = offset(bld, a, i, self.a_stride[d]);
            let b2 = offset(bld, b, i, self.b_stride[d]);
            let c2 = offset(bld, c, i, self.c_stride[d]);
            self.level(bld, d + 1, a2, b2, c2, s, ext);
        });
    }

    fn slice(
        &self,
        bld: &mut FunctionBuilder<'_>,
        a: Value,
        b: Value,
        c: Value,
        s: Value,
        ext: &Externs,
    ) {
        let iconst = |bld: &mut FunctionBuilder<'_>, x: usize| bld.ins().iconst(I64, x as i64);
        let packed = if self.b_packed {
            b
        } else {
            let out = bld.ins().iadd_imm_u(s, self.scratch[0] as i64);
            let args = [
                iconst(bld, self.k),
                iconst(bld, self.n),
                b,
                iconst(bld, self.b_rs),
                iconst(bld, self.b_cs),
                out,
            ];
            bld.ins().call(ext.pack_b, &args);
            out
        };
        let a = if self.a_transposed {
            let at = bld.ins().iadd_imm_u(s, self.scratch[1] as i64);
            let (m, k) = (self.m, self.k);
            for_range(bld, m, &mut |bld, i| {
                let src = offset(bld, a, i, 4);
                let dst = offset(bld, at, i, k * 4);
                for_range(bld, k, &mut |bld, q| {
                    let sp = offset(bld, src, q, m * 4);
                    let v = bld.ins().load(F32, mem(), sp, 0);
                    let dp = offset(bld, dst, q, 4);
                    bld.ins().store(mem(), v, dp, 0);
                });
            });
            at
        } else {
            a
        };
        let sa = bld.ins().iadd_imm_u(s, self.scratch[2] as i64);
        let acc = bld.ins().iconst(I32, i64::from(self.accumulate));
        let args = [
            iconst(bld, self.m),
            iconst(bld, self.n),
            iconst(bld, self.k),
            a,
            iconst(bld, self.k),
            packed,
            c,
            iconst(bld, self.n),
            acc,
            sa,
            iconst(bld, self.threads.max(1)),
        ];
        if self.b_packed && self.b_type != 0 {
            let mut args = args.to_vec();
            args.push(iconst(bld, self.b_type as usize));
            bld.ins().call(ext.sgemm_lowp, &args);
        } else {
            bld.ins().call(ext.sgemm, &args);
        }
    }
}
