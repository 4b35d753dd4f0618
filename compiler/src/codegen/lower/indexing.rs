//! Lowering of the index-driven movement ops ([`MoveOp`]): run-time-index kernels for the
//! gathers, scatters and OneHot; Trilu and ReverseSequence loops; DepthToSpace/SpaceToDepth as
//! one strided copy over the 6-d view; Compress as a compile-time index-table gather; EyeLike as
//! a copy of its compile-time identity; Col2Im as a scatter-add through a compile-time table. The data-dependent ops always fold at import.

use super::Ctx;
use super::movement::{contiguous, copy_call, gather_call};
use crate::codegen::kernels::movement::{
    Col2ImDesc, Combine, CopyDesc, ElementsDesc, IndexKind, NdDesc, OneHotDesc, ReverseDesc,
    TriluDesc,
};
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::ir::types::DType;
use crate::ops::movement::index::eye_like;
use crate::ops::{MoveOp, Reduction, ScalarArg};

fn prod(d: &[usize]) -> usize {
    d.iter().product()
}

/// Emits one call of a kernel made by `emit` over `args`.
fn call(
    cx: &Ctx<'_>,
    prog: &mut Program,
    key: String,
    args: Vec<Operand>,
    emit: impl Fn(&mut cranelift_frontend::FunctionBuilder<'_>, &[cranelift_codegen::ir::Value]),
) -> Result<(), Error> {
    let (node, op) = cx.label();
    let f = prog.kernel(key, args.len(), (&node, &op), |b, p, _| emit(b, p))?;
    prog.call(f, args);
    Ok(())
}

pub(super) fn lower(
    cx: &Ctx<'_>,
    m: &MoveOp,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let x = cx.input(0)?;
    let y = cx.output()?;
    let (xt, yt) = (cx.ty(x).clone(), cx.ty(y).clone());
    let elem = yt.dtype.size();
    if ![1, 2, 4, 8].contains(&elem) {
        return Err(cx.err(format!("no kernel for {} on {}", m.name(), yt.dtype.name())));
    }
    if yt.numel() == Some(0) {
        return Ok(());
    }
    let index_bytes = |i: usize| -> Result<usize, Error> {
        match cx.ty(cx.input(i)?).dtype {
            DType::I64 => Ok(8),
            DType::I32 => Ok(4),
            other => Err(cx.err(format!("no kernel for {} indices", other.name()))),
        }
    };
    let combine = |reduction: Reduction| -> Result<Combine, Error> {
        let dt = xt.dtype;
        let ok = reduction == Reduction::None
            || matches!(dt, DType::F32 | DType::F64)
            || (dt.is_int() && dt != DType::Bool);
        if !ok {
            return Err(cx.err(format!(
                "no kernel for reduction '{}' on {}",
                reduction.name(),
                dt.name()
            )));
        }
        Ok(Combine {
            reduction,
            float: dt.is_float(),
            signed: matches!(dt, DType::I8 | DType::I16 | DType::I32 | DType::I64),
        })
    };
    let operands = |k: usize, w: &mut WeightsBuilder| -> Result<Vec<Operand>, Error> {
        let mut v = Vec::with_capacity(k + 1);
        for &i in n.inputs.iter().take(k) {
            v.push(cx.operand(i, w)?);
        }
        v.push(cx.arena(y)?);
        Ok(v)
    };
    match m {
        MoveOp::GatherElements { axis } | MoveOp::ScatterElements { axis, .. } => {
            let scatter = match m {
                MoveOp::ScatterElements { reduction, .. } => Some(combine(*reduction)?),
                _ => None,
            };
            let idx = cx.ty(cx.input(1)?).shape.clone();
            if prod(&idx) == 0 {
                // Nothing gathered, or nothing scattered: the data copied as is.
                return match scatter {
                    None => Ok(()),
                    Some(_) => {
                        let desc = CopyDesc::new(elem, &[prod(&xt.shape)], &[1], &[1]);
                        copy_call(cx, prog, desc, cx.operand(x, w)?, cx.arena(y)?)
                    }
                };
            }
            if xt.shape[*axis] == 0 {
                return Err(cx.err(format!(
                    "indices into axis {axis} of size 0 (every index is out of range)"
                )));
            }
            let sink = cx.fault_sink(prog, 1, "index")?;
            let desc = ElementsDesc {
                elem,
                index_bytes: index_bytes(1)?,
                dims: idx,
                data: xt.shape.clone(),
                axis: *axis,
                scatter,
                checked: sink.is_some(),
            };
            let mut args = operands(if scatter.is_some() { 3 } else { 2 }, w)?;
            args.extend(sink.into_iter().flatten());
            call(cx, prog, format!("elements {desc:?}"), args, |b, p| {
                desc.emit(b, p)
            })
        }
        MoveOp::GatherNd { .. } | MoveOp::ScatterNd { .. } => {
            let (batch_dims, scatter) = match m {
                MoveOp::GatherNd { batch_dims } => (*batch_dims, None),
                MoveOp::ScatterNd { reduction } => (0, Some(combine(*reduction)?)),
                _ => (0, None),
            };
            let idx = cx.ty(cx.input(1)?).shape.clone();
            let (q, k) = (idx.len(), idx.last().copied().unwrap_or(0));
            let ds = &xt.shape;
            if q == 0 || batch_dims + k > ds.len() || ds[batch_dims..batch_dims + k].contains(&0) {
                return Err(cx.err("indices do not address the data"));
            }
            let st = contiguous(ds);
            let sink = cx.fault_sink(prog, 1, "index")?;
            let desc = NdDesc {
                elem,
                index_bytes: index_bytes(1)?,
                batches: prod(&ds[..batch_dims]),
                rows: prod(&idx[batch_dims..q - 1]),
                dims: ds[batch_dims..batch_dims + k].to_vec(),
                strides: st[batch_dims..batch_dims + k]
                    .iter()
                    .map(|&s| s as usize)
                    .collect(),
                slice: prod(&ds[batch_dims + k..]),
                data_batch: prod(&ds[batch_dims..]),
                scatter,
                checked: sink.is_some(),
            };
            let mut args = operands(if scatter.is_some() { 3 } else { 2 }, w)?;
            args.extend(sink.into_iter().flatten());
            call(cx, prog, format!("nd {desc:?}"), args, |b, p| {
                desc.emit(b, p)
            })
        }
        MoveOp::OneHot { axis, depth } => {
            let index = match xt.dtype {
                DType::F32 => IndexKind::Float { bytes: 4 },
                DType::F64 => IndexKind::Float { bytes: 8 },
                d if d.is_int() => IndexKind::Int {
                    bytes: d.size(),
                    signed: matches!(d, DType::I8 | DType::I16 | DType::I32 | DType::I64),
                },
                d => return Err(cx.err(format!("no kernel for OneHot indices of {}", d.name()))),
            };
            let desc = OneHotDesc {
                elem,
                index,
                outer: prod(&xt.shape[..*axis]),
                depth: *depth,
                inner: prod(&xt.shape[*axis..]),
            };
            call(
                cx,
                prog,
                format!("onehot {desc:?}"),
                operands(2, w)?,
                |b, p| desc.emit(b, p),
            )
        }
        MoveOp::Trilu { upper, k } => {
            let s = &xt.shape;
            let r = s.len();
            let desc = TriluDesc {
                elem,
                batch: prod(&s[..r - 2]),
                rows: s[r - 2],
                cols: s[r - 1],
                upper: *upper,
                k: match k {
                    ScalarArg::Const(k) => Some(*k),
                    ScalarArg::Input => None,
                },
            };
            let args = operands(if desc.k.is_none() { 2 } else { 1 }, w)?;
            call(cx, prog, format!("trilu {desc:?}"), args, |b, p| {
                desc.emit(b, p)
            })
        }
        MoveOp::DepthToSpace { .. } | MoveOp::SpaceToDepth { .. } => {
            let (in6, perm) = m
                .space_depth_view(&xt.shape)
                .ok_or_else(|| cx.err("NCHW input expected"))?;
            let st = contiguous(&in6);
            let out6: Vec<usize> = perm.iter().map(|&p| in6[p]).collect();
            let src: Vec<i64> = perm.iter().map(|&p| st[p]).collect();
            let desc = CopyDesc::new(elem, &out6, &src, &contiguous(&out6));
            copy_call(cx, prog, desc, cx.operand(x, w)?, cx.arena(y)?)
        }
        MoveOp::ReverseSequence {
            batch_axis,
            time_axis,
        } => {
            let s = &xt.shape;
            let st = contiguous(s);
            let sink = cx.fault_sink(prog, 1, "sequence length")?;
            let desc = ReverseDesc {
                elem,
                len_bytes: index_bytes(1)?,
                batch: s[*batch_axis],
                steps: s[*time_axis],
                batch_stride: st[*batch_axis] as usize,
                time_stride: st[*time_axis] as usize,
                inner: prod(&s[2..]),
                checked: sink.is_some(),
            };
            let mut args = operands(2, w)?;
            args.extend(sink.into_iter().flatten());
            call(cx, prog, format!("reverse {desc:?}"), args, |b, p| {
                desc.emit(b, p)
            })
        }
        MoveOp::Compress { axis, keep } => {
            let (in_shape, maps): (Vec<usize>, Vec<Vec<usize>>) = match axis {
                Some(a) => (
                    xt.shape.clone(),
                    (0..xt.shape.len())
                        .map(|d| {
                            if d == *a {
                                keep.clone()
                            } else {
                                (0..xt.shape[d]).collect()
                            }
                        })
                        .collect(),
                ),
                None => (vec![prod(&xt.shape)], vec![keep.clone()]),
            };
            let (src, dst) = (cx.operand(x, w)?, cx.arena(y)?);
            gather_call(cx, prog, w, elem, &in_shape, &maps, src, dst)
        }
        MoveOp::EyeLike { .. } => {
            let eye = eye_like(m, &xt).ok_or_else(|| cx.err("EyeLike needs a 2-d input"))?;
            let desc = CopyDesc::new(elem, &[prod(&yt.shape)], &[1], &[1]);
            copy_call(
                cx,
                prog,
                desc,
                Operand::Weights(w.tensor(&eye)),
                cx.arena(y)?,
            )
        }
        MoveOp::Col2Im(a) => {
            if !matches!(xt.dtype, DType::F32 | DType::F64) {
                return Err(cx.err(format!("no kernel for Col2Im on {}", xt.dtype.name())));
            }
            let targets = a.targets().ok_or_else(|| cx.err("Col2Im geometry"))?;
            let mut table = Vec::with_capacity(targets.len() * 8);
            for t in &targets {
                let off = t.map_or(-1, |t| (t * elem) as i64);
                table.extend_from_slice(&off.to_le_bytes());
            }
            let desc = Col2ImDesc {
                f64: xt.dtype == DType::F64,
                planes: yt.shape[0] * yt.shape[1],
                per: targets.len(),
                plane: prod(&a.image),
            };
            let args = vec![
                cx.operand(x, w)?,
                Operand::Weights(w.add(&table)),
                cx.arena(y)?,
            ];
            call(cx, prog, format!("col2im {desc:?}"), args, |b, p| {
                desc.emit(b, p)
            })
        }
        MoveOp::Folded { .. } => Err(cx.err(format!(
            "{} should have been computed at compile time (an arenac bug)",
            m.name()
        ))),
    }
}
