//! Lowering of the dense ops: Gemm, MatMul (calls into the GEMM core), pooling and Conv (with
//! an activation fused into its epilogue where the plan allows).

use super::epilogue::fused_activation;
use super::{Ctx, ew_call, prod};
use crate::codegen::kernels::conv::{PoolDesc, Window};
use crate::codegen::kernels::elementwise::{Ew, EwDesc};
use crate::codegen::kernels::matmul::MatMulDesc;
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::gemm::conv::{Activation, ConvParams};
use crate::gemm::lowp::conv::{Layout, direct_scratch_bytes};
use crate::gemm::lowp::{lowp_b_bytes, pack_b_lowp};
use crate::gemm::{pack_b, pack_b_le, packed_b_len};
use crate::ir::graph::ValueId;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};

pub(super) fn mm_call(
    cx: &Ctx<'_>,
    prog: &mut Program,
    desc: MatMulDesc,
    args: Vec<Operand>,
) -> Result<(), Error> {
    let (node, op) = cx.label();
    let f = prog.kernel(format!("mm {desc:?}"), 4, (&node, &op), |b, p, ext| {
        desc.emit(b, p, ext)
    })?;
    prog.call(f, args);
    Ok(())
}

pub(super) fn layout(cx: &Ctx<'_>) -> [usize; 3] {
    let n = cx.g.node(cx.id);
    let tys: Vec<TensorType> = n.inputs.iter().map(|&v| cx.ty(v).clone()).collect();
    let consts: Vec<bool> = n.inputs.iter().map(|&v| cx.constant(v).is_some()).collect();
    n.op.matmul_scratch_layout(&tys, &consts, cx.threads()).0
}

pub(super) fn gemm(
    cx: &Ctx<'_>,
    a: &crate::ops::GemmAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    cx.all_f32()?;
    let (av, bv, y) = (cx.input(0)?, cx.input(1)?, cx.output()?);
    let (sa, sb) = (&cx.ty(av).shape, &cx.ty(bv).shape);
    if sa.len() != 2 || sb.len() != 2 {
        return Err(cx.err("Gemm operands must be 2-d"));
    }
    let (m, k) = if a.trans_a {
        (sa[1], sa[0])
    } else {
        (sa[0], sa[1])
    };
    let n = if a.trans_b { sb[0] } else { sb[1] };
    let (rs, cs) = if a.trans_b { (1, k) } else { (n, 1) };
    let (a_op, a_transposed) = match cx.constant(av) {
        Some(t) if a.trans_a => {
            let off = w.form_f32_of(t, format!("transposed {k}x{m}"), m * k, |v, tr| {
                for i in 0..m {
                    for p in 0..k {
                        tr[i * k + p] = v[p * m + i];
                    }
                }
            });
            (Operand::Weights(off), false)
        }
        _ => (cx.operand(av, w)?, a.trans_a),
    };
    let (b_op, b_packed, b_type) = match cx.constant(bv) {
        Some(t) => {
            // Packed straight into the weights region, from the weight's bytes when it is
            // f32 (often the mapped file): no intermediate copy of a large matrix. Stored
            // once per weight and packing (layers sharing a weight share it).
            let st = w.storage();
            let form = format!(
                "packed B {k}x{n} rs={rs} cs={cs} alpha={:#x} as {}",
                a.alpha.to_bits(),
                st.name()
            );
            let off = packed_b_weights(cx, w, t, (k, n), (0, rs, cs), a.alpha, form);
            (Operand::Weights(off), true, st.code())
        }
        None => (cx.arena(bv)?, false, 0),
    };
    let out = cx.arena(y)?;
    // A runtime B cannot carry alpha: the product goes to Y alone, then Y = alpha * Y and
    // Y += beta * C (element-wise, in place).
    let scale_after = a.alpha != 1.0 && !b_packed;
    let mut accumulate = false;
    if let Some(&cv) = cx.g.node(cx.id).inputs.get(2)
        && a.beta != 0.0
        && !scale_after
    {
        let cshape = cx.ty(cv).shape.clone();
        let (e, c_op) = match cx.constant(cv) {
            Some(t) if a.beta == 1.0 => (Ew::Copy, Operand::Weights(w.tensor_f32(t))),
            Some(t) => {
                let form = format!("scaled by {:#x}", a.beta.to_bits());
                let off = w.form_f32(&[t], form, t.numel(), |dst| {
                    t.write_f32s(dst);
                    dst.iter_mut().for_each(|x| *x *= a.beta);
                });
                (Ew::Copy, Operand::Weights(off))
            }
            None => (
                if a.beta == 1.0 {
                    Ew::Copy
                } else {
                    Ew::Scale(a.beta)
                },
                cx.arena(cv)?,
            ),
        };
        let desc = EwDesc::new(e, &[&cshape], &[m, n]);
        ew_call(cx, prog, w, desc, vec![c_op], out)?;
        accumulate = true;
    }
    let desc = MatMulDesc {
        m,
        n,
        k,
        batch: vec![],
        a_stride: vec![],
        b_stride: vec![],
        c_stride: vec![],
        b_packed,
        b_type,
        b_rs: rs,
        b_cs: cs,
        a_transposed,
        accumulate,
        scratch: layout(cx),
        threads: cx.threads(),
    };
    mm_call(cx, prog, desc, vec![a_op, b_op, out, cx.scratch()?])?;
    if scale_after {
        let desc = EwDesc::new(Ew::Scale(a.alpha), &[&[m, n]], &[m, n]);
        ew_call(cx, prog, w, desc, vec![out], out)?;
        if let Some(&cv) = cx.g.node(cx.id).inputs.get(2)
            && a.beta != 0.0
        {
            let cshape = cx.ty(cv).shape.clone();
            let beta = Operand::Weights(w.f32s(&[a.beta]));
            let desc = EwDesc::new(Ew::MulAdd, &[&cshape, &[1], &[m, n]], &[m, n]);
            let c_op = cx.operand(cv, w)?;
            ew_call(cx, prog, w, desc, vec![c_op, beta, out], out)?;
        }
    }
    Ok(())
}

