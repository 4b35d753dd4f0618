//! What each node becomes: kernel calls (from the cache or freshly compiled) with the
//! addresses of its operands.

mod act16;
mod control;
mod conv3d;
mod convt;
mod dense;
mod elementwise;
mod epilogue;
mod indexing;
mod movement;
mod norm;
mod pool3d;
mod pow;
mod reduce;
mod sample;
mod spectral;
mod upsample;

use super::kernels::conv::PoolDesc;
use super::kernels::elementwise::{Ew, EwDesc};
use super::kernels::lrn::LrnDesc;
use super::kernels::movement::{CopyDesc, GatherDesc};
use super::kernels::reduce::ReduceDesc;
use super::kernels::softmax::SoftmaxDesc;
use super::program::{Operand, Program};
use super::weights::WeightsBuilder;
use crate::analysis::liveness::BufferKind;
use crate::arena::ArenaPlan;
use crate::error::{Error, OpError};
use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::{LrnAttrs, Op, ReduceKind, VariadicOp};
use convt::conv_transpose;
use cranelift_module::FuncId;
use dense::{conv, gemm, matmul, pool_call, window};
use epilogue::fused_into_conv;
use movement::{copy_call, movement, resize};

/// Where a graph being lowered sits: the main graph, or a subgraph of a control node.
pub(super) struct Frame {
    /// Arena offset of the graph's own arena (its plan's offset 0): 0 for the main graph, the
    /// holding node's scratch buffer for a subgraph.
    base: usize,
    /// For a subgraph, the operands of the holding node's inputs, by input number (what
    /// [`ValueKind::Outer`] values read).
    outer: Vec<Operand>,
    /// Loops around the graph (a loop body: one more than its loop node's graph).
    depth: usize,
}

impl Frame {
    /// The main graph's frame.
    pub(super) fn root() -> Frame {
        Frame {
            base: 0,
            outer: Vec::new(),
            depth: 0,
        }
    }
}

struct Ctx<'a> {
    g: &'a Graph,
    plan: &'a ArenaPlan,
    id: NodeId,
    frame: &'a Frame,
}

