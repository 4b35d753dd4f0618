//! Lowering of the sampling ops (`ops::sample`): a [`HostKernel`] closing over the node's
//! geometry, run on f32 data (int64 indices) through one call of
//! [`crate::codegen::host::arenac_host`] with the inputs' and the output's addresses, then
//! Det's scratch, then — for run-time indices (RoiAlign's batch indices, MaxUnpool's `I`) —
//! the fault record and tag: an index out of range is reported as the run's fault (and
//! read as nothing). Constant indices are checked here instead.

use super::Ctx;
use crate::codegen::fault::report;
use crate::codegen::host::{HostKernel, SLOTS, input, output};
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::ir::types::{DType, TensorType};
use crate::ops::sample::{
    ArgmaxAttrs, DropoutAttrs, LinearAttrs, SampleOp, ScatterAttrs, argmax, deform, det, grid,
    linear, roi, scatter, unpool,
};

/// Reports the first of `idx` outside `0..n` through the record at `p[at]` (tag `p[at + 1]`;
/// nothing when the record is null).
fn check_indices(p: &[*mut u8; SLOTS], at: usize, idx: &[i64], n: usize) {
    let Some(&rec) = p.get(at).filter(|r| !r.is_null()) else {
        return;
    };
    let tag = p.get(at + 1).map_or(0, |&t| t as u64);
    if let Some(&bad) = idx
        .iter()
        .find(|&&i| usize::try_from(i).map_or(true, |i| i >= n))
    {
        // SAFETY: `rec` is the fault record the lowering passed (`Ctx::fault_sink`).
        unsafe { report(rec, tag, bad, 0, n as i64 - 1) };
    }
}

