//! Lowering of the staged 16-bit nodes (`--activations f16|bf16`,
//! [`crate::analysis::act_type::staged`]): each a [`HostKernel`] over
//! [`crate::gemm::stage16`], called through `arenac_host` with the node's data, its
//! weights-region operands and its planned f32 scratch.

use super::Ctx;
use super::epilogue::fused_activation;
use crate::codegen::host::{HostKernel, SLOTS};
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::gemm::conv::{Activation, ConvParams, prepare_weights, prepared_len};
use crate::gemm::lowp::conv::Layout;
use crate::gemm::pool::pool_params;
use crate::gemm::stage16::split::Shared;
use crate::gemm::stage16::{self, N16, ew};
use crate::ir::types::DType;
use crate::ops::Op;

/// The 16-bit type of node `cx`'s first input when the node is a staged one (first input and
/// first output of the same 16-bit type, op staged); `None` otherwise.
pub(super) fn staged_type(cx: &Ctx<'_>) -> Option<N16> {
    let n = cx.g.node(cx.id);
    let x = cx.ty(*n.inputs.first()?);
    let y = cx.ty(*n.outputs.first()?);
    let t = match x.dtype {
        DType::F16 => N16::F16,
        DType::BF16 => N16::Bf16,
        _ => return None,
    };
    if y.dtype != x.dtype {
        return None;
    }
    let tys: Vec<_> = n.inputs.iter().map(|&v| cx.ty(v)).collect();
    let consts: Vec<bool> = n.inputs.iter().map(|&v| cx.constant(v).is_some()).collect();
    let ew = || {
        tys.iter().all(|x| x.dtype == y.dtype)
            && ew_plan(
                &n.op,
                &tys.iter().map(|x| x.shape.as_slice()).collect::<Vec<_>>(),
                &y.shape,
            )
            .is_some()
    };
    (crate::analysis::act_type::staged(&n.op, &tys, &consts) || ew()).then_some(t)
}

/// The program and each input's broadcast of an element-wise node (Add/Sub/Mul/Div, or a
/// fused program) on 16-bit inputs of shapes `xs` and output shape `y`, when
/// [`stage16::ew`] runs it: the native binary ops of `--activations f16|bf16` (their
/// constants already narrow) and the staged fused ones.
fn ew_plan(op: &Op, xs: &[&[usize]], y: &[usize]) -> Option<(ew::Program, Vec<ew::Bcast>)> {
    let prog = ew::Program::of(op, xs.len())?;
    let bc = xs
        .iter()
        .map(|x| ew::bcast(x, y))
        .collect::<Option<Vec<_>>>()?;
    Some((prog, bc))
}

/// Emits node `cx` (a staged node of type `t`).
pub(super) fn lower(
    cx: &Ctx<'_>,
    t: N16,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    match &n.op {
        Op::Unary(u) => unary(cx, t, *u, prog),
        Op::FusedElementwise(_) | Op::Binary(_) => elementwise(cx, t, prog, w),
        Op::GlobalAveragePool => gap(cx, t, prog),
        Op::MaxPool(a) | Op::AveragePool(a) => {
            let kind = crate::ops::stage16::pool_kind(&n.op)
                .ok_or_else(|| cx.err("internal: not a pooling"))?;
            pool(cx, t, a, kind, prog)
        }
        Op::Conv(a) => conv(cx, t, a, prog, w),
        Op::ConvTranspose(a) => super::convt::conv_transpose16(cx, t, a, prog, w),
        Op::Gemm(_) | Op::MatMul => matmul(cx, t, prog, w),
        Op::Softmax { log, .. } => softmax(cx, t, *log, prog),
        Op::LayerNormalization { epsilon, .. } => layer_norm(cx, t, *epsilon, prog, w),
        op => Err(cx.err(format!(
            "internal: no staged 16-bit kernel for {}",
            op.name()
        ))),
    }
}

