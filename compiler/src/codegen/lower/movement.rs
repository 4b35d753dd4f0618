//! Lowering of the data-movement ops: copies, slices, concat/split, gather; Pad, Expand, Tile
//! and Resize as index-table gathers (tables computed here, at compile time). Every kernel moves bytes, so
//! any dtype of element size 1, 2, 4 or 8 runs (linear Resize: f32).

use super::Ctx;
use crate::codegen::host::HostKernel;
use crate::codegen::kernels::movement::{CopyDesc, FillDesc, IndexGatherDesc};
use crate::codegen::kernels::resize::{Axis, LinearDesc};
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::ir::tensor::{Scalar, Tensor};
use crate::ops::ResizeAttrs;
use crate::ops::resize::{AxisTaps, axis_taps, is_gather};
use crate::ops::{Op, PadMode, ScalarArg};

pub(super) fn contiguous(shape: &[usize]) -> Vec<i64> {
    let mut st = vec![1i64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        st[k] = st[k + 1] * shape[k + 1] as i64;
    }
    st
}

/// `op` moved by `bytes` (which may be negative for reversed slices).
pub(super) fn shifted(cx: &Ctx<'_>, op: Operand, bytes: i64) -> Result<Operand, Error> {
    let add = |o: usize| {
        usize::try_from(o as i64 + bytes).map_err(|_| cx.err("slice offset out of range"))
    };
    Ok(match op {
        Operand::Arena(o) => Operand::Arena(add(o)?),
        Operand::Weights(o) => Operand::Weights(add(o)?),
        Operand::Null => Operand::Null,
        Operand::Indexed {
            weights,
            offset,
            step,
            level,
        } => Operand::Indexed {
            weights,
            offset: add(offset)?,
            step,
            level,
        },
        Operand::Imm(_) => return Err(cx.err("an immediate is not an address")),
        Operand::Host(_) => return Err(cx.err("internal: a host object is not a tensor")),
    })
}

pub(super) fn copy_call(
    cx: &Ctx<'_>,
    prog: &mut Program,
    desc: CopyDesc,
    src: Operand,
    dst: Operand,
) -> Result<(), Error> {
    let (node, op) = cx.label();
    let f = prog.kernel(format!("copy {desc:?}"), 2, (&node, &op), |b, p, _| {
        desc.emit(b, p[0], p[1])
    })?;
    prog.call(f, vec![src, dst]);
    Ok(())
}

/// Runs of at least this many contiguous bytes (on both sides) are copied by [`rows_copy`]'s
/// host kernel rather than the generated loop of f32x4 moves: a patch's windows (a Slice
/// cropping 88-pixel rows out of a U-Net skip ran at 4.3 GB/s in the generated loop).
const HOST_RUN_BYTES: usize = 64;

/// Outer dims (around the contiguous run) [`rows_copy`] takes.
const ROWS_OUTER: usize = 4;

/// `desc` by [`rows_copy`] where it takes it, else by the generated loop ([`copy_call`]).
fn rows_or_copy(
    cx: &Ctx<'_>,
    prog: &mut Program,
    desc: CopyDesc,
    src: Operand,
    dst: Operand,
) -> Result<(), Error> {
    match rows_copy(&desc) {
        Some(kernel) => {
            let args = vec![prog.keep(Box::new(kernel)), src, dst];
            super::sample::call(cx, prog, args)
        }
        None => copy_call(cx, prog, desc, src, dst),
    }
}

/// A host kernel copying `desc` as `memmove`s of its innermost run, when that run is
/// contiguous on both sides and at least [`HOST_RUN_BYTES`] long, every stride is
/// non-negative and at most [`ROWS_OUTER`] dims lie around it; `None` otherwise. The same
/// bytes as [`copy_call`]'s loop.
fn rows_copy(desc: &CopyDesc) -> Option<HostKernel> {
    let k = desc.dims.len();
    let run = desc.dims.last()? * desc.elem;
    if desc.src.last() != Some(&1) || desc.dst.last() != Some(&1) || run < HOST_RUN_BYTES {
        return None;
    }
    if k - 1 > ROWS_OUTER || desc.src.iter().chain(&desc.dst).any(|&s| s < 0) {
        return None;
    }
    // Outer dims right-aligned in fixed arrays (size 1, stride 0 before them).
    let (mut dims, mut ss, mut ds) = (
        [1usize; ROWS_OUTER],
        [0usize; ROWS_OUTER],
        [0usize; ROWS_OUTER],
    );
    for i in 0..k - 1 {
        let j = ROWS_OUTER - (k - 1) + i;
        dims[j] = desc.dims[i];
        ss[j] = usize::try_from(desc.src[i]).ok()?.checked_mul(desc.elem)?;
        ds[j] = usize::try_from(desc.dst[i]).ok()?.checked_mul(desc.elem)?;
    }
    Some(HostKernel::new(move |p| {
        let (s, d) = (p[0].cast_const(), p[1]);
        for a in 0..dims[0] {
            for b in 0..dims[1] {
                for c in 0..dims[2] {
                    for e in 0..dims[3] {
                        let so = a * ss[0] + b * ss[1] + c * ss[2] + e * ss[3];
                        let dof = a * ds[0] + b * ds[1] + c * ds[2] + e * ds[3];
                        // SAFETY: `arenac_host`'s contract: the lowering passed the node's
                        // source and destination, readable and writable over the
                        // descriptor's extent (every run at these offsets lies inside).
                        unsafe { std::ptr::copy(s.add(so), d.add(dof), run) };
                    }
                }
            }
        }
    }))
}