pub(super) fn lower(
    cx: &Ctx<'_>,
    op: &SampleOp,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    match op {
        SampleOp::Dropout(a) => return dropout(cx, *a, prog, w),
        SampleOp::LinearAttention(a) => return linear(cx, *a, prog, w),
        SampleOp::TensorScatter(a) => return tensor_scatter(cx, *a, prog, w),
        SampleOp::MaxPoolIndices(a) => return max_pool_indices(cx, a, prog),
        _ => {}
    }
    let n = cx.g.node(cx.id);
    let types: Vec<TensorType> = n.inputs.iter().map(|&v| cx.ty(v).clone()).collect();
    let out = cx.output()?;
    let yt = cx.ty(out).clone();
    let f32_data = yt.dtype == DType::F32
        && types
            .iter()
            .all(|t| matches!(t.dtype, DType::F32 | DType::I64))
        && types.first().is_some_and(|t| t.dtype == DType::F32);
    if !f32_data {
        return Err(cx.err(format!(
            "no kernel for {} on {} yet (f32 only)",
            n.op.name(),
            yt.dtype.name()
        )));
    }
    let numel = |t: &TensorType| t.numel().unwrap_or(0);
    let len = |i: usize| types.get(i).map_or(0, numel);
    let y_len = numel(&yt);
    let mut sink = None;
    let mut scratch = None;
    // A constant index input is checked now; a run-time one by the kernel.
    let indices = |i: usize, what: &'static str, n: usize, prog: &mut Program| {
        let v = cx.input(i)?;
        if let Some(t) = cx.constant(v) {
            let bad = t
                .to_f64_vec()
                .into_iter()
                .find(|&x| x < 0.0 || x >= n as f64);
            if let Some(bad) = bad {
                return Err(cx.err(format!(
                    "{what} {bad} is out of range 0 to {}",
                    n as i64 - 1
                )));
            }
            return Ok(None);
        }
        cx.fault_sink(prog, i, what)
    };
    let err = |e: crate::error::OpError| cx.err(e.to_string());
    let kernel = match op {
        SampleOp::GridSample(a) => {
            let g = grid::GridGeometry::new(&types[0].shape, &types[1].shape).map_err(err)?;
            let (a, x_len, g_len) = (*a, len(0), len(1));
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
            let (align, size, t_len) = (*align_corners, size.clone(), len(0));
            HostKernel::new(move |p| {
                // SAFETY: as above: theta and Y planned for these counts.
                let (t, y) = unsafe { (input::<f32>(p[0], t_len), output::<f32>(p[1], y_len)) };
                grid::affine_grid(align, &size, t, y);
            })
        }
        SampleOp::RoiAlign(a) => {
            let s = &types[0].shape;
            let xs = [s[0], s[1], s[2], s[3]];
            sink = indices(2, "batch index", xs[0], prog)?;
            let (a, x_len, r_len, b_len) = (*a, len(0), len(1), len(2));
            HostKernel::new(move |p| {
                // SAFETY: as above: X, rois, batch indices and Y planned for these counts.
                let (x, rois, b, y) = unsafe {
                    (
                        input::<f32>(p[0], x_len),
                        input::<f32>(p[1], r_len),
                        input::<i64>(p[2], b_len),
                        output::<f32>(p[3], y_len),
                    )
                };
                check_indices(&p, 4, b, xs[0]);
                roi::roi_align(&a, xs, rois, b, x, y);
            })
        }
        SampleOp::MaxUnpool(a) => {
            let inner = unpool::unpooled(a, &types[0].shape).map_err(err)?;
            let total = inner.iter().product();
            sink = indices(1, "index", total, prog)?;
            let (outer, x_len) = (yt.shape.clone(), len(0));
            HostKernel::new(move |p| {
                // SAFETY: as above: X, I and Y planned for these counts.
                let (x, i, y) = unsafe {
                    (
                        input::<f32>(p[0], x_len),
                        input::<i64>(p[1], x_len),
                        output::<f32>(p[2], y_len),
                    )
                };
                check_indices(&p, 3, i, total);
                unpool::max_unpool(&inner, &outer, x, i, y);
            })
        }
        SampleOp::Det => {
            let m = det::order(&types[0].shape);
            let planned = super::dense::planned_scratch(cx);
            if planned < m * m * 8 {
                return Err(cx.err(format!(
                    "internal: Det needs {} bytes of scratch, {planned} planned",
                    m * m * 8
                )));
            }
            scratch = Some(cx.scratch()?);
            let x_len = len(0);
            HostKernel::new(move |p| {
                // SAFETY: as above, and the scratch holds `m * m` f64 (checked when lowering).
                let (x, y, lu) = unsafe {
                    (
                        input::<f32>(p[0], x_len),
                        output::<f32>(p[1], y_len),
                        output::<f64>(p[2], m * m),
                    )
                };
                det::det(m, x, y, lu);
            })
        }
        SampleOp::DeformConv(a) => {
            let g = deform::DeformGeometry::new(a, &types).map_err(err)?;
            let a = (**a).clone();
            let lens: Vec<usize> = types.iter().map(numel).collect();
            let k = lens.len();
            HostKernel::new(move |p| {
                // SAFETY: as above: the inputs and Y planned for these counts.
                unsafe {
                    let get = |i: usize| input::<f32>(p[i], lens[i]);
                    let mut rest = 3..k;
                    let mut next = |on: bool| if on { rest.next().map(get) } else { None };
                    let (bias, mask) = (next(a.bias), next(a.mask));
                    let d = deform::DeformInputs {
                        x: get(0),
                        w: get(1),
                        offset: get(2),
                        bias,
                        mask,
                    };
                    deform::deform_conv(&a, &g, &d, output::<f32>(p[k], y_len));
                }
            })
        }
        SampleOp::Dropout(_)
        | SampleOp::LinearAttention(_)
        | SampleOp::TensorScatter(_)
        | SampleOp::MaxPoolIndices(_) => {
            return Err(cx.err("internal: lowered above"));
        }
    };
    let mut args = vec![prog.keep(Box::new(kernel))];
    for &v in &n.inputs {
        args.push(cx.operand(v, w)?);
    }
    args.push(cx.arena(out)?);
    args.extend(scratch);
    if let Some(sink) = sink {
        args.extend(sink);
    }
    call(cx, prog, args)
}