impl Ctx<'_> {
    fn err(&self, what: impl Into<String>) -> Error {
        let n = self.g.node(self.id);
        Error::Node {
            node: n.name.clone(),
            op: n.op.name().to_string(),
            source: OpError::Unsupported(what.into()),
        }
    }

    fn input(&self, i: usize) -> Result<ValueId, Error> {
        self.g
            .node(self.id)
            .inputs
            .get(i)
            .copied()
            .ok_or_else(|| self.err(format!("missing input {i}")))
    }

    fn ty(&self, v: ValueId) -> &TensorType {
        &self.g.value(v).ty
    }

    fn constant(&self, v: ValueId) -> Option<&Tensor> {
        match &self.g.value(v).kind {
            ValueKind::Constant(t) => Some(t),
            _ => None,
        }
    }

    /// The arena address of `v`: its buffer's offset plus its offset within the buffer
    /// (a Concat slice), checked to lie inside the arena with all of `v`'s bytes. An outer
    /// value of a subgraph is the holding node's input's operand.
    fn arena(&self, v: ValueId) -> Result<Operand, Error> {
        let name = &self.g.value(v).name;
        if let ValueKind::Outer(k) = self.g.value(v).kind {
            return self.frame.outer.get(k).copied().ok_or_else(|| {
                self.err(format!(
                    "outer value '{name}' reads a missing node input {k}"
                ))
            });
        }
        let offset = self
            .plan
            .value_offset(v)
            .ok_or_else(|| self.err(format!("value '{name}' has no arena buffer")))?;
        let bytes = self.ty(v).bytes();
        self.inside(offset, bytes, name)?;
        Ok(Operand::Arena(self.frame.base + offset))
    }

    /// Checks that `[offset, offset + bytes)` lies inside the arena.
    fn inside(&self, offset: usize, bytes: Option<usize>, what: &str) -> Result<(), Error> {
        let arena = self.plan.arena_bytes;
        if bytes
            .and_then(|b| b.checked_add(offset))
            .is_none_or(|end| end > arena)
        {
            return Err(self.err(format!(
                "'{what}' at arena offset {offset} ({bytes:?} bytes) does not fit in the \
                 {arena}-byte arena (a planner bug)"
            )));
        }
        Ok(())
    }

    fn operand(&self, v: ValueId, w: &mut WeightsBuilder) -> Result<Operand, Error> {
        match self.constant(v) {
            Some(t) => Ok(Operand::Weights(w.tensor(t))),
            None => self.arena(v),
        }
    }

    fn output(&self) -> Result<ValueId, Error> {
        self.g
            .node(self.id)
            .outputs
            .first()
            .copied()
            .ok_or_else(|| self.err("no output"))
    }

    /// The node's scratch buffer (`Null` when it has none), checked to lie inside the arena.
    fn scratch(&self) -> Result<Operand, Error> {
        let Some((i, b)) = self
            .plan
            .liveness
            .buffers
            .iter()
            .enumerate()
            .find(|(_, b)| b.kind == BufferKind::Scratch && b.node == Some(self.id))
        else {
            return Ok(Operand::Null);
        };
        let offset = self
            .plan
            .placement
            .offsets
            .get(i)
            .copied()
            .ok_or_else(|| self.err(format!("scratch '{}' has no offset", b.name)))?;
        self.inside(offset, Some(b.interval.size), &b.name)?;
        Ok(Operand::Arena(self.frame.base + offset))
    }

    /// Threads the plan sized per-thread scratch for.
    fn threads(&self) -> usize {
        self.plan.options.liveness.threads.max(1)
    }

    /// The two extra operands of a kernel that checks the run-time values of input `i`
    /// (`what`: "index"...) through the fault record, or `None` when that input is a constant
    /// (the import checked its values already).
    fn fault_sink(
        &self,
        prog: &mut Program,
        i: usize,
        what: &'static str,
    ) -> Result<Option<[Operand; 2]>, Error> {
        if self.constant(self.input(i)?).is_some() {
            return Ok(None);
        }
        let (node, op) = self.label();
        Ok(Some(prog.fault_sink(&node, &op, what)))
    }

    fn label(&self) -> (String, String) {
        let n = self.g.node(self.id);
        (n.name.clone(), n.op.name().to_string())
    }

    fn all_f32(&self) -> Result<(), Error> {
        let n = self.g.node(self.id);
        for &v in n.inputs.iter().chain(&n.outputs) {
            let dt = self.ty(v).dtype;
            if dt != DType::F32 {
                return Err(self.err(format!(
                    "no kernel for {} on {} yet (f32 only)",
                    n.op.name(),
                    dt.name()
                )));
            }
        }
        Ok(())
    }
}

fn ew_call(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
    desc: EwDesc,
    mut args: Vec<Operand>,
    out: Operand,
) -> Result<(), Error> {
    let (node, op) = cx.label();
    let n = desc.strides.len() + 1;
    args.push(out);
    let split = ew_split(&desc.dims, &desc.strides);
    rows_call(cx, prog, w, split, args, &mut |prog, rows| {
        let mut d = desc.clone();
        d.dims[0] = rows;
        prog.kernel(format!("ew {d:?}"), n, (&node, &op), |b, p, _| d.emit(b, p))
    })
}

/// How an element-wise loop nest over `dims` (inputs walked at `strides`, a contiguous
/// output last) splits into rows: its first dim, whole 4-lane groups when it is the only one.
fn ew_split(dims: &[usize], strides: &[Vec<usize>]) -> RowSplit {
    let row_elems = prod(dims.get(1..).unwrap_or_default());
    let mut steps: Vec<usize> = strides
        .iter()
        .map(|s| s.first().copied().unwrap_or(0) * 4)
        .collect();
    steps.push(row_elems * 4);
    RowSplit {
        rows: dims.first().copied().unwrap_or(1),
        unit: if dims.len() == 1 { 4 } else { 1 },
        steps,
        row_elems,
    }
}

