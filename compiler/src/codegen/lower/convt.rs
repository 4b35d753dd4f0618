//! Lowering of ConvTranspose: weights rearranged per group into the GEMM's A at compile time,
//! the bias as an f32 operand, the tile and scratch layout of [`ConvTDesc`].

use super::Ctx;
use crate::codegen::kernels::convt::ConvTDesc;
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::gemm::stage16::{N16, convt::ConvT16};
use crate::gemm::{IM2COL_TILE, a_scratch_floats, packed_b_len};
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::ConvTransposeAttrs;

/// Constant weights `wt` arranged into the GEMM's A blocks
/// ([`crate::gemm::stage16::convt::arrange_weights`]), stored once per weight: the offset.
fn arranged(w: &mut WeightsBuilder, wt: &Tensor, groups: usize, cg: usize, mk: usize) -> usize {
    let form = format!("convt arranged groups={groups} cg={cg} mk={mk}");
    w.form_f32_of(wt, form, groups * mk * cg, |wv32, out| {
        crate::gemm::stage16::convt::arrange_weights(groups, cg, mk, wv32, out)
    })
}

fn up64(x: usize) -> usize {
    x.next_multiple_of(64)
}

pub(super) fn conv_transpose(
    cx: &Ctx<'_>,
    a: &ConvTransposeAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    cx.all_f32()?;
    let n = cx.g.node(cx.id);
    let (xv, wv, y) = (cx.input(0)?, cx.input(1)?, cx.output()?);
    let (xs, ys) = (cx.ty(xv).shape.clone(), cx.ty(y).shape.clone());
    let d = a.kernel.len();
    if !(1..=3).contains(&d) || xs.len() != d + 2 || ys.len() != d + 2 {
        return Err(cx.err(format!("no kernel for {d}-d ConvTranspose")));
    }
    let groups = a.group.max(1);
    let (c, m) = (xs[1], ys[1]);
    let (cg, mg) = (c / groups, m / groups);
    let taps: usize = a.kernel.iter().product();
    if cx.ty(wv).numel() != Some(c * mg * taps) {
        return Err(cx.err("ConvTranspose weights do not match the input channels"));
    }
    // A_g[(m, tap), c] = W[g*cg + c, m, tap]: at compile time for constant weights, by the
    // kernel into its scratch for run-time ones.
    let mk = mg * taps;
    // Stored once per weight (the arrangement depends on the groups and shapes only).
    let weights = cx.constant(wv).map(|wt| arranged(w, wt, groups, cg, mk));
    let bias = n.inputs.get(2).copied();
    let pad3 = |v: &[usize], fill: usize| -> [usize; 3] {
        let mut out = [fill; 3];
        for (k, &x) in v.iter().rev().take(3).enumerate() {
            out[2 - k] = x;
        }
        out
    };
    let in_sp = pad3(&xs[2..], 1);
    let rows = in_sp[0] * in_sp[1];
    let tile_rows = (IM2COL_TILE / in_sp[2].max(1)).clamp(1, rows.max(1));
    let tn = tile_rows * in_sp[2];
    let scratch = [
        0,
        up64(packed_b_len(cg, tn) * 4),
        up64(packed_b_len(cg, tn) * 4) + up64(mk * tn * 4),
    ];
    let mut need = scratch[2] + a_scratch_floats(mk, cg) * 4;
    // Run-time weights: their rearranged copy after the rest (see `Op::scratch_bytes`).
    let arrange_at = weights.is_none().then(|| up64(need));
    if let Some(at) = arrange_at {
        need = at + groups * mk * cg * 4;
    }
    let tys: Vec<TensorType> = n.inputs.iter().map(|&v| cx.ty(v).clone()).collect();
    let consts: Vec<bool> = n.inputs.iter().map(|&v| cx.constant(v).is_some()).collect();
    let planned =
        n.op.scratch_bytes(&tys, &[cx.ty(y).clone()], &consts, cx.threads());
    if planned < need {
        return Err(cx.err(format!(
            "ConvTranspose needs {need} bytes of scratch, {planned} planned"
        )));
    }
    let desc = ConvTDesc {
        n: xs[0],
        groups,
        cg,
        mg,
        in_sp,
        out_sp: pad3(&ys[2..], 1),
        kernel: pad3(&a.kernel, 1),
        strides: pad3(&a.strides, 1),
        dilations: pad3(&a.dilations, 1),
        pads: pad3(a.pads.get(..d).unwrap_or_default(), 0),
        tile_rows,
        has_bias: bias.is_some(),
        scratch,
        arrange_at,
    };
    let bias_op = match bias {
        Some(bv) => match cx.constant(bv) {
            Some(t) => Operand::Weights(w.tensor_f32(t)),
            None => cx.arena(bv)?,
        },
        None => Operand::Null,
    };
    let weights_op = match weights {
        Some(off) => Operand::Weights(off),
        None => cx.arena(wv)?,
    };
    let args = vec![
        cx.arena(xv)?,
        weights_op,
        bias_op,
        cx.arena(y)?,
        cx.scratch()?,
    ];
    let (node, op) = cx.label();
    let f = prog.kernel(format!("convt {desc:?}"), 5, (&node, &op), |b, p, ext| {
        desc.emit(b, p, ext)
    })?;
    prog.call(f, args);
    Ok(())
}

