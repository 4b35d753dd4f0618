//! Lowering of Conv over 3-d windows: a [`HostKernel`] running [`crate::gemm::conv3d::Conv3d`]
//! (f32, im2col by output depth slice into the planned scratch, the GEMM core, the bias and a
//! fused activation in the epilogue), called through `arenac_host`.

use super::Ctx;
use super::epilogue::fused_activation;
use crate::codegen::host::{HostKernel, input, output};
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::gemm::act::Activation;
use crate::gemm::conv3d::Conv3d;
use crate::ops::ConvAttrs;

pub(super) fn lower(
    cx: &Ctx<'_>,
    a: &ConvAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    cx.all_f32()?;
    let (xv, wv, y) = (cx.input(0)?, cx.input(1)?, cx.output()?);
    let bias = cx.g.node(cx.id).inputs.get(2).copied();
    let mut geometry = Conv3d::from_shapes(
        &cx.ty(xv).shape,
        &cx.ty(y).shape,
        &cx.ty(wv).shape,
        &a.kernel,
        &a.strides,
        &a.dilations,
        &a.pads,
        a.group,
    )
    .ok_or_else(|| cx.err("internal: a 3-d Conv whose shapes do not fit its attributes"))?;
    geometry.has_bias = bias.is_some();
    geometry.act = fused_activation(cx.g, cx.plan, cx.id).map_or(Activation::None, |f| f.act);
    geometry.threads = cx.threads();
    // Constant weights are stored packed for the GEMM core (as `Op::scratch_bytes` assumes).
    geometry.packed_a = cx.constant(wv).is_some();
    let need = geometry.scratch_bytes();
    let planned = super::dense::planned_scratch(cx);
    if planned < need {
        return Err(cx.err(format!(
            "internal: 3-d Conv needs {need} bytes of scratch, {planned} planned"
        )));
    }
    if let Some(b) = bias
        && cx.ty(b).numel() != Some(geometry.m)
    {
        return Err(cx.err(format!(
            "the bias has {:?} elements, the output {} channels: give a bias of one value per \
             output channel",
            cx.ty(b).numel(),
            geometry.m
        )));
    }
    let st = w.storage();
    // The packed layout depends on the geometry, the selected kernel and the stored type.
    let form = format!(
        "conv3d packed m={} k={} groups={} kernel={} as {}",
        geometry.m,
        geometry.kernel_len(),
        geometry.groups,
        crate::gemm::selected_kernel().name,
        st.name()
    );
    let weights = match cx.constant(wv) {
        // Reduced weights (`--weights f16|bf16|int8`): packed in that type, widened by the core.
        Some(t) if st.is_reduced() => {
            geometry.wtype = st;
            w.reduced_nodes.insert(cx.id);
            let g = geometry;
            let off =
                super::dense::pack_reduced(w, t, form, g.weights_bytes(), |read, out, done| {
                    g.pack_weights_lowp(read, out, done)
                });
            Operand::Weights(off)
        }
        Some(t) => {
            let g = geometry;
            Operand::Weights(w.form_f32_of(t, form, g.weights_bytes() / 4, |src, out| {
                g.pack_weights(src, out)
            }))
        }
        None => cx.arena(wv)?,
    };
    let bias_op = match bias.map(|b| (b, cx.constant(b))) {
        Some((_, Some(t))) => Operand::Weights(w.tensor_f32(t)),
        Some((b, None)) => cx.arena(b)?,
        None => Operand::Null,
    };
    let ([nx, ny], nw) = (geometry.lens(), geometry.weights_bytes());
    let (m, scratch_floats) = (geometry.m, need / 4);
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: X, W, Y planned for these element counts, the
        // bias (when given) for M, the scratch for the bytes checked above.
        let (xs, ws, ys, sc) = unsafe {
            (
                input::<f32>(p[0], nx),
                input::<u8>(p[1], nw),
                output::<f32>(p[3], ny),
                output::<f32>(p[4], scratch_floats),
            )
        };
        // SAFETY: as above.
        let b = (!p[2].is_null()).then(|| unsafe { input::<f32>(p[2], m) });
        geometry.run(xs, ws, b, ys, sc);
    });
    let args = vec![cx.arena(xv)?, weights, bias_op, cx.arena(y)?, cx.scratch()?];
    super::act16::host_call(cx, prog, kernel, args)
}