/// A Cast between f32 and the 16-bit type of `--activations` (those the retyping adds at
/// graph inputs and outputs and around nodes kept in f32) as one host call of
/// [`stage16::narrow`] / [`stage16::widen`]: AVX-512 or AVX2+F16C loops, round to nearest
/// even (as the typed Cast kernel; `half`'s conversions elsewhere). `Ok(false)`, nothing
/// emitted, for every other node, and for every node of a plan without 16-bit activations.
pub(super) fn cast(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<bool, Error> {
    use crate::analysis::act_type::ActType;
    let n = cx.g.node(cx.id);
    if !matches!(n.op, Op::Cast { .. }) || n.inputs.len() != 1 || n.outputs.len() != 1 {
        return Ok(false);
    }
    let t = match cx.plan.activations.act {
        ActType::F16 => N16::F16,
        ActType::Bf16 => N16::Bf16,
        ActType::F32 => return Ok(false),
    };
    let (x, y) = (cx.input(0)?, cx.output()?);
    let (xt, yt) = (cx.ty(x), cx.ty(y));
    let want = |d: DType| match t {
        N16::F16 => d == DType::F16,
        N16::Bf16 => d == DType::BF16,
    };
    let to16 = match (xt.dtype, yt.dtype) {
        (DType::F32, d) if want(d) => true,
        (d, DType::F32) if want(d) => false,
        _ => return Ok(false),
    };
    let len = yt.numel().unwrap_or(0);
    if cx.constant(x).is_some() || xt.numel() != Some(len) {
        return Ok(false);
    }
    let kernel = HostKernel::new(move |p| {
        let (xs, ys) = (Shared(p[0]), Shared(p[1]));
        let cost = crate::par::cost::elems_ns(len);
        // Pieces of whole vectors: each value converted alone (the same bits however cut).
        let slots = crate::par::threads();
        stage16::split::for_pieces(len, 64, slots, cost, |e0, e1, _| {
            let (x, y, n) = (xs.get(), ys.get(), e1 - e0);
            // SAFETY: `arenac_host`'s contract: X holds `len` values of the source type, Y
            // `len` of the target type, apart (a Cast's output is not planned over its
            // input: the element sizes differ); values `e0..e1` are this piece's alone.
            unsafe {
                if to16 {
                    let src = crate::codegen::host::input::<f32>(x.cast::<f32>().add(e0).cast(), n);
                    let dst =
                        crate::codegen::host::output::<u16>(y.cast::<u16>().add(e0).cast(), n);
                    stage16::narrow(t, src, dst);
                } else {
                    let src = crate::codegen::host::input::<u16>(x.cast::<u16>().add(e0).cast(), n);
                    let dst =
                        crate::codegen::host::output::<f32>(y.cast::<f32>().add(e0).cast(), n);
                    stage16::widen(t, src, dst);
                }
            }
        });
    });
    let src = cx.operand(x, w)?;
    host_call(cx, prog, kernel, vec![src, cx.arena(y)?])?;
    Ok(true)
}

/// A Where on f16/bf16 values (`a`, `b` and the output of one 16-bit type, a Bool
/// condition), each operand broadcasting as one block of dims, as one host call of
/// [`ew::select::select`]: the typed kernel's raw-bit select, vectorized. `Ok(false)`,
/// nothing emitted, for every other node.
pub(super) fn select(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<bool, Error> {
    let n = cx.g.node(cx.id);
    if !matches!(n.op, Op::Where) || n.inputs.len() != 3 || n.outputs.len() != 1 {
        return Ok(false);
    }
    let y = cx.output()?;
    let (yd, ys) = (cx.ty(y).dtype, cx.ty(y).shape.clone());
    let ds: Vec<DType> = n.inputs.iter().map(|&v| cx.ty(v).dtype).collect();
    if !matches!(yd, DType::F16 | DType::BF16) || ds != [DType::Bool, yd, yd] {
        return Ok(false);
    }
    let Some(bc) = n
        .inputs
        .iter()
        .map(|&v| ew::bcast(&cx.ty(v).shape, &ys))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(false);
    };
    let [cb, ab, bb] = [bc[0], bc[1], bc[2]];
    let len = cx.ty(y).numel().unwrap_or(0);
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: each operand holds its broadcast read's `count`
        // elements (the condition one byte each), Y `len`; Y planned in place only over a
        // full operand (the element-wise rule).
        unsafe {
            ew::select::select(
                (p[0].cast::<u8>(), cb),
                (p[1].cast::<u16>(), ab),
                (p[2].cast::<u16>(), bb),
                len,
                p[3].cast::<u16>(),
            )
        };
    });
    let mut args = Vec::new();
    for &v in &n.inputs {
        args.push(cx.operand(v, w)?);
    }
    args.push(cx.arena(y)?);
    host_call(cx, prog, kernel, args)?;
    Ok(true)
}