/// How a kernel's outermost loop may be cut into chunks of rows ([`crate::codegen::rows`]).
struct RowSplit {
    /// Trip count of the outermost loop.
    rows: usize,
    /// Chunk sizes are multiples of this (4 when the loop is the vector loop itself, so each
    /// element takes the same vector or scalar path as in one call).
    unit: usize,
    /// Bytes each operand moves per row, in operand order (0: the same data for all rows).
    steps: Vec<usize>,
    /// Elements computed per row (the work estimate).
    row_elems: usize,
}

/// Fewest elements a row-split chunk gets: below it, the dispatch costs more than it saves.
const PAR_MIN_CHUNK_ELEMS: usize = 16 * 1024;

/// Emits the kernel `make(rows)` over `args`: one call of the kernel for all rows, or, when
/// the plan is for several threads and there is enough work, a row-split call of a chunk's
/// kernel and the last chunk's ([`crate::codegen::rows::arenac_par_rows`]).
fn rows_call(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
    split: RowSplit,
    args: Vec<Operand>,
    make: &mut dyn FnMut(&mut Program, usize) -> Result<FuncId, Error>,
) -> Result<(), Error> {
    use crate::codegen::rows::{Base, MAX_ARGS, RowArg, RowsDesc};
    let threads = cx.threads();
    let total = split.rows.saturating_mul(split.row_elems.max(1));
    let chunks = (total / PAR_MIN_CHUNK_ELEMS).min(threads);
    let immediate = args.iter().any(|a| {
        matches!(
            a,
            Operand::Imm(_) | Operand::Host(_) | Operand::Indexed { .. }
        )
    });
    if chunks < 2 || immediate || args.len() > MAX_ARGS || args.len() != split.steps.len() {
        let f = make(prog, split.rows)?;
        prog.call(f, args);
        return Ok(());
    }
    let unit = split.unit.max(1);
    let per = split.rows.div_ceil(chunks).div_ceil(unit) * unit;
    let chunks = split.rows.div_ceil(per.max(1));
    if chunks < 2 {
        let f = make(prog, split.rows)?;
        prog.call(f, args);
        return Ok(());
    }
    let last = split.rows - per * (chunks - 1);
    let full = make(prog, per)?;
    let tail = if last == per { full } else { make(prog, last)? };
    let mut desc = RowsDesc {
        nargs: args.len() as u64,
        chunks: chunks as u64,
        rows: per as u64,
        width: threads as u64,
        cost_ns: crate::par::cost::elems_ns(total),
        args: [RowArg {
            base: Base::Null as u64,
            offset: 0,
            step: 0,
        }; MAX_ARGS],
    };
    for (slot, (a, &step)) in desc.args.iter_mut().zip(args.iter().zip(&split.steps)) {
        let (base, offset) = match *a {
            Operand::Arena(o) => (Base::Arena, o),
            Operand::Weights(o) => (Base::Weights, o),
            Operand::Null | Operand::Imm(_) | Operand::Host(_) | Operand::Indexed { .. } => {
                (Base::Null, 0)
            }
        };
        *slot = RowArg {
            base: base as u64,
            offset: offset as u64,
            step: if base == Base::Null { 0 } else { step as u64 },
        };
    }
    let at = w.add(&desc.to_bytes());
    prog.call_rows(at, full, tail);
    Ok(())
}

fn prod(d: &[usize]) -> usize {
    d.iter().product()
}

/// The activation nodes whose work node `id`'s kernel does in its epilogue (a Conv's Relu,
/// or Sigmoid and Mul).
pub(super) fn epilogue_activation(g: &Graph, plan: &ArenaPlan, id: NodeId) -> Vec<NodeId> {
    epilogue::fused_activation(g, plan, id).map_or_else(Vec::new, |f| f.nodes)
}

