//! Lowering of the data-movement ops: copies, slices, concat/split, gather.

use super::Ctx;
use crate::codegen::kernels::movement::CopyDesc;
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::ops::Op;

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
            copy_call(cx, prog, desc, from, cx.arena(y)?)
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
        _ => Err(cx.err(format!("no kernel for {} yet", n.op.name()))),
    }
}