/// Emits one host call of `kernel` with `args` (at most [`SLOTS`]).
pub(super) fn host_call(
    cx: &Ctx<'_>,
    prog: &mut Program,
    kernel: HostKernel,
    args: Vec<Operand>,
) -> Result<(), Error> {
    let mut all = vec![prog.keep(Box::new(kernel))];
    all.extend(args);
    all.resize(SLOTS + 1, Operand::Null);
    let (node, op) = cx.label();
    let f = prog.kernel("host".to_string(), SLOTS + 1, (&node, &op), |b, p, ext| {
        cranelift_codegen::ir::InstBuilder::call(b.ins(), ext.host, p);
    })?;
    prog.call(f, all);
    Ok(())
}

fn unary(cx: &Ctx<'_>, t: N16, u: crate::ops::UnaryOp, prog: &mut Program) -> Result<(), Error> {
    let (x, y) = (cx.input(0)?, cx.output()?);
    let len = cx.ty(y).numel().unwrap_or(0);
    let kernel = HostKernel::new(move |p| {
        let f = |v: &mut [f32]| crate::ops::stage16::unary_f32(u, v);
        // SAFETY: `arenac_host`'s contract: X and Y planned for `len` values (equal when
        // planned in place, which `unary` allows).
        unsafe { stage16::unary(t, len, p[0].cast::<u16>(), p[1].cast::<u16>(), &f) };
    });
    host_call(cx, prog, kernel, vec![cx.arena(x)?, cx.arena(y)?])
}

fn elementwise(
    cx: &Ctx<'_>,
    t: N16,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let (program, bc) = node_ew_plan(cx)
        .ok_or_else(|| cx.err("internal: a 16-bit element-wise node of another form"))?;
    ew_host(cx, t, program, bc, prog, w)
}

/// [`ew_plan`] of element-wise node `cx`'s input and output shapes.
pub(super) fn node_ew_plan(cx: &Ctx<'_>) -> Option<(ew::Program, Vec<ew::Bcast>)> {
    let n = cx.g.node(cx.id);
    let ys = cx.ty(cx.output().ok()?).shape.clone();
    let xs: Vec<&[usize]> = n
        .inputs
        .iter()
        .map(|&v| cx.ty(v).shape.as_slice())
        .collect();
    ew_plan(&n.op, &xs, &ys)
}