/// Emits the calls of node `id` of graph `g` (planned by `plan`, placed by `frame`).
pub(super) fn node(
    g: &Graph,
    plan: &ArenaPlan,
    frame: &Frame,
    id: NodeId,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let cx = Ctx { g, plan, id, frame };
    let n = g.node(id);
    let op = &n.op;
    // An activation applied in place by its producer's conv epilogue: nothing left to do.
    if fused_into_conv(g, plan, id) {
        return Ok(());
    }
    if op.is_view() {
        let (x, y) = (cx.input(0)?, cx.output()?);
        let src = cx.operand(x, w)?;
        let dst = cx.arena(y)?;
        if src == dst {
            return Ok(());
        }
        let ty = cx.ty(y);
        let (elem, len) = (ty.dtype.size(), ty.numel().unwrap_or(0));
        if ![1, 2, 4, 8].contains(&elem) {
            return Err(cx.err(format!("no kernel for copying {} yet", ty.dtype.name())));
        }
        let desc = CopyDesc::new(elem, &[len], &[1], &[1]);
        return copy_call(&cx, prog, desc, src, dst);
    }
    // `--activations f16|bf16`: nodes with a staged 16-bit kernel, and the Casts it adds.
    if act16::cast(&cx, prog, w)? {
        return Ok(());
    }
    if act16::select(&cx, prog, w)? {
        return Ok(());
    }
    if let Some(t) = act16::staged_type(&cx) {
        return act16::lower(&cx, t, prog, w);
    }
    let y = cx.output()?;
    let out_shape = cx.ty(y).shape.clone();
    match op {
        Op::Unary(_)
        | Op::ClipDynamic { .. }
        | Op::Binary(_)
        | Op::Variadic(_)
        | Op::Where
        | Op::Cast { .. } => elementwise::lower(&cx, prog, w),
        Op::FusedElementwise(a) => elementwise::fused(&cx, a, prog, w),
        Op::BatchNormalization { training, .. }
            if training.is_some()
                || (1..5).any(|i| n.inputs.get(i).is_some_and(|&v| cx.constant(v).is_none())) =>
        {
            norm::stats_norm(&cx, prog, w)
        }
        Op::LayerNormalization { .. }
        | Op::InstanceNormalization { .. }
        | Op::GroupNormalization { .. }
        | Op::MeanVarianceNormalization { .. }
        | Op::RmsNormalization { .. } => norm::stats_norm(&cx, prog, w),
        Op::BatchNormalization { epsilon, .. } => {
            cx.all_f32()?;
            let x = cx.input(0)?;
            let params: Vec<&Tensor> = (1..5)
                .map(|i| {
                    let v = cx.input(i)?;
                    cx.constant(v).ok_or_else(|| {
                        cx.err("no kernel for non-constant BatchNormalization parameters yet")
                    })
                })
                .collect::<Result<_, _>>()?;
            let xs = &cx.ty(x).shape;
            let c = xs.get(1).copied().unwrap_or(1);
            // Folded to y = x * s + t per channel, each stored once per parameter set.
            let (s, t) = batch_norm_forms(&params, *epsilon, c, w);
            let mut cshape = vec![c];
            cshape.extend(std::iter::repeat_n(1, xs.len().saturating_sub(2)));
            let desc = EwDesc::new(Ew::MulAdd, &[xs, &cshape, &cshape], &out_shape);
            let args = vec![cx.arena(x)?, Operand::Weights(s), Operand::Weights(t)];
            ew_call(&cx, prog, w, desc, args, cx.arena(y)?)
        }
        Op::Softmax {
            axis,
            log,
            coerce_2d,
        } => {
            cx.all_f32()?;
            let s = &out_shape;
            let axis = (*axis).min(s.len().saturating_sub(1));
            let desc = if *coerce_2d {
                SoftmaxDesc {
                    outer: prod(&s[..axis]),
                    len: prod(&s[axis..]),
                    inner: 1,
                    log: *log,
                }
            } else {
                SoftmaxDesc {
                    outer: prod(&s[..axis]),
                    len: s.get(axis).copied().unwrap_or(1),
                    inner: prod(s.get(axis + 1..).unwrap_or_default()),
                    log: *log,
                }
            };
            let x = cx.arena(cx.input(0)?)?;
            if desc.inner == 1 && elementwise::native_on() {
                // Rows over the last axis: the host's 8/16-lane loop, in the output itself.
                let (rows, len, log) = (desc.outer, desc.len, desc.log);
                let kernel = crate::codegen::host::HostKernel::new(move |p| {
                    // SAFETY: `arenac_host`'s contract: X and Y hold `rows * len` floats,
                    // equal (in place) or apart.
                    unsafe {
                        crate::gemm::stage16::rows::softmax_f32(
                            rows,
                            len,
                            log,
                            p[0].cast::<f32>(),
                            p[1].cast::<f32>(),
                        )
                    };
                });
                return act16::host_call(&cx, prog, kernel, vec![x, cx.arena(y)?]);
            }
            let (node, opn) = cx.label();
            let row = desc.len * desc.inner;
            let split = RowSplit {
                rows: desc.outer,
                unit: 1,
                steps: vec![row * 4, row * 4],
                row_elems: row,
            };
            rows_call(
                &cx,
                prog,
                w,
                split,
                vec![x, cx.arena(y)?],
                &mut |prog, rows| {
                    let d = SoftmaxDesc {
                        outer: rows,
                        ..desc.clone()
                    };
                    prog.kernel(format!("softmax {d:?}"), 2, (&node, &opn), |b, p, ext| {
                        d.emit(b, p[0], p[1], ext.logf)
                    })
                },
            )
        }
        Op::Conv(a) => conv(&cx, a, prog, w),
        Op::MaxPool(a) => {
            cx.all_f32()?;
            if n.outputs.len() > 1 {
                return Err(cx.err("no kernel for MaxPool with Indices yet"));
            }
            if a.kernel.len() == 3 {
                return pool3d::lower(&cx, a, true, prog);
            }
            let x = cx.input(0)?;
            let xs = &cx.ty(x).shape;
            let win = window(
                &cx,
                xs,
                &out_shape,
                &a.kernel,
                &a.strides,
                &a.dilations,
                &a.pads,
            )?;
            let desc = PoolDesc::Max {
                planes: xs[0] * xs[1],
                win,
            };
            pool_call(&cx, prog, desc, cx.arena(x)?, cx.arena(y)?)
        }
        Op::AveragePool(a) => {
            cx.all_f32()?;
            if a.kernel.len() == 3 {
                return pool3d::lower(&cx, a, false, prog);
            }
            let x = cx.input(0)?;
            let xs = &cx.ty(x).shape;
            let win = window(
                &cx,
                xs,
                &out_shape,
                &a.kernel,
                &a.strides,
                &a.dilations,
                &a.pads,
            )?;
            let d = a.kernel.len();
            let ends = a.pads.get(d..).unwrap_or_default();
            let pad_end = if d == 1 {
                [0, ends.first().copied().unwrap_or(0)]
            } else {
                [
                    ends.first().copied().unwrap_or(0),
                    ends.get(1).copied().unwrap_or(0),
                ]
            };
            let desc = PoolDesc::Average {
                planes: xs[0] * xs[1],
                win,
                pad_end,
                include_pad: a.count_include_pad,
            };
            pool_call(&cx, prog, desc, cx.arena(x)?, cx.arena(y)?)
        }
        Op::GlobalAveragePool => {
            cx.all_f32()?;
            let x = cx.input(0)?;
            let xs = &cx.ty(x).shape;
            if xs.len() < 2 {
                return Err(cx.err("GlobalAveragePool input must have rank >= 2"));
            }
            let desc = PoolDesc::GlobalAverage {
                planes: xs[0] * xs[1],
                len: prod(&xs[2..]),
            };
            pool_call(&cx, prog, desc, cx.arena(x)?, cx.arena(y)?)
        }
        Op::Transpose { .. }
        | Op::Slice { .. }
        | Op::PatchWrite { .. }
        | Op::Concat { .. }
        | Op::Split { .. }
        | Op::Expand { .. }
        | Op::Tile { .. }
        | Op::Pad { .. } => movement(&cx, prog, w),
        Op::Resize(a) => resize(&cx, a, prog, w),
        Op::Move(m) => indexing::lower(&cx, m, prog, w),
        Op::ConvTranspose(a) => conv_transpose(&cx, a, prog, w),
        Op::Reduce(_)
        | Op::ArgReduce(_)
        | Op::Hardmax { .. }
        | Op::CumScan(_)
        | Op::TopK(_)
        | Op::LpNormalization { .. }
        | Op::LpPool(_) => reduce::lower(&cx, prog, w),
        Op::Gather { axis } => {
            let (d, i) = (cx.input(0)?, cx.input(1)?);
            let (dt, it) = (cx.ty(d).clone(), cx.ty(i).clone());
            let index_bytes = match it.dtype {
                DType::I64 => 8,
                DType::I32 => 4,
                other => {
                    return Err(cx.err(format!(
                        "no kernel for Gather indices of {} yet",
                        other.name()
                    )));
                }
            };
            let elem = dt.dtype.size();
            if ![1, 2, 4, 8].contains(&elem) || dt.shape.get(*axis).is_none_or(|&k| k == 0) {
                return Err(cx.err(format!(
                    "no kernel for this Gather on {} yet",
                    dt.dtype.name()
                )));
            }
            let sink = cx.fault_sink(prog, 1, "index")?;
            let desc = GatherDesc {
                elem,
                index_bytes,
                outer: prod(&dt.shape[..*axis]),
                dim: dt.shape[*axis],
                count: it.numel().unwrap_or(0),
                inner: prod(&dt.shape[*axis + 1..]),
                checked: sink.is_some(),
            };
            let mut args = vec![cx.operand(d, w)?, cx.operand(i, w)?, cx.arena(y)?];
            args.extend(sink.into_iter().flatten());
            let (node, opn) = cx.label();
            let f = prog.kernel(
                format!("gather {desc:?}"),
                args.len(),
                (&node, &opn),
                |b, p, _| desc.emit(b, p),
            )?;
            prog.call(f, args);
            Ok(())
        }
        Op::Lrn(a) => lrn(&cx, a, prog),
        Op::GlobalMaxPool => global_max_pool(&cx, prog),
        Op::Gemm(attrs) => gemm(&cx, attrs, prog, w),
        Op::MatMul => matmul(&cx, prog, w),
        Op::If(a) => control::lower_if(&cx, a, prog, w),
        Op::Loop(a) => control::lower_loop(&cx, a, prog, w),
        Op::Dft(_) | Op::Stft(_) => spectral::dft(&cx, prog, w),
        Op::MelWeightMatrix(a) => spectral::mel(&cx, a, prog, w),
        Op::Sample(s) => sample::lower(&cx, s, prog, w),
        _ => Err(cx.err(format!("no kernel for {} yet", op.name()))),
    }
}