/// The weights offset of the `k x n` matrix at element `start` of constant `t` (strides `rs`,
/// `cs`) packed for the GEMM core, times `alpha`, in the builder's storage type ([`pack_b`]'s
/// layout, or [`pack_b_lowp`]'s for a reduced type): straight from the weight's bytes when it
/// is f32 (often the mapped file, at any alignment), another dtype through a converted copy.
/// A large f32 source is packed in its storage order and its pages released as they are
/// consumed (the compile-time peak holds one panel or a few rows of it, not the matrix).
pub(super) fn packed_b_weights(
    cx: &Ctx<'_>,
    w: &mut WeightsBuilder,
    t: &Tensor,
    (k, n): (usize, usize),
    (start, rs, cs): (usize, usize, usize),
    alpha: f32,
    form: String,
) -> usize {
    let st = w.storage();
    if st.is_reduced() {
        w.reduced_nodes.insert(cx.id);
    }
    let small = k.saturating_mul(n) < RELEASE_AT;
    if !st.is_reduced() && (small || t.dtype() != DType::F32) {
        return w.form_f32(&[t], form, packed_b_len(k, n), |packed| {
            pack_b_of(t, k, n, start, rs, cs, packed);
            if alpha != 1.0 {
                packed.iter_mut().for_each(|x| *x *= alpha);
            }
        });
    }
    let bytes = lowp_b_bytes(st, k, n);
    let reduced = st.is_reduced().then_some(k * n * 4);
    w.form_bytes(&[t], form, bytes, reduced, |out, release| {
        with_f32_reader(t, |read, src| {
            let mut released = 0usize;
            let src = src.map(|s| s.get(start * 4..).unwrap_or_default());
            let read = |i: usize| read(start + i) * alpha;
            pack_b_lowp(st, k, n, read, rs, cs, out, &mut |e| {
                // Source pages wholly read: let them go (every MiB or so).
                if let Some(src) = src
                    && (e - released.min(e)) * 4 >= 1 << 20
                {
                    release(src.get(..e * 4).unwrap_or_default());
                    released = e;
                }
            });
            if let Some(src) = src {
                release(src.get(..(k * n) * 4).unwrap_or(src));
            }
        })
    })
}