/// Emits element-wise node `cx` as a host call of [`ew::run`] of `program` on data stored
/// as `t` (16-bit, or f32 for the f32 lowering's native programs), input `i` read through
/// `bc[i]`.
pub(super) fn ew_host<S: ew::Store + 'static>(
    cx: &Ctx<'_>,
    t: S,
    program: ew::Program,
    bc: Vec<ew::Bcast>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let n = cx.g.node(cx.id);
    let y = cx.output()?;
    let len = cx.ty(y).numel().unwrap_or(0);
    let k = bc.len();
    let kernel = HostKernel::new(move |p| {
        let mut xs = [std::ptr::null::<S::E>(); ew::MAX_INPUTS];
        for (x, q) in xs.iter_mut().zip(&p[..k]) {
            *x = q.cast::<S::E>();
        }
        // SAFETY: `arenac_host`'s contract: input `i` holds `bc[i].count` values (its
        // broadcast read of the output's shape), Y `len`; Y planned in place only over a
        // full input (the binary ops' rule).
        unsafe { ew::run(t, &program, &xs[..k], &bc, len, p[k].cast::<S::E>()) };
    });
    let mut args = Vec::new();
    for &v in &n.inputs {
        args.push(cx.operand(v, w)?);
    }
    args.push(cx.arena(y)?);
    host_call(cx, prog, kernel, args)
}

fn gap(cx: &Ctx<'_>, t: N16, prog: &mut Program) -> Result<(), Error> {
    let (x, y) = (cx.input(0)?, cx.output()?);
    let xs = cx.ty(x).shape.clone();
    let planes = xs.iter().take(2).product::<usize>();
    let len = xs.iter().skip(2).product::<usize>();
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: X holds `planes * len` values, Y `planes`, apart.
        let (xv, yv) = unsafe {
            (
                crate::codegen::host::input::<u16>(p[0], planes * len),
                crate::codegen::host::output::<u16>(p[1], planes),
            )
        };
        stage16::gap(t, planes, len, xv, yv);
    });
    host_call(cx, prog, kernel, vec![cx.arena(x)?, cx.arena(y)?])
}

fn pool(
    cx: &Ctx<'_>,
    t: N16,
    a: &crate::ops::PoolAttrs,
    kind: u64,
    prog: &mut Program,
) -> Result<(), Error> {
    let (x, y) = (cx.input(0)?, cx.output()?);
    let (xs, ys) = (&cx.ty(x).shape, &cx.ty(y).shape);
    let mut params = pool_params(xs, ys, &a.kernel, &a.strides, &a.dilations, &a.pads)
        .ok_or_else(|| cx.err("internal: a staged pooling without a 2-d geometry"))?;
    params.kind = kind;
    let (xo, yo, so) = (cx.arena(x)?, cx.arena(y)?, cx.scratch()?);
    if xo == yo && !stage16::pool::in_place_ok(&params) {
        return Err(cx.err(
            "internal: a staged pooling planned in place where it cannot be (a planner bug)",
        ));
    }
    check_scratch(cx, stage16::pool::scratch_bytes(&params))?;
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: X, Y and the scratch planned for this geometry
        // (scratch checked against `scratch_bytes` at compile time), Y apart from X.
        unsafe {
            stage16::pool::pool(
                t,
                &params,
                p[0].cast::<u16>(),
                p[1].cast::<u16>(),
                p[2].cast::<f32>(),
            )
        };
    });
    host_call(cx, prog, kernel, vec![xo, yo, so])
}

/// Errors unless the planned scratch holds `need` bytes.
fn check_scratch(cx: &Ctx<'_>, need: usize) -> Result<(), Error> {
    let planned = super::dense::planned_scratch(cx);
    if planned < need {
        return Err(cx.err(format!(
            "internal: the staged 16-bit kernel needs {need} bytes of scratch, {planned} \
             planned (a planner bug)"
        )));
    }
    Ok(())
}