/// Inference BatchNormalization's per-channel scale `s = gamma / sqrt(var + eps)` and shift
/// `t = beta - mean * s` (computed in f64, rounded once; `s` rounded before `t` uses it), for
/// `c` channels of the constants `[gamma, beta, mean, var]`: their weights offsets.
fn batch_norm_forms(
    p: &[&Tensor],
    epsilon: f32,
    c: usize,
    w: &mut WeightsBuilder,
) -> (usize, usize) {
    let eps = epsilon.to_bits();
    let at = |v: &[f64], i: usize| v.get(i).copied().unwrap_or(0.0);
    let scales = || {
        let (g, v) = (p[0].to_f64_vec(), p[3].to_f64_vec());
        (0..c)
            .map(|i| (at(&g, i) / (at(&v, i) + f64::from(epsilon)).sqrt()) as f32)
            .collect::<Vec<f32>>()
    };
    let s = w.form_f32(p, format!("bn scale eps={eps:#x}"), c, |out| {
        out.copy_from_slice(&scales());
    });
    let t = w.form_f32(p, format!("bn shift eps={eps:#x}"), c, |out| {
        let (b, m) = (p[1].to_f64_vec(), p[2].to_f64_vec());
        for (i, (x, s)) in out.iter_mut().zip(scales()).enumerate() {
            *x = (at(&b, i) - at(&m, i) * f64::from(s)) as f32;
        }
    });
    (s, t)
}