/// Calls `f` with a reader of constant `t`'s elements as f32 and, for an f32 tensor, its bytes
/// (read in place, at any alignment: often the mapped file, whose pages the caller may release
/// as it goes); another dtype is read through a converted copy (no bytes given).
fn with_f32_reader<R>(t: &Tensor, f: impl FnOnce(&dyn Fn(usize) -> f32, Option<&[u8]>) -> R) -> R {
    if t.dtype() == DType::F32 {
        let src: &[u8] = t.bytes();
        let read = |i: usize| {
            let c = src.get(i * 4..i * 4 + 4).unwrap_or(&[0; 4]);
            f32::from_le_bytes([c[0], c[1], c[2], c[3]])
        };
        f(&read, Some(src))
    } else {
        let v = t.to_f32_vec();
        f(&|i| v.get(i).copied().unwrap_or(0.0), None)
    }
}

/// Elements from which a constant B is packed in its storage order with its source released
/// as it goes (smaller ones are packed at once, panel by panel).
const RELEASE_AT: usize = 1 << 20;

/// Packs the `k x n` matrix at element `start` of constant `t` (strides `rs`, `cs`) into
/// `out` ([`pack_b`]'s layout): an f32 weight straight from its bytes (often the mapped file,
/// at any alignment), another dtype through a converted copy.
fn pack_b_of(t: &Tensor, k: usize, n: usize, start: usize, rs: usize, cs: usize, out: &mut [f32]) {
    if t.dtype() == DType::F32 {
        pack_b_le(
            k,
            n,
            t.bytes().get(start * 4..).unwrap_or_default(),
            rs,
            cs,
            out,
        );
    } else {
        let v = t.to_f32_vec();
        pack_b(k, n, v.get(start..).unwrap_or_default(), rs, cs, out);
    }
}

/// Byte strides over `out` batch dims of an operand with batch dims `dims` (right-aligned,
/// broadcast dims 0) whose slices are `slice` bytes apart.
pub(super) fn batch_strides(dims: &[usize], out: &[usize], slice: usize) -> Vec<usize> {
    let mut st = vec![0; out.len()];
    let mut acc = slice;
    for k in (0..dims.len()).rev() {
        let o = out.len() - dims.len() + k;
        st[o] = if dims[k] == 1 && out[o] != 1 { 0 } else { acc };
        acc *= dims[k];
    }
    st
}

