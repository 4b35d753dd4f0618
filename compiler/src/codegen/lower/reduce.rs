//! The reduction family: Reduce* (f32 Sum/Mean/Max/Min on the f32 kernel, the rest on the
//! typed one), ArgMax/ArgMin, Hardmax, CumSum/CumProd, TopK, LpNormalization.

use cranelift_codegen::ir::Value;
use cranelift_frontend::FunctionBuilder;

use super::{Ctx, prod};
use crate::codegen::kernels::arg::{ArgDesc, TopKDesc};
use crate::codegen::kernels::lppool::LpPoolDesc;
use crate::codegen::kernels::reduce::ReduceDesc;
use crate::codegen::kernels::reduce_any::{AnyReduceDesc, Dom};
use crate::codegen::kernels::scan::{CumDesc, LpNormDesc};
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::ir::types::DType;
use crate::ops::reduce::arg::split3;
use crate::ops::{Op, ReduceKind};

/// Emits the calls of a reduction-family node.
pub(super) fn lower(cx: &Ctx<'_>, prog: &mut Program, w: &mut WeightsBuilder) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let x = cx.input(0)?;
    let xt = cx.ty(x).clone();
    if Dom::of(xt.dtype).is_none() {
        return Err(cx.err(format!(
            "no kernel for {} on {} yet",
            n.op.name(),
            xt.dtype.name()
        )));
    }
    let xo = cx.operand(x, w)?;
    let y = cx.output()?;
    let yo = cx.arena(y)?;
    let (node, opn) = cx.label();
    let label = (node.as_str(), opn.as_str());
    let two =
        |prog: &mut Program, key: String, emit: &dyn Fn(&mut FunctionBuilder<'_>, &[Value])| {
            call2(prog, key, label, vec![xo, yo], emit)
        };
    match &n.op {
        Op::Reduce(a) => {
            let f32_kernel = xt.dtype == DType::F32
                && matches!(
                    a.kind,
                    ReduceKind::Sum | ReduceKind::Mean | ReduceKind::Max | ReduceKind::Min
                );
            if f32_kernel {
                let desc = ReduceDesc::new(a.kind, &xt.shape, &a.axes);
                two(prog, format!("reduce {desc:?}"), &|b, p| {
                    desc.emit(b, p[0], p[1])
                })
            } else {
                let desc = AnyReduceDesc::new(a.kind, xt.dtype, &xt.shape, &a.axes);
                if let Some(why) = desc.unsupported() {
                    return Err(cx.err(why));
                }
                two(prog, format!("reduce any {desc:?}"), &|b, p| {
                    desc.emit(b, p[0], p[1])
                })
            }
        }
        Op::ArgReduce(a) => {
            let (outer, len, inner) = split3(&xt.shape, a.axis, false);
            let desc = ArgDesc {
                dtype: xt.dtype,
                outer,
                len,
                inner,
                max: a.max,
                last: a.last,
                hardmax: false,
            };
            two(prog, format!("arg {desc:?}"), &|b, p| {
                desc.emit(b, p[0], p[1])
            })
        }
        Op::Hardmax { axis, coerce_2d } => {
            let (outer, len, inner) = split3(&xt.shape, *axis, *coerce_2d);
            let desc = ArgDesc {
                dtype: xt.dtype,
                outer,
                len,
                inner,
                max: true,
                last: false,
                hardmax: true,
            };
            two(prog, format!("arg {desc:?}"), &|b, p| {
                desc.emit(b, p[0], p[1])
            })
        }
        Op::CumScan(a) => {
            let (outer, len, inner) = split3(&xt.shape, a.axis, false);
            let desc = CumDesc {
                dtype: xt.dtype,
                outer,
                len,
                inner,
                prod: a.prod,
                exclusive: a.exclusive,
                reverse: a.reverse,
            };
            two(prog, format!("cum {desc:?}"), &|b, p| {
                desc.emit(b, p[0], p[1])
            })
        }
        Op::LpNormalization { axis, p } => {
            let (outer, len, inner) = split3(&xt.shape, *axis, false);
            let desc = LpNormDesc {
                dtype: xt.dtype,
                outer,
                len,
                inner,
                p: *p,
            };
            two(prog, format!("lpnorm {desc:?}"), &|b, q| {
                desc.emit(b, q[0], q[1])
            })
        }
        Op::LpPool(a) => {
            let yt = cx.ty(y);
            let (pool, sp) = (&a.pool, xt.shape.get(2..).unwrap_or_default());
            let desc = LpPoolDesc {
                dtype: xt.dtype,
                planes: prod(xt.shape.get(..2).unwrap_or_default()),
                input: sp.to_vec(),
                output: yt.shape.get(2..).unwrap_or_default().to_vec(),
                kernel: pool.kernel.clone(),
                strides: pool.strides.clone(),
                dilations: pool.dilations.clone(),
                pads: pool
                    .pads
                    .get(..pool.kernel.len())
                    .unwrap_or_default()
                    .to_vec(),
                p: a.p,
            };
            two(prog, format!("lppool {desc:?}"), &|b, q| {
                desc.emit(b, q[0], q[1])
            })
        }
        Op::TopK(a) => {
            let (outer, len, inner) = split3(&xt.shape, a.axis, false);
            let desc = TopKDesc {
                dtype: xt.dtype,
                outer,
                len,
                inner,
                k: a.k,
                largest: a.largest,
            };
            let yi = n
                .outputs
                .get(1)
                .copied()
                .ok_or_else(|| cx.err("TopK needs its indices output"))?;
            let yio = cx.arena(yi)?;
            let f = prog.kernel(format!("topk {desc:?}"), 3, label, |b, p, _| {
                desc.emit(b, p[0], p[1], p[2])
            })?;
            prog.call(f, vec![xo, yo, yio]);
            Ok(())
        }
        op => Err(cx.err(format!("no kernel for {} here", op.name()))),
    }
}

/// Compiles (or reuses) a kernel of two pointers and calls it with `args`.
fn call2(
    prog: &mut Program,
    key: String,
    label: (&str, &str),
    args: Vec<Operand>,
    emit: &dyn Fn(&mut FunctionBuilder<'_>, &[Value]),
) -> Result<(), Error> {
    let f = prog.kernel(key, 2, label, |b, p, _| emit(b, p))?;
    prog.call(f, args);
    Ok(())
}