/// Dropout's copy (any element type, as bytes), its all-true mask, and the check that a
/// run-time `training_mode` is false (else the run's fault).
fn dropout(
    cx: &Ctx<'_>,
    a: DropoutAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let x = cx.input(0)?;
    let bytes = cx.ty(x).bytes().unwrap_or(0);
    let numel = cx.ty(x).numel().unwrap_or(0);
    let mut args = vec![Operand::Null, cx.operand(x, w)?];
    let ratio_type = if a.ratio {
        args.push(cx.operand(cx.input(1)?, w)?);
        Some(cx.ty(cx.input(1)?).dtype)
    } else {
        None
    };
    let flag = 1 + usize::from(a.ratio);
    if a.check {
        args.push(cx.operand(cx.input(flag)?, w)?);
    }
    let y = *n
        .outputs
        .first()
        .ok_or_else(|| cx.err("missing output 0"))?;
    args.push(cx.arena(y)?);
    if a.mask {
        let m = *n
            .outputs
            .get(1)
            .ok_or_else(|| cx.err("missing output 1 (mask)"))?;
        args.push(cx.arena(m)?);
    }
    let sink = if a.check {
        cx.fault_sink(prog, flag, "training_mode")?
    } else {
        None
    };
    if let Some(sink) = sink {
        args.extend(sink);
    }
    // Slots: x, [ratio], [training], y, [mask], [record, tag].
    let t = usize::from(a.check);
    let ys = flag + t;
    let (ms, rec) = (ys + 1, ys + 1 + usize::from(a.mask));
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: x and y hold `bytes` bytes, the mask `numel`,
        // the flag one byte, the ratio one element of its type.
        unsafe {
            let nonzero_ratio = ratio_type.is_none_or(|dt| {
                crate::ir::tensor::read_f64(dt, input::<u8>(p[1], dt.size())) != 0.0
            });
            let training = t == 1 && input::<u8>(p[flag], 1).first().is_some_and(|&b| b != 0);
            if training && nonzero_ratio && !p[rec].is_null() {
                report(p[rec], p[rec + 1] as u64, 1, 0, 0);
            }
            output::<u8>(p[ys], bytes).copy_from_slice(input::<u8>(p[0], bytes));
            if a.mask {
                output::<u8>(p[ms], numel).fill(1);
            }
        }
    });
    args[0] = prog.keep(Box::new(kernel));
    call(cx, prog, args)
}

/// LinearAttention (f32): the recurrence over the node's inputs, writing the output and the
/// present state (the state is updated in place there).
fn linear(
    cx: &Ctx<'_>,
    a: LinearAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let types: Vec<TensorType> = n.inputs.iter().map(|&v| cx.ty(v).clone()).collect();
    let outs: Vec<TensorType> = n.outputs.iter().map(|&v| cx.ty(v).clone()).collect();
    if types.iter().chain(&outs).any(|t| t.dtype != DType::F32) || outs.len() != 2 {
        return Err(cx.err("no kernel for LinearAttention on these types yet (f32 only)"));
    }
    let g = linear::LinearGeometry::new(&a, &types).map_err(|e| cx.err(e.to_string()))?;
    let lens: Vec<usize> = types.iter().map(|t| t.numel().unwrap_or(0)).collect();
    let (ny, ns) = (outs[0].numel().unwrap_or(0), outs[1].numel().unwrap_or(0));
    let k = lens.len();
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: the inputs then the output and the state,
        // planned for these element counts.
        unsafe {
            let get = |i: usize| input::<f32>(p[i], lens[i]);
            let mut rest = 3..k;
            let mut next = |on: bool| if on { rest.next().map(get) } else { None };
            let (past, decay, beta) = (next(a.past), next(a.gating), next(a.delta));
            let x = linear::LinearInputs {
                q: get(0),
                k: get(1),
                v: get(2),
                past,
                decay,
                beta,
            };
            let y = output::<f32>(p[k], ny);
            let state = output::<f32>(p[k + 1], ns);
            linear::linear_attention(&a, &g, &x, y, state);
        }
    });
    let mut args = vec![prog.keep(Box::new(kernel))];
    for &v in &n.inputs {
        args.push(cx.operand(v, w)?);
    }
    for &v in &n.outputs {
        args.push(cx.arena(v)?);
    }
    call(cx, prog, args)
}