fn conv(
    cx: &Ctx<'_>,
    t: N16,
    a: &crate::ops::ConvAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let (xv, wv, y) = (cx.input(0)?, cx.input(1)?, cx.output()?);
    let (xs, ys) = (cx.ty(xv).shape.clone(), cx.ty(y).shape.clone());
    if a.sum {
        // A fused residual (input 3): only where the fusion rule allowed it, and it must be
        // in the output's buffer when the kernel starts (`stage16::conv::residual`).
        let c = xs.get(1).copied().unwrap_or(0);
        if xs.len() != 4 || !stage16::conv::residual_ok(c, a.group.max(1)) {
            return Err(cx.err("internal: a fused residual on a 16-bit Conv without one"));
        }
        super::dense::residual_into(cx, prog, y)?;
    }
    let bias = cx.g.node(cx.id).inputs.get(2).copied();
    let act = fused_activation(cx.g, cx.plan, cx.id).map_or(Activation::None, |f| f.act);
    let mut params = ConvParams::from_shapes(
        &xs,
        &ys,
        &a.kernel,
        &a.strides,
        &a.dilations,
        &a.pads,
        a.group.max(1),
    )
    .ok_or_else(|| cx.err("internal: a staged Conv without a 1-d or 2-d geometry"))?;
    params.has_bias = u64::from(bias.is_some());
    params.threads = cx.threads() as u64;
    [params.act, params.act_a, params.act_b] = act.encode();
    let wt = cx
        .constant(wv)
        .ok_or_else(|| cx.err("internal: a staged Conv with run-time weights"))?;
    // Marked for Winograd bands as the planner marked it (weights precomputed, or
    // transformed once per run).
    let o = cx.plan.options.liveness;
    let pre = crate::analysis::liveness::winograd::precomputed(cx.g, &o);
    if let Some(mp) = crate::analysis::liveness::winograd::staged_marked(cx.g, cx.id, &o, &pre) {
        params.packed_a = mp.packed_a;
    }
    // The staging budget the planner chose, read back from the scratch it planned.
    let f32_weights = !w.storage().is_reduced();
    let (marked, budget) = stage16::conv::config_for_scratch_for(
        &params,
        super::dense::planned_scratch(cx),
        f32_weights,
    );
    params = marked;
    let mut wp = stage16::conv::weights_params(&params, budget);
    let st = w.storage();
    let wino = stage16::conv::wino_bands(&params, budget).is_some();
    let planned = super::dense::planned_scratch(cx);
    let direct = stage16::conv::reduced_direct(&params, budget, st.code(), planned);
    // Pointwise runs or bands on the small-plane kernel (the layout f32 weights take for
    // them) read reduced weights in its own layout, where that takes the bytes predicted
    // for the node (`conv_lowp_bytes`: bands of a plane the kernel does not take whole may
    // need more when the channels are no multiple of 16).
    let pw_small = st.is_reduced()
        && !wino
        && crate::gemm::lowp::conv::is_pw_small(&wp)
        && crate::gemm::lowp::conv::region_bytes(&wp, st, Layout::PwSmall)
            == crate::gemm::lowp::conv_lowp_bytes(&params, st)
        && stage16::conv::scratch_bytes_at(
            &ConvParams {
                wtype: st.code(),
                ..params
            },
            budget,
        ) == stage16::conv::scratch_bytes_at(&params, budget);
    let woff = if wino && wp.packed_a == crate::gemm::winograd::WINOGRAD_PACKED {
        // Winograd bands on weights transformed once per run: the OIHW weights, f32 or
        // stored reduced (widened by the transform into the scratch's head at every run).
        if st.is_reduced() {
            params.wtype = st.code();
            let op = super::dense::reduced_conv_weights(cx, w, wt, &params, Layout::Oihw);
            weights_offset(cx, op)?
        } else {
            w.tensor_f32(wt)
        }
    } else if pw_small {
        // The small-plane pointwise kernel's runs or bands, widening its panels' rows in
        // registers.
        params.wtype = st.code();
        wp.wtype = st.code();
        let op = super::dense::reduced_conv_weights(cx, w, wt, &wp, Layout::PwSmall);
        weights_offset(cx, op)?
    } else if let Some(q) = direct {
        // The direct kernels' bands, reading the reduced weights in their layout (a block
        // of output channels widened per task into the band's scratch slots).
        params = q;
        wp = stage16::conv::band_weights_params(&params, budget);
        wp.wtype = q.wtype;
        let op = super::dense::reduced_conv_weights(cx, w, wt, &wp, Layout::Direct);
        weights_offset(cx, op)?
    } else if wino {
        // Winograd bands: the 36 transformed matrices, as the f32 lowering precomputes them.
        if st.is_reduced() {
            return Err(cx.err(format!(
                "internal: Winograd's precomputed weights planned with --weights {}",
                st.name()
            )));
        }
        let form = format!(
            "winograd U m={} c={} kernel={}",
            wp.m,
            wp.c,
            crate::gemm::selected_kernel().name
        );
        let mut ok = true;
        let off = w.form_f32_of(
            wt,
            form,
            crate::gemm::winograd::weights_floats(&wp),
            |src, out| {
                ok = crate::gemm::winograd::transform_weights(&wp, src, out);
            },
        );
        if !ok {
            return Err(cx.err(format!(
                "internal: Conv weights of {} floats, {} x {} x 3 x 3 expected",
                wt.numel(),
                wp.m,
                wp.c
            )));
        }
        off
    } else if crate::gemm::lowp::mark_conv(&mut wp, st) {
        // `--weights` reduced: stored packed in that type, every band reads them widened
        // (the staged bands run the GEMM path, as the f32 lowering of reduced weights does).
        w.reduced_nodes.insert(cx.id);
        reduced_conv_weights(w, wt, &wp, st)
    } else {
        let form = format!(
            "conv weights {} (16-bit staged)",
            crate::gemm::conv::packing_name(&wp)
        );
        w.form_f32_of(wt, form, prepared_len(&wp), |src, out| {
            prepare_weights(&mut wp.clone(), src, out);
        })
    };
    params.packed_a = wp.packed_a;
    params.accumulate = u64::from(a.sum);
    if a.sum && (stage16::conv::row_direct(&params) || !stage16::conv::fused(&params)) {
        return Err(
            cx.err("internal: a fused residual on a 16-bit Conv whose path does not add it")
        );
    }
    if stage16::conv::pw_direct(&params) && !crate::gemm::lowp::conv::is_pw_small(&params) {
        // The unstaged 16-bit pointwise kernel reads only its own panels (planned without
        // scratch: no staged fallback).
        return Err(cx.err(
            "internal: a 16-bit pointwise Conv planned unstaged with weights in another layout",
        ));
    }
    if stage16::conv::pw_big_direct(&params)
        && params.packed_a != 1
        && crate::gemm::lowp::conv_weight_type(&params).is_none()
    {
        // The unstaged GEMM-path kernel reads the core's packed weights (f32 or reduced).
        return Err(cx.err(
            "internal: a 16-bit pointwise Conv planned unstaged with weights in another layout",
        ));
    }
    let bias_op = match bias {
        Some(bv) => match cx.constant(bv) {
            Some(bt) if bt.dtype() == DType::F32 => Operand::Weights(w.tensor_f32(bt)),
            _ => return Err(cx.err("internal: a staged Conv with a run-time or non-f32 bias")),
        },
        None => Operand::Null,
    };
    check_scratch(cx, stage16::conv::scratch_bytes_at(&params, budget))?;
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: X, Y, the prepared weights and bias (weights
        // region) and the scratch (checked at compile time) planned for this geometry.
        unsafe {
            stage16::conv::conv(
                t,
                &params,
                budget,
                p[0].cast::<u16>(),
                p[1].cast::<f32>(),
                p[2].cast::<f32>(),
                p[3].cast::<u16>(),
                p[4].cast::<f32>(),
            )
        };
    });
    host_call(
        cx,
        prog,
        kernel,
        vec![
            cx.arena(xv)?,
            Operand::Weights(woff),
            bias_op,
            cx.arena(y)?,
            cx.scratch()?,
        ],
    )
}

