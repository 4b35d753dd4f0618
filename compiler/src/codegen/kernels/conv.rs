//! Window geometry (shared with Conv, which is precompiled: `crate::gemm::conv`) and pooling.
//!
//! MaxPool and AveragePool call the precompiled `crate::gemm::pool::arenac_pool2d` with their
//! parameters in a stack slot; GlobalAveragePool is generated here.

use cranelift_codegen::ir::types::{F32, F32X4, I64};
use cranelift_codegen::ir::{InstBuilder, StackSlotData, StackSlotKind, Value};
use cranelift_frontend::FunctionBuilder;

use super::{Math, for_range, mem, offset};
use crate::codegen::program::Externs;
use crate::gemm::pool::{POOL_AVG, POOL_AVG_INCLUDE_PAD, POOL_MAX, PoolParams};

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
    /// The parameters of [`crate::gemm::pool::arenac_pool2d`] for a windowed pool (None for
    /// [`PoolDesc::GlobalAverage`]).
    pub fn params(&self) -> Option<PoolParams> {
        let (planes, win, pad_end, kind) = match self {
            PoolDesc::Max { planes, win } => (planes, win, [0, 0], POOL_MAX),
            PoolDesc::Average {
                planes,
                win,
                pad_end,
                include_pad,
            } => (
                planes,
                win,
                *pad_end,
                if *include_pad {
                    POOL_AVG_INCLUDE_PAD
                } else {
                    POOL_AVG
                },
            ),
            PoolDesc::GlobalAverage { .. } => return None,
        };
        let u = |v: usize| v as u64;
        Some(PoolParams {
            planes: u(*planes),
            h: u(win.in_hw[0]),
            w: u(win.in_hw[1]),
            oh: u(win.out_hw[0]),
            ow: u(win.out_hw[1]),
            kh: u(win.kernel[0]),
            kw: u(win.kernel[1]),
            sh: u(win.strides[0]),
            sw: u(win.strides[1]),
            pt: u(win.pads[0]),
            pl: u(win.pads[1]),
            dh: u(win.dilations[0]),
            dw: u(win.dilations[1]),
            pb: u(pad_end[0]),
            pr: u(pad_end[1]),
            kind,
        })
    }

    /// Emits the body for `(x, y)`: windowed pools call the precompiled
    /// [`crate::gemm::pool::arenac_pool2d`], global average pooling is generated here.
    pub fn emit(&self, b: &mut FunctionBuilder<'_>, x: Value, y: Value, ext: &Externs) {
        let sm = Math { ty: F32 };
        match self {
            PoolDesc::Max { .. } | PoolDesc::Average { .. } => {
                if let Some(p) = self.params() {
                    // The parameters live in a stack slot of this kernel for the call.
                    let fields = p.fields();
                    let slot = b.create_sized_stack_slot(StackSlotData::new(
                        StackSlotKind::ExplicitSlot,
                        (fields.len() * 8) as u32,
                        3,
                    ));
                    for (i, f) in fields.iter().enumerate() {
                        let v = b.ins().iconst(I64, *f as i64);
                        b.ins().stack_store(I64, v, slot, (i * 8) as i32);
                    }
                    let pp = b.ins().stack_addr(I64, slot, 0);
                    b.ins().call(ext.pool2d, &[pp, x, y]);
                }
            }
            PoolDesc::GlobalAverage { planes, len } => {
                let len = *len;
                let vm = Math { ty: F32X4 };
                for_range(b, *planes, &mut |b, pl| {
                    let xp = offset(b, x, pl, len * 4);
                    // Four accumulators over 16 floats a step (independent fadd chains),
                    // then the remaining whole vectors, summed pairwise.
                    let z = vm.c(b, 0.0);
                    let accs: [_; 4] = std::array::from_fn(|_| {
                        let a = b.declare_var(F32X4);
                        b.def_var(a, z);
                        a
                    });
                    for_range(b, len / 16, &mut |b, i| {
                        let p = offset(b, xp, i, 64);
                        for (k, &acc) in accs.iter().enumerate() {
                            let v = vm.load(b, p, (k * 16) as i32);
                            let a = b.use_var(acc);
                            let a = b.ins().fadd(a, v);
                            b.def_var(acc, a);
                        }
                    });
                    for (k, &acc) in accs.iter().enumerate().take((len % 16) / 4) {
                        let v = vm.load(b, xp, ((len / 16) * 64 + k * 16) as i32);
                        let a = b.use_var(acc);
                        let a = b.ins().fadd(a, v);
                        b.def_var(acc, a);
                    }
                    let [a0, a1, a2, a3] = accs.map(|a| b.use_var(a));
                    let s01 = b.ins().fadd(a0, a1);
                    let s23 = b.ins().fadd(a2, a3);
                    let a = b.ins().fadd(s01, s23);
                    b.def_var(accs[0], a);
                    let a = b.use_var(accs[0]);
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