/// A ConvTranspose on 16-bit data (`--activations`, staged: 1-d or 2-d, constant weights and
/// bias): one host call of [`crate::gemm::stage16::convt::convt`] on the weights arranged as
/// the f32 kernel takes them, in bands of output rows through the planned scratch.
pub(super) fn conv_transpose16(
    cx: &Ctx<'_>,
    t: N16,
    a: &ConvTransposeAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let (xv, wv, y) = (cx.input(0)?, cx.input(1)?, cx.output()?);
    let bias = n.inputs.get(2).copied();
    let q = ConvT16::from_shapes(
        &cx.ty(xv).shape,
        &cx.ty(y).shape,
        &a.kernel,
        &a.strides,
        &a.dilations,
        &a.pads,
        a.group,
        bias.is_some(),
        cx.threads(),
    )
    .ok_or_else(|| cx.err("internal: a staged ConvTranspose without a 1-d or 2-d geometry"))?;
    let (groups, cg, mk) = (q.groups, q.cg, q.mk());
    let wt = cx
        .constant(wv)
        .ok_or_else(|| cx.err("internal: a staged ConvTranspose with run-time weights"))?;
    if cx.ty(wv).numel() != Some(groups * cg * mk) {
        return Err(cx.err("ConvTranspose weights do not match the input channels"));
    }
    let bias_op = match bias {
        Some(bv) => {
            let bt = cx
                .constant(bv)
                .ok_or_else(|| cx.err("internal: a staged ConvTranspose with a run-time bias"))?;
            if bt.numel() != groups * q.mg {
                return Err(cx.err("ConvTranspose bias does not match the output channels"));
            }
            Operand::Weights(w.tensor_f32(bt))
        }
        None => Operand::Null,
    };
    let need = q.scratch_bytes();
    let planned = super::dense::planned_scratch(cx);
    if planned < need {
        return Err(cx.err(format!(
            "internal: the staged 16-bit ConvTranspose needs {need} bytes of scratch, \
             {planned} planned (a planner bug)"
        )));
    }
    let woff = arranged(w, wt, groups, cg, mk);
    let kernel = crate::codegen::host::HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: X and Y planned for this geometry (a
        // ConvTranspose's output is not planned over its input), the arranged weights and
        // the bias in the weights region, the scratch checked against `scratch_bytes`.
        unsafe {
            crate::gemm::stage16::convt::convt(
                t,
                &q,
                p[0].cast::<u16>(),
                p[1].cast::<f32>(),
                p[2].cast::<f32>(),
                p[3].cast::<u16>(),
                p[4].cast::<f32>(),
            )
        };
    });
    let args = vec![
        cx.arena(xv)?,
        Operand::Weights(woff),
        bias_op,
        cx.arena(y)?,
        cx.scratch()?,
    ];
    super::act16::host_call(cx, prog, kernel, args)
}