pub(super) fn matmul(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    cx.all_f32()?;
    let (av, bv, y) = (cx.input(0)?, cx.input(1)?, cx.output()?);
    let promote_a = |s: &[usize]| {
        if s.len() == 1 {
            vec![1, s[0]]
        } else {
            s.to_vec()
        }
    };
    let promote_b = |s: &[usize]| {
        if s.len() == 1 {
            vec![s[0], 1]
        } else {
            s.to_vec()
        }
    };
    let (a2, b2) = (promote_a(&cx.ty(av).shape), promote_b(&cx.ty(bv).shape));
    let (ra, rb) = (a2.len(), b2.len());
    if ra < 2 || rb < 2 {
        return Err(cx.err("MatMul operands must have rank >= 1"));
    }
    let (m, k, n) = (a2[ra - 2], a2[ra - 1], b2[rb - 1]);
    let (ba, bb) = (&a2[..ra - 2], &b2[..rb - 2]);
    let r = ba.len().max(bb.len());
    let mut out_batch = vec![1; r];
    for (d, o) in out_batch.iter_mut().enumerate() {
        let pick = |s: &[usize]| {
            (d + s.len())
                .checked_sub(r)
                .and_then(|i| s.get(i).copied())
                .unwrap_or(1)
        };
        *o = pick(ba).max(pick(bb));
    }
    // A weight shared by every batch slice: one product over all rows of A.
    let (m, out_batch, ba) = if prod(bb) == 1 {
        (m * prod(ba), vec![], vec![])
    } else {
        (m, out_batch, ba.to_vec())
    };
    let bb: Vec<usize> = if out_batch.is_empty() {
        vec![]
    } else {
        bb.to_vec()
    };
    let (b_op, b_packed, b_slice, b_type) = match cx.constant(bv) {
        Some(t) => {
            let st = w.storage();
            let slices = prod(&bb);
            // Each slice's packed B (with its scales for int8) at a 64-byte boundary.
            let len = lowp_b_bytes(st, k, n).next_multiple_of(64);
            let mut first = None;
            for s in 0..slices {
                let form = format!("packed B slice {s} {k}x{n} as {}", st.name());
                let off = packed_b_weights(cx, w, t, (k, n), (s * k * n, n, 1), 1.0, form);
                first.get_or_insert(off);
            }
            // Stored back to back: each slice's piece is `len` bytes, 64-aligned.
            (
                Operand::Weights(first.unwrap_or_default()),
                true,
                len,
                st.code(),
            )
        }
        None => (cx.arena(bv)?, false, k * n * 4, 0),
    };
    let desc = MatMulDesc {
        m,
        n,
        k,
        a_stride: batch_strides(&ba, &out_batch, m * k * 4),
        b_stride: batch_strides(&bb, &out_batch, b_slice),
        c_stride: batch_strides(&out_batch, &out_batch, m * n * 4),
        batch: out_batch,
        b_packed,
        b_type,
        b_rs: n,
        b_cs: 1,
        a_transposed: false,
        accumulate: false,
        scratch: layout(cx),
        threads: cx.threads(),
    };
    let a_op = cx.operand(av, w)?;
    mm_call(
        cx,
        prog,
        desc,
        vec![a_op, b_op, cx.arena(y)?, cx.scratch()?],
    )
}

/// The 2-d geometry of a 1-d or 2-d window op on NC* input `xs` with output `ys`.
#[allow(clippy::too_many_arguments)]
pub(super) fn window(
    cx: &Ctx<'_>,
    xs: &[usize],
    ys: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
    pads: &[usize],
) -> Result<Window, Error> {
    let d = kernel.len();
    if !(1..=2).contains(&d) || xs.len() != d + 2 || ys.len() != d + 2 {
        return Err(cx.err(format!("no kernel for {d}-d windows yet")));
    }
    let two = |v: &[usize], fill: usize| -> [usize; 2] {
        if d == 1 {
            [fill, v.first().copied().unwrap_or(fill)]
        } else {
            [
                v.first().copied().unwrap_or(fill),
                v.get(1).copied().unwrap_or(fill),
            ]
        }
    };
    Ok(Window {
        in_hw: two(&xs[2..], 1),
        out_hw: two(&ys[2..], 1),
        kernel: two(kernel, 1),
        strides: two(strides, 1),
        dilations: two(dilations, 1),
        pads: two(pads, 0),
    })
}

pub(super) fn pool_call(
    cx: &Ctx<'_>,
    prog: &mut Program,
    desc: PoolDesc,
    x: Operand,
    y: Operand,
) -> Result<(), Error> {
    // Planned in place (same address): only where the kernel may write over its input.
    if x == y
        && !desc
            .params()
            .is_some_and(|p| crate::gemm::pool::in_place_ok(&p))
    {
        return Err(cx.err(
            "pooling planned in place where its kernel cannot write over its input \
             (a planner bug)",
        ));
    }
    let (node, op) = cx.label();
    let f = prog.kernel(format!("pool {desc:?}"), 2, (&node, &op), |b, p, ext| {
        desc.emit(b, p[0], p[1], ext)
    })?;
    prog.call(f, vec![x, y]);
    Ok(())
}

