//! Lowering of MaxPool and AveragePool over 3-d windows: a [`HostKernel`] running
//! [`crate::gemm::pool3d::Pool3d`] (f32), called through `arenac_host`.

use super::Ctx;
use crate::codegen::host::{HostKernel, input, output};
use crate::codegen::program::Program;
use crate::error::Error;
use crate::gemm::pool3d::Pool3d;
use crate::ops::PoolAttrs;

pub(super) fn lower(
    cx: &Ctx<'_>,
    a: &PoolAttrs,
    max: bool,
    prog: &mut Program,
) -> Result<(), Error> {
    cx.all_f32()?;
    let (x, y) = (cx.input(0)?, cx.output()?);
    let (xs, ys) = (&cx.ty(x).shape, &cx.ty(y).shape);
    let three = |v: &[usize]| -> Option<[usize; 3]> { v.try_into().ok() };
    let geometry = (|| {
        Some(Pool3d {
            planes: xs.first()? * xs.get(1)?,
            input: three(xs.get(2..)?)?,
            output: three(ys.get(2..)?)?,
            kernel: three(&a.kernel)?,
            strides: three(&a.strides)?,
            dilations: three(&a.dilations)?,
            pad_begin: three(a.pads.get(..3)?)?,
            pad_end: three(a.pads.get(3..)?)?,
            max,
            include_pad: a.count_include_pad,
        })
    })()
    .ok_or_else(|| cx.err("internal: a 3-d pooling node without 3-d shapes"))?;
    let (nx, ny) = (geometry.input_len(), geometry.output_len());
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: X and Y planned for these element counts.
        let (xv, yv) = unsafe { (input::<f32>(p[0], nx), output::<f32>(p[1], ny)) };
        geometry.run(xv, yv);
    });
    let args = vec![cx.arena(x)?, cx.arena(y)?];
    super::act16::host_call(cx, prog, kernel, args)
}