pub(super) fn movement(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let x = cx.input(0)?;
    let xt = cx.ty(x).clone();
    let elem = xt.dtype.size();
    if ![1, 2, 4, 8].contains(&elem) {
        return Err(cx.err(format!(
            "no kernel for {} on {} yet",
            n.op.name(),
            xt.dtype.name()
        )));
    }
    let in_st = contiguous(&xt.shape);
    match &n.op {
        Op::Transpose { perm } => {
            let y = cx.output()?;
            let ys = cx.ty(y).shape.clone();
            let src: Vec<i64> = perm.iter().map(|&p| in_st[p]).collect();
            let desc = CopyDesc::new(elem, &ys, &src, &contiguous(&ys));
            copy_call(cx, prog, desc, cx.operand(x, w)?, cx.arena(y)?)
        }
        Op::Slice { axes } => {
            let y = cx.output()?;
            let ys = cx.ty(y).shape.clone();
            let mut src = in_st.clone();
            let mut base = 0i64;
            for a in axes {
                base += a.start * in_st[a.axis];
                src[a.axis] = in_st[a.axis] * a.step;
            }
            let desc = CopyDesc::new(elem, &ys, &src, &contiguous(&ys));
            let from = shifted(cx, cx.operand(x, w)?, base * elem as i64)?;
            rows_or_copy(cx, prog, desc, from, cx.arena(y)?)
        }
        Op::PatchWrite { at, .. } => {
            let y = cx.output()?;
            let ys = cx.ty(y).shape.clone();
            let out_st = contiguous(&ys);
            let to = cx.arena(y)?;
            let patch = *n
                .inputs
                .last()
                .ok_or_else(|| cx.err("PatchWrite without a patch"))?;
            if n.inputs.len() == 2 {
                // Written over its accumulated input when the planner put both in one buffer.
                let from = cx.operand(x, w)?;
                if from != to {
                    let desc = CopyDesc::new(elem, &ys, &out_st, &out_st);
                    copy_call(cx, prog, desc, from, to)?;
                }
            }
            let ps = cx.ty(patch).shape.clone();
            let (Some(&rs), Some(&cs)) = (out_st.get(2), out_st.get(3)) else {
                return Err(cx.err("PatchWrite output must be 4-d"));
            };
            let base = at[0] as i64 * rs + at[1] as i64 * cs;
            let desc = CopyDesc::new(elem, &ps, &contiguous(&ps), &out_st);
            let dst = shifted(cx, to, base * elem as i64)?;
            rows_or_copy(cx, prog, desc, cx.operand(patch, w)?, dst)
        }
        Op::Concat { axis } => {
            let y = cx.output()?;
            let ys = cx.ty(y).shape.clone();
            let out_st = contiguous(&ys);
            let mut at = 0i64;
            for &v in &n.inputs {
                let s = cx.ty(v).shape.clone();
                if s.contains(&0) {
                    continue;
                }
                let desc = CopyDesc::new(elem, &s, &contiguous(&s), &out_st);
                let to = shifted(cx, cx.arena(y)?, at * out_st[*axis] * elem as i64)?;
                at += s[*axis] as i64;
                let from = cx.operand(v, w)?;
                // Computed in place into its slice (liveness' in-place Concat): nothing to copy.
                if from == to {
                    continue;
                }
                copy_call(cx, prog, desc, from, to)?;
            }
            Ok(())
        }
        Op::Split { axis, .. } => {
            let mut at = 0i64;
            for &v in &n.outputs {
                let s = cx.ty(v).shape.clone();
                if !s.contains(&0) {
                    let desc = CopyDesc::new(elem, &s, &in_st, &contiguous(&s));
                    let from = shifted(cx, cx.operand(x, w)?, at * in_st[*axis] * elem as i64)?;
                    copy_call(cx, prog, desc, from, cx.arena(v)?)?;
                }
                at += s[*axis] as i64;
            }
            Ok(())
        }
        Op::Expand { .. } => {
            let y = cx.output()?;
            let ys = cx.ty(y).shape.clone();
            // Input dims right-aligned under the output's, missing ones size 1.
            let lead = ys.len().saturating_sub(xt.shape.len());
            let mut in_shape = vec![1; lead];
            in_shape.extend_from_slice(&xt.shape);
            let maps: Vec<Vec<usize>> = ys
                .iter()
                .zip(&in_shape)
                .map(|(&o, &i)| (0..o).map(|j| if i == 1 { 0 } else { j }).collect())
                .collect();
            let (src, dst) = (cx.operand(x, w)?, cx.arena(y)?);
            gather_call(cx, prog, w, elem, &in_shape, &maps, src, dst)
        }
        Op::Tile { .. } => {
            let y = cx.output()?;
            let ys = cx.ty(y).shape.clone();
            let maps: Vec<Vec<usize>> = ys
                .iter()
                .zip(&xt.shape)
                .map(|(&o, &i)| (0..o).map(|j| j % i.max(1)).collect())
                .collect();
            let (src, dst) = (cx.operand(x, w)?, cx.arena(y)?);
            gather_call(cx, prog, w, elem, &xt.shape, &maps, src, dst)
        }
        Op::Pad { mode, pads, value } => pad(cx, prog, w, *mode, pads, *value),
        _ => Err(cx.err(format!("no kernel for {} yet", n.op.name()))),
    }
}