/// Bytes of the scratch buffer planned for node `cx.id` (0 when none).
pub(super) fn planned_scratch(cx: &Ctx<'_>) -> usize {
    cx.plan
        .liveness
        .buffers
        .iter()
        .find(|b| b.kind == crate::analysis::liveness::BufferKind::Scratch && b.node == Some(cx.id))
        .map_or(0, |b| b.interval.size)
}

/// Conv (1-d as 2-d with height 1, 2-d; 3-d: [`super::conv3d`]) as one call of [`crate::gemm::conv::arenac_conv2d`],
/// with a fused activation when [`fused_activation`] finds one.
pub(super) fn conv(
    cx: &Ctx<'_>,
    a: &crate::ops::ConvAttrs,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    cx.all_f32()?;
    let (xv, wv, y) = (cx.input(0)?, cx.input(1)?, cx.output()?);
    if a.sum && (cx.ty(xv).shape.len() != 4 || a.group != 1) {
        return Err(cx.err("internal: a fused residual on a Conv that is not 2-d with one group"));
    }
    if cx.ty(xv).shape.len() == 5 {
        return super::conv3d::lower(cx, a, prog, w);
    }
    if a.sum {
        residual_into(cx, prog, y)?;
    }
    let (xs, ys) = (cx.ty(xv).shape.clone(), cx.ty(y).shape.clone());
    let bias = cx.g.node(cx.id).inputs.get(2).copied();
    let groups = a.group.max(1);
    let act = fused_activation(cx.g, cx.plan, cx.id).map_or(Activation::None, |f| f.act);
    let [act_kind, act_a, act_b] = act.encode();
    let mut params = ConvParams::from_shapes(
        &xs,
        &ys,
        &a.kernel,
        &a.strides,
        &a.dilations,
        &a.pads,
        groups,
    )
    .ok_or_else(|| cx.err("no kernel for Conv of this rank yet"))?;
    params.has_bias = u64::from(bias.is_some());
    params.threads = cx.threads() as u64;
    params.accumulate = u64::from(a.sum);
    (params.act, params.act_a, params.act_b) = (act_kind, act_a, act_b);
    // Winograd where the planner gave it its scratch (`analysis/liveness/winograd.rs`), marked
    // as the planner marked it: the transformed weights precomputed into the weights region
    // (constant f32 weights, small enough), else the weights as they are (OIHW, transformed
    // per run into the scratch; reduced ones stored OIHW in their type and widened by the
    // transform).
    let planned = planned_scratch(cx);
    let st = w.storage();
    let o = cx.plan.options.liveness;
    if crate::analysis::liveness::winograd::chosen(cx.g, cx.plan, cx.id, planned)
        && let Some(wp) = crate::analysis::liveness::winograd::winograd_conv(cx.g, cx.id, &o)
    {
        params.packed_a = wp.packed_a;
        // The tile block the planned bytes hold (the same function as the planner's).
        let block = crate::gemm::winograd::block_for_scratch(&params, planned).unwrap_or(0);
        params.tile = block as u64;
        let weights = match cx.constant(wv) {
            Some(_)
                if params.packed_a == crate::gemm::winograd::WINOGRAD_U_PACKED
                    && st.is_reduced() =>
            {
                return Err(cx.err(format!(
                    "internal: Winograd's precomputed weights planned with --weights {}",
                    st.name()
                )));
            }
            Some(wt) if params.packed_a == crate::gemm::winograd::WINOGRAD_U_PACKED => {
                let n = crate::gemm::winograd::weights_floats(&params);
                let form = format!(
                    "winograd U m={} c={} kernel={}",
                    params.m,
                    params.c,
                    crate::gemm::selected_kernel().name
                );
                let p = params;
                let mut ok = true;
                let off = w.form_f32_of(wt, form, n, |src, out| {
                    ok = crate::gemm::winograd::transform_weights(&p, src, out);
                });
                if !ok {
                    return Err(cx.err(format!(
                        "internal: Conv weights of {} floats, {} x {} x 3 x 3 expected",
                        wt.numel(),
                        params.m,
                        params.c
                    )));
                }
                Operand::Weights(off)
            }
            Some(wt) if st.is_reduced() => {
                params.wtype = st.code();
                reduced_conv_weights(cx, w, wt, &params, Layout::Oihw)
            }
            Some(wt) => Operand::Weights(w.tensor_f32(wt)),
            None => cx.arena(wv)?,
        };
        return conv_call(
            cx,
            prog,
            w,
            params,
            (xv, weights, bias, y),
            "conv2d winograd",
        );
    }
    // Constant weights are packed at compile time; run-time ones are read as they are (OIHW
    // rows, packed by the GEMM core into the A part of the scratch as it goes).
    let weights = match cx.constant(wv) {
        Some(wt) => {
            use crate::gemm::conv::{mark_packed, prepare_weights, prepared_len};
            use crate::gemm::lowp::{conv_lowp_bytes, mark_conv, pack_conv_lowp};
            mark_packed(&mut params);
            let direct = params.is_direct();
            if st.is_reduced()
                && direct
                && planned
                    >= direct_scratch_bytes(&ConvParams {
                        wtype: st.code(),
                        ..params
                    })
            {
                // The direct kernels, widening a block of output channels at a time into
                // the planned scratch (the im2col path's, which holds one block per thread).
                params.wtype = st.code();
                reduced_conv_weights(cx, w, wt, &params, Layout::Direct)
            } else if st.is_reduced() && crate::gemm::lowp::conv::is_pw_small(&params) {
                // The small-plane pointwise kernel, widening its panels' rows in registers.
                params.wtype = st.code();
                reduced_conv_weights(cx, w, wt, &params, Layout::PwSmall)
            } else if mark_conv(&mut params, st) {
                // Stored in the reduced type, packed for the GEMM core (read widened).
                w.reduced_nodes.insert(cx.id);
                let form = format!(
                    "conv weights m={} k={} group={} as {}",
                    params.m,
                    params.k(),
                    params.group,
                    st.name()
                );
                let p = params;
                let bytes = conv_lowp_bytes(&p, st);
                let off = pack_reduced(w, wt, form, bytes, |read, out, done| {
                    pack_conv_lowp(&p, st, read, out, done);
                });
                Operand::Weights(off)
            } else {
                let form = format!("conv weights {}", crate::gemm::conv::packing_name(&params));
                let off = w.form_f32_of(wt, form, prepared_len(&params), |src, out| {
                    prepare_weights(&mut params.clone(), src, out);
                });
                Operand::Weights(off)
            }
        }
        None => {
            params.packed_a = 0;
            cx.arena(wv)?
        }
    };
    // The planner sized the scratch by the same function at the tile it chose; the largest
    // tile whose scratch fits the planned bytes is that tile (a kernel that reads no scratch,
    // the direct ones on f32 weights, runs on whatever was planned: `conv2d_plan_bytes`). A
    // mismatch is a bug, not a crash.
    let tile = crate::gemm::conv::conv2d_tile_for_plan(&params, planned).ok_or_else(|| {
        cx.err(format!(
            "internal: Conv needs {} bytes of scratch even at its smallest tile, {planned} planned",
            crate::gemm::conv::conv2d_scratch_bytes(&ConvParams {
                tile: crate::gemm::conv::CONV_MIN_TILE as u64,
                ..params
            })
        ))
    })?;
    params.tile = tile as u64;
    conv_call(cx, prog, w, params, (xv, weights, bias, y), "conv2d")
}

