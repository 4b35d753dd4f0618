//! Lowering of the sampling ops (`ops::sample`): a [`HostKernel`] closing over the node's
//! geometry, run on f32 buffers through one call of [`crate::codegen::host::arenac_host`]
//! with the inputs' and the output's addresses.

use super::Ctx;
use crate::codegen::host::{HostKernel, input, output};
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::ir::types::TensorType;
use crate::ops::sample::{SampleOp, grid};

pub(super) fn lower(
    cx: &Ctx<'_>,
    op: &SampleOp,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    cx.all_f32()?;
    let n = cx.g.node(cx.id);
    let types: Vec<TensorType> = n.inputs.iter().map(|&v| cx.ty(v).clone()).collect();
    let numel = |t: &TensorType| t.numel().unwrap_or(0);
    let out = cx.output()?;
    let y_len = numel(cx.ty(out));
    let kernel = match op {
        SampleOp::GridSample(a) => {
            let [xt, gt] = types.as_slice() else {
                return Err(cx.err("GridSample takes X and grid"));
            };
            let g =
                grid::GridGeometry::new(&xt.shape, &gt.shape).map_err(|e| cx.err(e.to_string()))?;
            let (a, x_len, g_len) = (*a, numel(xt), numel(gt));
            HostKernel::new(move |p| {
                // SAFETY: `arenac_host`'s contract: X, grid and Y planned for these counts.
                let (x, gr, y) = unsafe {
                    (
                        input::<f32>(p[0], x_len),
                        input::<f32>(p[1], g_len),
                        output::<f32>(p[2], y_len),
                    )
                };
                grid::grid_sample(&a, &g, x, gr, y);
            })
        }
        SampleOp::AffineGrid {
            align_corners,
            size,
        } => {
            let (align, size) = (*align_corners, size.clone());
            let t_len = types.first().map_or(0, numel);
            HostKernel::new(move |p| {
                // SAFETY: as above: theta and Y planned for these counts.
                let (t, y) = unsafe { (input::<f32>(p[0], t_len), output::<f32>(p[1], y_len)) };
                grid::affine_grid(align, &size, t, y);
            })
        }
    };
    let mut args = vec![prog.keep(Box::new(kernel))];
    for &v in &n.inputs {
        args.push(cx.operand(v, w)?);
    }
    args.push(cx.arena(out)?);
    if args.len() > 5 {
        return Err(cx.err("internal: a host kernel takes at most 4 buffers"));
    }
    args.resize(5, Operand::Null);
    let (node, opname) = cx.label();
    let f = prog.kernel("host".to_string(), 5, (&node, &opname), |b, p, ext| {
        cranelift_codegen::ir::InstBuilder::call(b.ins(), ext.host, p);
    })?;
    prog.call(f, args);
    Ok(())
}
