//! Lowering of DFT and STFT: a [`DftKernel`] (geometry and FFT plan) made now and kept by the
//! program, then one call of [`crate::fft::arenac_dft`] with the kernel's address, the signal,
//! the window (STFT) and the node's planned scratch. MelWeightMatrix with run-time scalars:
//! one call of [`crate::fft::arenac_mel`].

use super::Ctx;
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::fft::DftKernel;
use crate::fft::mel::MelKernel;
use crate::ir::types::TensorType;
use crate::ops::MelAttrs;
use crate::ops::spectral::geometry;

pub(super) fn dft(cx: &Ctx<'_>, prog: &mut Program, w: &mut WeightsBuilder) -> Result<(), Error> {
    cx.all_f32()?;
    let n = cx.g.node(cx.id);
    let types: Vec<TensorType> = n.inputs.iter().map(|&v| cx.ty(v).clone()).collect();
    let g = geometry(&n.op, &types).map_err(|e| cx.err(e.to_string()))?;
    let kernel = DftKernel::new(g).map_err(|e| cx.err(e))?;
    // The planner sized the scratch by the same plan (`Op::scratch_bytes`).
    let planned = super::dense::planned_scratch(cx);
    if planned < kernel.scratch_bytes() {
        return Err(cx.err(format!(
            "internal: the transform needs {} bytes of scratch, {planned} planned",
            kernel.scratch_bytes()
        )));
    }
    let x = cx.operand(cx.input(0)?, w)?;
    let window = match n.inputs.get(1) {
        Some(&v) => cx.operand(v, w)?,
        None => Operand::Null,
    };
    let y = cx.arena(cx.output()?)?;
    let scratch = cx.scratch()?;
    let k = prog.keep(Box::new(kernel));
    let (node, op) = cx.label();
    let f = prog.kernel("dft".to_string(), 5, (&node, &op), |b, p, ext| {
        cranelift_codegen::ir::InstBuilder::call(b.ins(), ext.dft, p);
    })?;
    prog.call(f, vec![k, x, window, y, scratch]);
    Ok(())
}

pub(super) fn mel(
    cx: &Ctx<'_>,
    a: &MelAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let (sr, lo, hi) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let kernel = MelKernel {
        shape: a.mel_shape(),
        rate: cx.ty(sr).dtype,
        edges: cx.ty(lo).dtype,
        out: a.dtype,
    };
    let args = vec![
        prog.keep(Box::new(kernel)),
        cx.operand(sr, w)?,
        cx.operand(lo, w)?,
        cx.operand(hi, w)?,
        cx.arena(cx.output()?)?,
    ];
    let (node, op) = cx.label();
    let f = prog.kernel("mel".to_string(), 5, (&node, &op), |b, p, ext| {
        cranelift_codegen::ir::InstBuilder::call(b.ins(), ext.mel, p);
    })?;
    prog.call(f, args);
    Ok(())
}