/// The weights-region offset of `op`.
fn weights_offset(cx: &Ctx<'_>, op: Operand) -> Result<usize, Error> {
    match op {
        Operand::Weights(off) => Ok(off),
        _ => Err(cx.err("internal: staged Conv weights outside the weights region")),
    }
}

/// A staged Conv's constant weights packed in the reduced type `st` ([`crate::gemm::lowp`]'s
/// conv layout for `wp`), read from the source tensor (its pages released as rows are
/// packed, as the f32 lowering does).
fn reduced_conv_weights(
    w: &mut WeightsBuilder,
    wt: &crate::ir::tensor::Tensor,
    wp: &ConvParams,
    st: crate::gemm::lowp::WeightType,
) -> usize {
    use crate::gemm::lowp::{conv_lowp_bytes, pack_conv_lowp};
    let form = format!(
        "conv weights m={} k={} group={} as {} (16-bit staged)",
        wp.m,
        wp.k(),
        wp.group,
        st.name()
    );
    let p = *wp;
    let bytes = conv_lowp_bytes(&p, st);
    super::dense::pack_reduced(w, wt, form, bytes, |read, out, done| {
        pack_conv_lowp(&p, st, read, out, done);
    })
}

/// The shapes and constant flags of node `cx`'s inputs.
fn operands(cx: &Ctx<'_>) -> (Vec<Vec<usize>>, Vec<bool>) {
    let n = cx.g.node(cx.id);
    (
        n.inputs.iter().map(|&v| cx.ty(v).shape.clone()).collect(),
        n.inputs.iter().map(|&v| cx.constant(v).is_some()).collect(),
    )
}