/// TensorScatter (any element type): the cache copied, the update's rows written; a
/// run-time linear-mode index outside the cache is the run's fault.
fn tensor_scatter(
    cx: &Ctx<'_>,
    a: ScatterAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let types: Vec<TensorType> = n.inputs.iter().map(|&v| cx.ty(v).clone()).collect();
    let g = scatter::ScatterGeometry::new(&a, &types).map_err(|e| cx.err(e.to_string()))?;
    let elem = types[0].dtype.size();
    let (np, nu) = (types[0].bytes().unwrap_or(0), types[1].bytes().unwrap_or(0));
    let mut sink = None;
    if a.indices {
        let v = cx.input(2)?;
        if let Some(t) = cx.constant(v) {
            if let Some(bad) = scatter::bad_index(&a, &g, &t.to_i64_vec()) {
                return Err(cx.err(format!(
                    "write index {bad} is out of range 0 to {}",
                    g.max - g.len
                )));
            }
        } else {
            sink = cx.fault_sink(prog, 2, "write index")?;
        }
    }
    let k = 2 + usize::from(a.indices);
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: the cache and the output hold `np` bytes, the
        // update `nu`, the indices one int64 per batch.
        unsafe {
            let idx = if a.indices {
                Some(input::<i64>(p[2], g.batch))
            } else {
                None
            };
            if let (Some(v), Some(&rec)) = (idx, p.get(k + 1).filter(|r| !r.is_null()))
                && let Some(bad) = scatter::bad_index(&a, &g, v)
            {
                let tag = p.get(k + 2).map_or(0, |&t| t as u64);
                report(rec, tag, bad, 0, (g.max - g.len) as i64);
            }
            let out = output::<u8>(p[k], np);
            scatter::tensor_scatter(&a, &g, elem, input(p[0], np), input(p[1], nu), idx, out);
        }
    });
    let mut args = vec![prog.keep(Box::new(kernel))];
    for &v in &n.inputs {
        args.push(cx.operand(v, w)?);
    }
    args.push(cx.arena(cx.output()?)?);
    if let Some(sink) = sink {
        args.extend(sink);
    }
    call(cx, prog, args)
}

/// MaxPool with Indices (f32 values, int64 indices).
fn max_pool_indices(cx: &Ctx<'_>, a: &ArgmaxAttrs, prog: &mut Program) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let x = cx.input(0)?;
    let (Some(&y), Some(&i)) = (n.outputs.first(), n.outputs.get(1)) else {
        return Err(cx.err("MaxPool with Indices has two outputs"));
    };
    if cx.ty(x).dtype != DType::F32 || cx.ty(y).dtype != DType::F32 {
        return Err(cx.err(format!(
            "no kernel for MaxPool with Indices on {} yet (f32 only)",
            cx.ty(x).dtype.name()
        )));
    }
    let g = argmax::geometry(a, &cx.ty(x).shape, &cx.ty(y).shape)
        .ok_or_else(|| cx.err("MaxPool with Indices: 1 to 3 spatial dims"))?;
    let (nx, ny, column_major) = (g.input_len(), g.output_len(), a.column_major);
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: X, Y and the indices planned for these counts.
        let (xv, yv, iv) = unsafe {
            (
                input::<f32>(p[0], nx),
                output::<f32>(p[1], ny),
                output::<i64>(p[2], ny),
            )
        };
        argmax::max_pool_indices(&g, column_major, xv, yv, iv);
    });
    let args = vec![
        prog.keep(Box::new(kernel)),
        cx.arena(x)?,
        cx.arena(y)?,
        cx.arena(i)?,
    ];
    call(cx, prog, args)
}

/// The call of `arenac_host` with `args` (the kernel, then up to [`SLOTS`] addresses).
pub(super) fn call(cx: &Ctx<'_>, prog: &mut Program, mut args: Vec<Operand>) -> Result<(), Error> {
    if args.len() > SLOTS + 1 {
        return Err(cx.err("internal: a host kernel takes at most 8 addresses"));
    }
    args.resize(SLOTS + 1, Operand::Null);
    let (node, opname) = cx.label();
    let f = prog.kernel(
        "host".to_string(),
        SLOTS + 1,
        (&node, &opname),
        |b, p, ext| {
            cranelift_codegen::ir::InstBuilder::call(b.ins(), ext.host, p);
        },
    )?;
    prog.call(f, args);
    Ok(())
}