/// A Conv with a fused residual `R` (its fourth input, `ConvAttrs::sum`) adds it to what it
/// computes by reading its output buffer first (`ConvParams::accumulate`): `R` must be there
/// when the kernel starts (f32, or 16-bit: `codegen::lower::act16`). The planner normally puts the output in place on `R` (`R` dies at
/// the Conv: `analysis::liveness`), and nothing is emitted; otherwise `R` is copied into the
/// output here.
pub(super) fn residual_into(cx: &Ctx<'_>, prog: &mut Program, y: ValueId) -> Result<(), Error> {
    let r = cx.input(3)?;
    let (src, dst) = (cx.arena(r)?, cx.arena(y)?);
    if src == dst {
        return Ok(());
    }
    let n = cx
        .ty(y)
        .numel()
        .ok_or_else(|| cx.err("internal: a residual of unknown size"))?;
    let elem = cx.ty(y).dtype.size();
    let desc = crate::codegen::kernels::movement::CopyDesc::new(elem, &[n], &[1], &[1]);
    super::movement::copy_call(cx, prog, desc, src, dst)
}

/// Conv weights stored in the reduced storage type in `layout` ([`crate::gemm::lowp::conv`]:
/// the Winograd and direct kernels' own layouts), read straight from the weight's bytes
/// (often the mapped file), its pages released as rows are packed.
pub(super) fn reduced_conv_weights(
    cx: &Ctx<'_>,
    w: &mut WeightsBuilder,
    wt: &Tensor,
    params: &ConvParams,
    layout: Layout,
) -> Operand {
    let st = w.storage();
    w.reduced_nodes.insert(cx.id);
    let form = format!(
        "conv weights {} {layout:?} as {}",
        crate::gemm::conv::packing_name(params),
        st.name()
    );
    let bytes = crate::gemm::lowp::conv::region_bytes(params, st, layout);
    let off = pack_reduced(w, wt, form, bytes, |read, out, done| {
        crate::gemm::lowp::conv::pack(params, st, layout, read, out, done);
    });
    Operand::Weights(off)
}