/// Sum/Mean/Max/Min of three or more inputs: the output starts as one input (the one stored
/// in the output's buffer, if any, so that nothing is overwritten before it is read), then
/// takes each other input in turn.
fn variadic(
    cx: &Ctx<'_>,
    kind: VariadicOp,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    cx.all_f32()?;
    let n = cx.g.node(cx.id);
    let y = cx.output()?;
    let out = cx.arena(y)?;
    let ys = cx.ty(y).shape.clone();
    let ins: Vec<ValueId> = n.inputs.to_vec();
    let mut first = 0;
    for (i, &v) in ins.iter().enumerate() {
        if cx.constant(v).is_none() && cx.arena(v)? == out {
            first = i;
        }
    }
    let e = match kind {
        VariadicOp::Sum | VariadicOp::Mean => Ew::Add,
        VariadicOp::Max => Ew::Max,
        VariadicOp::Min => Ew::Min,
    };
    let x0 = ins[first];
    let desc = EwDesc::new(Ew::Copy, &[&cx.ty(x0).shape], &ys);
    let x0 = cx.operand(x0, w)?;
    ew_call(cx, prog, w, desc, vec![x0], out)?;
    for (i, &v) in ins.iter().enumerate() {
        if i == first {
            continue;
        }
        let desc = EwDesc::new(e, &[&ys, &cx.ty(v).shape], &ys);
        let v = cx.operand(v, w)?;
        ew_call(cx, prog, w, desc, vec![out, v], out)?;
    }
    if kind == VariadicOp::Mean {
        let desc = EwDesc::new(Ew::Scale(1.0 / ins.len() as f32), &[&ys], &ys);
        ew_call(cx, prog, w, desc, vec![out], out)?;
    }
    Ok(())
}