/// Emits a separable gather of `src` (shape `in_shape`) into `dst` through `maps`.
#[allow(clippy::too_many_arguments)]
pub(super) fn gather_call(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
    elem: usize,
    in_shape: &[usize],
    maps: &[Vec<usize>],
    src: Operand,
    dst: Operand,
) -> Result<(), Error> {
    if maps.iter().any(Vec::is_empty) {
        return Ok(());
    }
    if maps.len() != in_shape.len()
        || maps
            .iter()
            .zip(in_shape)
            .any(|(m, &d)| m.iter().any(|&j| j >= d))
    {
        return Err(cx.err("index map out of the input's range"));
    }
    let (desc, tables) = IndexGatherDesc::new(elem, in_shape, maps);
    let t = if tables.is_empty() {
        Operand::Null
    } else {
        Operand::Weights(w.add(&tables))
    };
    let (node, op) = cx.label();
    let f = prog.kernel(
        format!("gather-map {desc:?}"),
        3,
        (&node, &op),
        |b, p, _| desc.emit(b, p[0], p[1], p[2]),
    )?;
    prog.call(f, vec![src, t, dst]);
    Ok(())
}

/// Pad: constant mode fills the output (with a compile-time value, or one the kernel reads
/// from the node's second input) and copies the (cropped) input into its interior; the other
/// modes are gathers whose per-dim maps fold the mode's index rule.
fn pad(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
    mode: PadMode,
    pads: &[i64],
    value: ScalarArg<f64>,
) -> Result<(), Error> {
    let (x, y) = (cx.input(0)?, cx.output()?);
    let (xt, ys) = (cx.ty(x).clone(), cx.ty(y).shape.clone());
    let elem = xt.dtype.size();
    let r = xt.shape.len();
    if pads.len() != 2 * r || ys.len() != r {
        return Err(cx.err("pads need 2 entries per dim"));
    }
    // Per dim: (crop_begin, pad_begin, kept).
    let mut dims = Vec::with_capacity(r);
    for d in 0..r {
        let (b, e) = (pads[d], pads[d + r]);
        let cb = usize::try_from((-b).max(0)).map_err(|_| cx.err("pads out of range"))?;
        let ce = usize::try_from((-e).max(0)).map_err(|_| cx.err("pads out of range"))?;
        let pb = usize::try_from(b.max(0)).map_err(|_| cx.err("pads out of range"))?;
        let kept = xt.shape[d]
            .checked_sub(cb)
            .and_then(|k| k.checked_sub(ce))
            .ok_or_else(|| cx.err("pads crop more than the dim holds"))?;
        dims.push((cb, pb, kept));
    }
    let (src, dst) = (cx.operand(x, w)?, cx.arena(y)?);
    if ys.contains(&0) {
        return Ok(());
    }
    if mode == PadMode::Constant {
        let (bits, mut args) = match value {
            ScalarArg::Const(v) => {
                let fill_value = if xt.dtype.is_float() {
                    Scalar::Float(v)
                } else {
                    Scalar::Int(v as i64)
                };
                let fill = Tensor::filled(xt.dtype, vec![], fill_value);
                let mut le = [0u8; 8];
                for (o, &v) in le.iter_mut().zip(fill.bytes().iter()) {
                    *o = v;
                }
                (Some(u64::from_le_bytes(le)), Vec::new())
            }
            ScalarArg::Input => (None, vec![cx.operand(cx.input(1)?, w)?]),
        };
        let fd = FillDesc {
            elem,
            count: ys.iter().product(),
            bits,
        };
        args.push(dst);
        let (node, op) = cx.label();
        let f = prog.kernel(
            format!("fill {fd:?}"),
            args.len(),
            (&node, &op),
            |b, p, _| fd.emit(b, p),
        )?;
        prog.call(f, args);
        let kept: Vec<usize> = dims.iter().map(|d| d.2).collect();
        if kept.contains(&0) {
            return Ok(());
        }
        let in_st = contiguous(&xt.shape);
        let out_st = contiguous(&ys);
        let from: i64 = dims.iter().zip(&in_st).map(|(d, s)| d.0 as i64 * s).sum();
        let to: i64 = dims.iter().zip(&out_st).map(|(d, s)| d.1 as i64 * s).sum();
        let desc = CopyDesc::new(elem, &kept, &in_st, &out_st);
        let e = elem as i64;
        return copy_call(
            cx,
            prog,
            desc,
            shifted(cx, src, from * e)?,
            shifted(cx, dst, to * e)?,
        );
    }
    let mut maps = Vec::with_capacity(r);
    for (d, &(cb, pb, kept)) in dims.iter().enumerate() {
        let k = kept as i64;
        if k == 0 {
            return Err(cx.err(format!("padding empty dim {d} by reading it")));
        }
        let map: Vec<usize> = (0..ys[d])
            .map(|o| {
                let i = o as i64 - pb as i64;
                let j = if (0..k).contains(&i) {
                    i
                } else {
                    match mode {
                        PadMode::Reflect if k == 1 => 0,
                        PadMode::Reflect => {
                            let m = i.rem_euclid(2 * (k - 1));
                            if m < k { m } else { 2 * (k - 1) - m }
                        }
                        PadMode::Wrap => i.rem_euclid(k),
                        _ => i.clamp(0, k - 1),
                    }
                };
                j as usize + cb
            })
            .collect();
        maps.push(map);
    }
    gather_call(cx, prog, w, elem, &xt.shape, &maps, src, dst)
}