/// The weights-region offset of `bytes` that `pack(read, out, done)` writes from constant
/// `wt` in a reduced type (`form` names the layout). `read` gives `wt`'s elements as f32,
/// straight from its bytes when it is f32 (often the mapped file); `pack` calls `done(e)`
/// whenever every element below `e` has been read, and those source pages are released a
/// MiB or more at a time, the rest at the end (the compile-time peak holds about a MiB of
/// the source, not the tensor).
pub(super) fn pack_reduced(
    w: &mut WeightsBuilder,
    wt: &Tensor,
    form: String,
    bytes: usize,
    pack: impl FnOnce(&dyn Fn(usize) -> f32, &mut [u8], &mut dyn FnMut(usize)),
) -> usize {
    w.form_bytes(&[wt], form, bytes, Some(wt.numel() * 4), |out, rel| {
        with_f32_reader(wt, |read, src| {
            let mut released = 0usize;
            pack(read, out, &mut |e| {
                if let Some(src) = src
                    && (e - released.min(e)) * 4 >= 1 << 20
                {
                    rel(src.get(..e * 4).unwrap_or_default());
                    released = e;
                }
            });
            if let Some(src) = src {
                rel(src);
            }
        });
    })
}

/// The call of [`crate::gemm::conv::arenac_conv2d`] for `params` (weights operand given).
fn conv_call(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
    params: ConvParams,
    (xv, weights, bias, y): (ValueId, Operand, Option<ValueId>, ValueId),
    name: &str,
) -> Result<(), Error> {
    let bias_op = match bias {
        Some(bv) => match cx.constant(bv) {
            Some(t) => Operand::Weights(w.tensor_f32(t)),
            None => cx.arena(bv)?,
        },
        None => Operand::Null,
    };
    let args = vec![
        Operand::Weights(w.add(&params.to_bytes())),
        cx.arena(xv)?,
        weights,
        bias_op,
        cx.arena(y)?,
        cx.scratch()?,
    ];
    let (node, op) = cx.label();
    let f = prog.kernel(name.to_string(), 6, (&node, &op), |b, p, ext| {
        cranelift_codegen::ir::InstBuilder::call(b.ins(), ext.conv2d, p);
    })?;
    prog.call(f, args);
    Ok(())
}