/// LRN on f32 `N x C x ...` (rank >= 3).
fn lrn(cx: &Ctx<'_>, a: &LrnAttrs, prog: &mut Program) -> Result<(), Error> {
    cx.all_f32()?;
    let (x, y) = (cx.input(0)?, cx.output()?);
    let xs = &cx.ty(x).shape;
    if xs.len() < 3 {
        return Err(cx.err("no kernel for LRN on an input of rank < 3"));
    }
    let desc = LrnDesc {
        n: xs[0],
        c: xs[1],
        inner: prod(&xs[2..]),
        size: a.size,
        alpha: a.alpha,
        beta: a.beta,
        bias: a.bias,
    };
    let (node, opn) = cx.label();
    let (xa, ya) = (cx.arena(x)?, cx.arena(y)?);
    if xa != ya {
        let f = prog.kernel(format!("lrn {desc:?}"), 2, (&node, &opn), |b, p, _| {
            desc.emit(b, p[0], p[1])
        })?;
        prog.call(f, vec![xa, ya]);
        return Ok(());
    }
    // Planned in place: the ring of input planes lives in the node's scratch, sized by the
    // same function the planner used (`Op::scratch_bytes`).
    let need = crate::codegen::kernels::lrn::lrn_scratch_bytes(xs, a.size);
    let ring = cx.scratch()?;
    if ring == Operand::Null || dense::planned_scratch(cx) < need {
        return Err(cx.err(format!(
            "LRN planned in place without its {need}-byte scratch ring (a planner bug)"
        )));
    }
    let f = prog.kernel(
        format!("lrn in place {desc:?}"),
        3,
        (&node, &opn),
        |b, p, _| desc.emit_in_place(b, p[0], p[1], p[2]),
    )?;
    prog.call(f, vec![xa, ya, ring]);
    Ok(())
}

/// GlobalMaxPool on f32: a max reduction over the spatial dims.
fn global_max_pool(cx: &Ctx<'_>, prog: &mut Program) -> Result<(), Error> {
    cx.all_f32()?;
    let (x, y) = (cx.input(0)?, cx.output()?);
    let xs = &cx.ty(x).shape;
    if xs.len() < 2 {
        return Err(cx.err("GlobalMaxPool input must have rank >= 2"));
    }
    let axes: Vec<usize> = (2..xs.len()).collect();
    let desc = ReduceDesc::new(ReduceKind::Max, xs, &axes);
    let (node, opn) = cx.label();
    let f = prog.kernel(format!("reduce {desc:?}"), 2, (&node, &opn), |b, p, _| {
        desc.emit(b, p[0], p[1])
    })?;
    prog.call(f, vec![cx.arena(x)?, cx.arena(y)?]);
    Ok(())
}
