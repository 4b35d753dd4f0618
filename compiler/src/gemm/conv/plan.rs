//! The scratch a whole f32 Conv is planned with: the kernel it will run, as the planner sees
//! it.
//!
//! [`super::conv2d_scratch_bytes`] sizes the im2col GEMM's panel and A scratch for every
//! packed path but Winograd, the direct kernels' too: with weights stored reduced
//! (`--weights`) those widen a block of output channels into it, or the Conv falls back to
//! the GEMM, and the 16-bit staged bands (`stage16::conv::slots`) keep that room for the
//! same reason. A whole Conv whose weights stay f32 and that runs the direct kernels
//! ([`super::ConvParams::is_direct`]) or the small-plane pointwise kernel
//! ([`super::ConvParams::is_pointwise_small`]) reads no scratch at all: [`conv2d_plan_bytes`]
//! plans it none (a 2-thread ResNet-18's `layer4.0.conv2`: 2 x 1.18 MB of im2col slots it
//! never touched), and the lowering runs any planned bytes so
//! ([`conv2d_tile_for_plan`]).
//!
//! Whether the direct kernels run depends on the CPU (AVX-512 selected, `ARENAC_CONV_DIRECT`)
//! and `pw_small`'s on it too (AVX-512 or AVX2 with F16C, `ARENAC_CONV_PW_SMALL`), so plans
//! of such Convs do: where neither runs, the im2col scratch is planned as before.

use super::{ConvParams, conv2d_scratch_bytes, conv2d_tile_for_scratch, mark_packed};
use crate::gemm::IM2COL_TILE;
use crate::gemm::direct::DIRECT_PACKED;
use crate::gemm::pw_small::PW_SMALL_PACKED;

/// Whether `p`, marked as the lowering marks it ([`mark_packed`], `wtype` set where reduced
/// weights are stored in the path's own layout), runs a kernel that reads no scratch: the
/// direct kernels on f32 weights (with reduced ones they widen into the scratch), or the
/// small-plane pointwise kernel (reduced weights widened in registers).
pub fn reads_no_scratch(p: &ConvParams) -> bool {
    (p.packed_a == DIRECT_PACKED && p.wtype == 0) || p.packed_a == PW_SMALL_PACKED
}

/// Whether a whole Conv `p` as the planner gives it (`packed_a` 1 for constant weights,
/// `crate::ops::conv::scratch_params`) runs, with its weights kept in f32, a kernel that
/// reads no scratch ([`reads_no_scratch`] of `p` marked by [`mark_packed`]).
pub fn f32_reads_no_scratch(p: &ConvParams) -> bool {
    if p.packed_a != 1 || p.wtype != 0 {
        return false;
    }
    let mut q = *p;
    mark_packed(&mut q);
    reads_no_scratch(&q)
}

/// The scratch bytes the planner gives a whole f32 Conv `p` (as
/// `crate::ops::conv::scratch_params` gives it, at its `tile`): with `f32_weights` (the
/// weights stay f32: the planner's `LivenessOptions::winograd_precompute`), none where
/// [`f32_reads_no_scratch`]; else [`conv2d_scratch_bytes`] (with weights that may be stored
/// reduced, the direct kernels need room to widen into, or the GEMM its panel).
pub fn conv2d_plan_bytes(p: &ConvParams, f32_weights: bool) -> usize {
    if f32_weights && f32_reads_no_scratch(p) {
        0
    } else {
        conv2d_scratch_bytes(p)
    }
}

/// The im2col tile the lowering runs `p` (marked, its weights' storage chosen) with for
/// `bytes` of planned scratch: [`conv2d_tile_for_scratch`], or where `p` reads no scratch
/// ([`reads_no_scratch`]: the tile is unused) the default tile whatever was planned. `None`:
/// the kernel needs more than planned.
pub fn conv2d_tile_for_plan(p: &ConvParams, bytes: usize) -> Option<usize> {
    conv2d_tile_for_scratch(p, bytes).or_else(|| reads_no_scratch(p).then_some(IM2COL_TILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ResNet-18's `layer4.0.conv2` (512 x 512 x 3 x 3 on a 7 x 7 plane) at 2 threads.
    fn layer4() -> ConvParams {
        let mut p = ConvParams::from_shapes(
            &[1, 512, 7, 7],
            &[1, 512, 7, 7],
            &[3, 3],
            &[1, 1],
            &[1, 1],
            &[1, 1, 1, 1],
            1,
        )
        .expect("2-d");
        p.packed_a = 1;
        p.threads = 2;
        p
    }

    #[test]
    fn direct_f32_plans_no_scratch_else_im2col() {
        let p = layer4();
        let im2col = conv2d_scratch_bytes(&p);
        // Two slots of a 4608-row panel of 64 columns.
        assert_eq!(im2col, 2 * 4608 * 64 * 4);
        let direct = p.is_direct();
        assert_eq!(conv2d_plan_bytes(&p, true), if direct { 0 } else { im2col });
        // Weights that may be stored reduced keep the room.
        assert_eq!(conv2d_plan_bytes(&p, false), im2col);
        // Run-time weights: the GEMM path with its A scratch.
        let rt = ConvParams { packed_a: 0, ..p };
        assert_eq!(conv2d_plan_bytes(&rt, true), conv2d_scratch_bytes(&rt));
        // The lowering reads any planned bytes back for the f32 direct kernels.
        let mut q = p;
        mark_packed(&mut q);
        assert_eq!(
            conv2d_tile_for_plan(&q, 0),
            direct.then_some(IM2COL_TILE),
            "a kernel reading no scratch runs on none"
        );
        assert_eq!(conv2d_tile_for_plan(&q, im2col), Some(IM2COL_TILE));
        // Reduced weights on the direct kernels read their slots: never on none.
        let r = ConvParams { wtype: 1, ..q };
        assert!(!reads_no_scratch(&r));
    }
}