fn matmul(cx: &Ctx<'_>, t: N16, prog: &mut Program, w: &mut WeightsBuilder) -> Result<(), Error> {
    let (shapes, consts) = operands(cx);
    let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let op = &cx.g.node(cx.id).op;
    let s = crate::ops::stage16::mm_stage(op, &refs, &consts, cx.threads())
        .ok_or_else(|| cx.err("internal: a staged Gemm/MatMul of another geometry"))?;
    let (av, bv, y) = (cx.input(0)?, cx.input(1)?, cx.output()?);
    let (k, n) = (s.k, s.n);
    let (alpha, beta, trans_b) = match op {
        Op::Gemm(g) => (g.alpha, g.beta, g.trans_b),
        _ => (1.0, 1.0, false),
    };
    let (b_op, packed_op) = if s.runtime_b {
        (cx.arena(bv)?, Operand::Null)
    } else {
        let bt = cx
            .constant(bv)
            .ok_or_else(|| cx.err("internal: a staged product without its constant B"))?;
        let (rs, cs) = if trans_b { (1, k) } else { (n, 1) };
        let st = w.storage();
        let off = if st.is_reduced() {
            // `--weights` reduced: packed in that type, widened panel by panel in the product.
            let form = format!(
                "packed B {k}x{n} alpha={alpha} as {} (16-bit staged)",
                st.name()
            );
            super::dense::packed_b_weights(cx, w, bt, (k, n), (0, rs, cs), alpha, form)
        } else {
            let form = format!("packed B {k}x{n} alpha={alpha} trans_b={trans_b} (16-bit staged)");
            w.form_f32_of(bt, form, crate::gemm::packed_b_len(k, n), |src, out| {
                crate::gemm::pack_b_from(
                    k,
                    n,
                    |i| src.get(i).copied().unwrap_or(0.0) * alpha,
                    rs,
                    cs,
                    out,
                );
            })
        };
        (Operand::Null, Operand::Weights(off))
    };
    let b_type = if s.runtime_b { 0 } else { w.storage().code() };
    let bias_op = match cx.g.node(cx.id).inputs.get(2) {
        Some(&cv) => {
            let ct = cx
                .constant(cv)
                .ok_or_else(|| cx.err("internal: a staged Gemm with a run-time C"))?;
            let c: Vec<f64> = ct.to_f64_vec();
            let row: Vec<u8> = (0..n)
                .map(|j| {
                    (c.get(if c.len() == 1 { 0 } else { j })
                        .copied()
                        .unwrap_or(0.0)
                        * f64::from(beta)) as f32
                })
                .flat_map(f32::to_ne_bytes)
                .collect();
            Operand::Weights(w.add(&row))
        }
        None => Operand::Null,
    };
    // The block the planner chose, read back from the scratch it planned.
    let block = s.block_for_scratch(super::dense::planned_scratch(cx));
    check_scratch(cx, s.scratch_bytes_at(block))?;
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: A, B (run-time) or packed B and the bias row
        // (weights region), Y and the scratch (checked at compile time) for this geometry.
        unsafe {
            stage16::matmul::matmul(
                t,
                &s,
                b_type,
                block,
                p[0].cast::<u16>(),
                p[1].cast::<u16>(),
                p[2].cast::<f32>(),
                p[3].cast::<f32>(),
                p[4].cast::<u16>(),
                p[5].cast::<f32>(),
            )
        };
    });
    let args = vec![
        cx.arena(av)?,
        b_op,
        packed_op,
        bias_op,
        cx.arena(y)?,
        cx.scratch()?,
    ];
    host_call(cx, prog, kernel, args)
}