/// Resize / Upsample: nearest is a byte gather (any dtype) through per-dim index maps (a
/// whole-factor repeat of the last two dims by [`super::upsample`]'s host kernel); the
/// interpolating modes (f32) read per-dim tap tables (indices and weights from
/// [`axis_taps`], shared with the reference evaluation).
pub(super) fn resize(
    cx: &Ctx<'_>,
    a: &ResizeAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let (x, y) = (cx.input(0)?, cx.output()?);
    let (xt, ys) = (cx.ty(x).clone(), cx.ty(y).shape.clone());
    let r = xt.shape.len();
    if ys.len() != r || a.scales.len() != r {
        return Err(cx.err("Resize scales and output shape must have the input's rank"));
    }
    if ys.contains(&0) {
        return Ok(());
    }
    if xt.shape.contains(&0) {
        return Err(cx.err("cannot resize an empty dim"));
    }
    let src = cx.operand(x, w)?;
    let dst = cx.arena(y)?;
    let axes: Vec<AxisTaps> = (0..r)
        .map(|d| axis_taps(a, d, xt.shape[d], ys[d]))
        .collect();
    if is_gather(a) {
        let elem = xt.dtype.size();
        if ![1, 2, 4, 8].contains(&elem) {
            return Err(cx.err(format!("no kernel for Resize on {}", xt.dtype.name())));
        }
        let maps: Vec<Vec<usize>> = axes.into_iter().map(|t| t.idx).collect();
        if let Some(r) = super::upsample::repeat(&maps, &xt.shape) {
            return super::upsample::call(cx, prog, elem, r, src, dst);
        }
        return gather_call(cx, prog, w, elem, &xt.shape, &maps, src, dst);
    }
    cx.all_f32()?;
    let axes: Vec<Axis> = axes
        .into_iter()
        .map(|t| Axis {
            n: t.n,
            idx: t.idx,
            w: t.w.iter().map(|&v| v as f32).collect(),
            extrap: t.extrap,
        })
        .collect();
    let (desc, tables) = LinearDesc::new(&xt.shape, &axes, a.extrapolation_value);
    let t = if tables.is_empty() {
        Operand::Null
    } else {
        Operand::Weights(w.add(&tables))
    };
    let (node, op) = cx.label();
    let f = prog.kernel(
        format!("resize-interp {desc:?}"),
        3,
        (&node, &op),
        |b, p, _| desc.emit(b, p[0], p[1], p[2]),
    )?;
    prog.call(f, vec![src, t, dst]);
    Ok(())
}