fn softmax(cx: &Ctx<'_>, t: N16, log: bool, prog: &mut Program) -> Result<(), Error> {
    let (shapes, consts) = operands(cx);
    let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let (rows, len) = crate::ops::stage16::row_stage(&cx.g.node(cx.id).op, &refs, &consts)
        .ok_or_else(|| cx.err("internal: a staged Softmax over a non-last axis"))?;
    let threads = cx.threads();
    check_scratch(cx, stage16::rows::scratch_bytes(rows, len, threads))?;
    let (x, y) = (cx.input(0)?, cx.output()?);
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: X, Y (equal or apart) and the rows' scratch
        // (checked at compile time).
        unsafe {
            stage16::rows::softmax(
                t,
                rows,
                len,
                log,
                threads,
                p[0].cast::<u16>(),
                p[1].cast::<u16>(),
                p[2].cast::<f32>(),
            )
        };
    });
    host_call(
        cx,
        prog,
        kernel,
        vec![cx.arena(x)?, cx.arena(y)?, cx.scratch()?],
    )
}

fn layer_norm(
    cx: &Ctx<'_>,
    t: N16,
    eps: f32,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let (shapes, consts) = operands(cx);
    let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let (rows, len) = crate::ops::stage16::row_stage(&cx.g.node(cx.id).op, &refs, &consts)
        .ok_or_else(|| cx.err("internal: a staged LayerNormalization of another form"))?;
    let threads = cx.threads();
    check_scratch(cx, stage16::rows::scratch_bytes(rows, len, threads))?;
    let n = cx.g.node(cx.id);
    let mut params = Vec::new();
    for i in 1..3 {
        params.push(match n.inputs.get(i) {
            Some(&v) => {
                let c = cx
                    .constant(v)
                    .ok_or_else(|| cx.err("internal: run-time LayerNormalization parameters"))?;
                Operand::Weights(w.tensor_f32(c))
            }
            None => Operand::Null,
        });
    }
    let (x, y) = (cx.input(0)?, cx.output()?);
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: X, Y (equal or apart), scale and bias rows of
        // `len` floats (bias may be null) and the rows' scratch (checked at compile time).
        unsafe {
            stage16::rows::layer_norm(
                t,
                rows,
                len,
                eps,
                threads,
                p[2].cast::<f32>(),
                p[3].cast::<f32>(),
                p[0].cast::<u16>(),
                p[1].cast::<u16>(),
                p[4].cast::<f32>(),
            )
        };
    });
    let mut args = vec![cx.arena(x)?, cx.arena(y)?];
    args.extend(params);
    args.push(cx.scratch()?);
    host_call(cx, prog, kernel, args)
}
