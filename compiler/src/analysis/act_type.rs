//! `retype_activations`: `--activations f16|bf16` — the graph's f32 intermediates stored in
//! 16 bits, computed in f32 and rounded once on store. Run by [`crate::arena::plan_graph`]
//! before fusion and planning, so the planner, which sizes buffers by dtype, plans the
//! narrow arena (and the budget, the plan report and `--batch auto` see it).
//!
//! Each node, in order, becomes one of:
//! - **native**: an op whose kernels take f16/bf16 data (movement and views move bytes; the
//!   typed element-wise kernels compute in f32 and round on store): its f32 data operands are
//!   read in their narrow form (a small f32 constant operand is converted once at compile
//!   time), its f32 outputs become narrow, checked by the op's own inference; `Cast(to f32)`
//!   becomes `Cast(to narrow)`;
//! - **staged** ([`staged`]): Conv, pooling, GlobalAveragePool, Gemm/MatMul, Softmax,
//!   LayerNormalization, the one-input activations and SiLU (`Sigmoid` + `Mul`, made one
//!   fused node here as fusion would in f32), whose 16-bit kernels
//!   (`crate::gemm::stage16`) widen a row band, plane or row block of the narrow input into
//!   small f32 scratch, run the f32 kernel and narrow the result into the output: narrow data
//!   in and out, f32 weights (constants keep their type: `--weights` decides theirs);
//! - **kept in f32**: everything else (control flow, ops with f32 kernels only): its narrow
//!   inputs are cast to f32 and its f32 outputs are narrowed when a narrow reader needs them
//!   (each value cast at most once each way). These are listed ([`ActReport::kept`]): their
//!   f32 operands are full-size and count in the arena.
//!
//! Graph outputs keep their declared types (a Cast at the end). So do graph inputs, except
//! that [`retype_activations_with`] asked to narrow inputs (what [`crate::arena::plan_graph`]
//! does for a model, not for the subgraphs of control nodes) stores an f32 input whose every
//! reader takes its narrow form — the wide value read by nothing else (no node kept in f32,
//! not a graph output) — in the narrow type itself: no Cast, its arena slot holds the 16-bit
//! form and the session rounds the user's f32 data into it on copy-in
//! ([`crate::codegen::IoSlot::store`], the Cast kernel's bits), so the f32 image is never in
//! the arena beside its narrow copy. These are listed ([`ActReport::narrowed_inputs`]); the
//! code generator gives them their declared f32 type in their `IoSlot`. A graph without f32
//! intermediates (an f16 model) is left alone, with a note.

use std::collections::{HashMap, HashSet};

pub mod storage;
pub use storage::{ActivationsStorage, KeptNode};

use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::types::{DType, TensorType};
use crate::ops::{Op, PoolAttrs, UnaryOp};

/// The storage type of activations (intermediates).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ActType {
    /// As computed (f32): nothing changes.
    #[default]
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16 (the top half of an f32, rounded to nearest even).
    Bf16,
}

impl ActType {
    /// Every type, widest first.
    pub const ALL: [ActType; 3] = [ActType::F32, ActType::F16, ActType::Bf16];

    /// The name on the command line and in reports: `f32`, `f16`, `bf16`.
    pub fn name(self) -> &'static str {
        match self {
            ActType::F32 => "f32",
            ActType::F16 => "f16",
            ActType::Bf16 => "bf16",
        }
    }

    /// Parses [`ActType::name`].
    pub fn parse(s: &str) -> Option<ActType> {
        ActType::ALL.into_iter().find(|t| t.name() == s)
    }

    /// The element type intermediates are stored in.
    pub fn dtype(self) -> DType {
        match self {
            ActType::F32 => DType::F32,
            ActType::F16 => DType::F16,
            ActType::Bf16 => DType::BF16,
        }
    }
}

/// What [`retype_activations`] did (kept with the plan, shown by the summary and the report).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActReport {
    /// The activations type asked for.
    pub act: ActType,
    /// Nodes whose data is now narrow (native or staged).
    pub narrow_nodes: usize,
    /// Of those, nodes run by a staged 16-bit kernel.
    pub staged_nodes: usize,
    /// Cast nodes added (at graph inputs/outputs and around nodes kept in f32).
    pub casts: usize,
    /// Constants converted to the narrow type for native nodes.
    pub constants: usize,
    /// Nodes kept in f32 (no 16-bit path): `(node, op)`, in order.
    pub kept: Vec<(String, String)>,
    /// Notes for the user (e.g. nothing to retype).
    pub notes: Vec<String>,
    /// Graph inputs (declared f32) stored in the narrow type, rounded on copy-in: their
    /// names, in graph-input order.
    pub narrowed_inputs: Vec<String>,
}

impl ActReport {
    /// Whether graph input `name` is stored narrowed ([`ActReport::narrowed_inputs`]).
    pub fn input_narrowed(&self, name: &str) -> bool {
        self.narrowed_inputs.iter().any(|n| n == name)
    }
}

/// Whether node op `op` has a staged 16-bit kernel for data `x` (its first input, f32 before
/// retyping) — the lowering of `crate::codegen::lower::act16` takes exactly these.
pub fn staged(op: &Op, inputs: &[&TensorType], constant: &[bool]) -> bool {
    let Some(x) = inputs.first() else {
        return false;
    };
    let rank = x.shape.len();
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape.as_slice()).collect();
    match op {
        Op::Conv(_) => (rank == 4 || rank == 3) && constant.get(1).copied().unwrap_or(false),
        Op::ConvTranspose(a) => {
            crate::ops::stage16::convt_stage(a, &shapes, constant, None, 1).is_some()
        }
        Op::MaxPool(a) | Op::AveragePool(a) => pool2d(a, rank),
        Op::GlobalAveragePool => rank >= 3,
        Op::Unary(u) => unary16(u),
        Op::FusedElementwise(_) => {
            crate::gemm::stage16::ew::Program::of(op, inputs.len()).is_some()
        }
        Op::Gemm(_) | Op::MatMul => {
            crate::ops::stage16::mm_stage(op, &shapes, constant, 1).is_some()
        }
        Op::Softmax { .. } | Op::LayerNormalization { .. } => {
            crate::ops::stage16::row_stage(op, &shapes, constant).is_some()
        }
        _ => false,
    }
}

/// 2-d (or 1-d) pooling with one output (no Indices), as `arenac_pool2d` takes it.
fn pool2d(a: &PoolAttrs, rank: usize) -> bool {
    (rank == 4 || rank == 3) && a.kernel.len() + 2 == rank
}

/// The one-input activations with a 16-bit kernel (`crate::gemm::stage16::unary`).
pub fn unary16(u: &UnaryOp) -> bool {
    matches!(
        u,
        UnaryOp::Relu
            | UnaryOp::LeakyRelu { .. }
            | UnaryOp::Clip { .. }
            | UnaryOp::Sigmoid
            | UnaryOp::Tanh
            | UnaryOp::Erf
            | UnaryOp::Gelu { .. }
            | UnaryOp::HardSigmoid { .. }
            | UnaryOp::HardSwish
            | UnaryOp::Sqrt
            | UnaryOp::Reciprocal
            | UnaryOp::Exp
            | UnaryOp::Log
    )
}

/// Retypes `g`'s f32 intermediates to `act` (the module doc); nothing for [`ActType::F32`].
/// Graph inputs keep their types ([`retype_activations_with`] may narrow them).
pub fn retype_activations(g: &mut Graph, act: ActType) -> ActReport {
    retype_activations_with(g, act, false)
}

/// [`retype_activations`], and with `narrow_inputs` each f32 graph input whose every reader
/// takes its narrow form is itself retyped to the narrow type, its Cast dropped (the module
/// doc; listed in [`ActReport::narrowed_inputs`]). The graph is built twice then: the first
/// build finds those inputs, the second starts from their narrow form and, deciding every
/// node as the first did, makes the same graph without their Casts.
pub fn retype_activations_with(g: &mut Graph, act: ActType, narrow_inputs: bool) -> ActReport {
    let Some((ng, report, narrowing)) = build(g, act, &HashSet::new()) else {
        return nothing_to_retype(act);
    };
    let pre: HashSet<ValueId> = if narrow_inputs {
        g.inputs
            .iter()
            .zip(&ng.inputs)
            .filter(|&(&v, &w)| {
                g.value(v).ty.dtype == DType::F32
                    && g.value(v).ty.numel().is_some()
                    && !ng.outputs.contains(&w)
                    && {
                        let readers = ng.consumers(w);
                        !readers.is_empty() && readers.iter().all(|r| narrowing.contains(r))
                    }
            })
            .map(|(&v, _)| v)
            .collect()
    } else {
        HashSet::new()
    };
    let (ng, report) = if pre.is_empty() {
        (ng, report)
    } else {
        match build(g, act, &pre) {
            // The second build decides as the first did, so no narrowed input is widened
            // again; were one, the first graph (its Cast kept) is the better.
            Some((ng2, report2, _)) if !widens_an_input(&ng2, &report2) => (ng2, report2),
            _ => (ng, report),
        }
    };
    *g = ng;
    report
}

/// Whether a Cast to f32 reads an input of retyped graph `g` that `r` lists as narrowed.
fn widens_an_input(g: &Graph, r: &ActReport) -> bool {
    g.inputs.iter().any(|&v| {
        r.input_narrowed(&g.value(v).name)
            && g.consumers(v)
                .iter()
                .any(|&c| matches!(g.node(c).op, Op::Cast { to: DType::F32, .. }))
    })
}

/// The report of a retyping that changed nothing (f32, or no f32 intermediates).
fn nothing_to_retype(act: ActType) -> ActReport {
    let mut report = ActReport {
        act,
        ..ActReport::default()
    };
    if act != ActType::F32 {
        report.notes.push(format!(
            "--activations {}: the model has no f32 intermediates; nothing to retype",
            act.name()
        ));
    }
    report
}

/// The retyped graph of `g`, its report and the narrowing Casts it made (new node ids);
/// `None` when nothing is retyped. The graph inputs in `pre` are narrow values of the new
/// graph, under their own names.
fn build(
    g: &Graph,
    act: ActType,
    pre: &HashSet<ValueId>,
) -> Option<(Graph, ActReport, HashSet<NodeId>)> {
    let report = ActReport {
        act,
        ..ActReport::default()
    };
    if act == ActType::F32 {
        return None;
    }
    let any_f32 = g
        .nodes()
        .any(|(_, n)| n.outputs.iter().any(|&v| g.value(v).ty.dtype == DType::F32));
    if !any_f32 {
        return None;
    }
    let mut b = Builder {
        g,
        ng: Graph::new(g.name.clone(), g.opset),
        nt: act.dtype(),
        wide: HashMap::new(),
        narrow: HashMap::new(),
        names: g.values().iter().map(|v| v.name.clone()).collect(),
        report,
        skip: HashSet::new(),
        pre,
        narrowing: HashSet::new(),
    };
    for v in g.value_ids() {
        let val = g.value(v);
        if pre.contains(&v) {
            let ty = TensorType::new(b.nt, val.ty.shape.clone());
            let id = b.ng.add_value(val.name.clone(), ty, val.kind.clone());
            b.narrow.insert(v, id);
        } else if !matches!(val.kind, ValueKind::Computed(_)) {
            let id =
                b.ng.add_value(val.name.clone(), val.ty.clone(), val.kind.clone());
            b.wide.insert(v, id);
        }
    }
    for (id, _) in g.nodes() {
        b.node(id);
    }
    let outs: Vec<ValueId> = g
        .outputs
        .iter()
        .map(|&v| b.wide_form(v, "output"))
        .collect();
    b.ng.inputs = g
        .inputs
        .iter()
        .map(|&v| match b.narrow.get(&v) {
            Some(&n) if pre.contains(&v) => n,
            _ => b.wide_form(v, "input"),
        })
        .collect();
    b.ng.outputs = outs;
    b.report.narrowed_inputs = g
        .inputs
        .iter()
        .filter(|v| pre.contains(v))
        .map(|&v| g.value(v).name.clone())
        .collect();
    Some((b.ng, b.report, b.narrowing))
}

/// Builds the retyped graph. Every old value has its form as typed in the old graph
/// (`wide`: f32 for the retyped ones) and/or its narrow form (`narrow`); the missing one is
/// made by a Cast on demand.
struct Builder<'a> {
    g: &'a Graph,
    ng: Graph,
    nt: DType,
    wide: HashMap<ValueId, ValueId>,
    narrow: HashMap<ValueId, ValueId>,
    names: HashSet<String>,
    report: ActReport,
    /// Old nodes already emitted as part of another (the Mul of a SiLU).
    skip: HashSet<NodeId>,
    /// Graph inputs made narrow from the start (`build`'s `pre`).
    pre: &'a HashSet<ValueId>,
    /// The narrowing Casts made (new node ids).
    narrowing: HashSet<NodeId>,
}

impl Builder<'_> {
    fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        while self.names.contains(&name) {
            name.push('_');
        }
        self.names.insert(name.clone());
        name
    }

    fn is_f32_data(&self, v: ValueId) -> bool {
        self.g.value(v).ty.dtype == DType::F32
    }

    fn is_const(&self, v: ValueId) -> bool {
        matches!(self.g.value(v).kind, ValueKind::Constant(_))
    }

    /// Old value `v` as typed in the old graph (a Cast from its narrow form if needed).
    fn wide_form(&mut self, v: ValueId, reader: &str) -> ValueId {
        if let Some(&w) = self.wide.get(&v) {
            return w;
        }
        let val = self.g.value(v);
        let (name, ty) = (val.name.clone(), val.ty.clone());
        let Some(&n) = self.narrow.get(&v) else {
            // Unreachable for a topologically ordered graph; keep the old id's slot valid.
            return v;
        };
        // A graph output takes its own name; other f32 copies are named after it.
        let out_name = if self.g.outputs.contains(&v) && !self.names_taken_by_new(&name) {
            self.names.insert(name.clone());
            name.clone()
        } else {
            self.fresh(&format!("{name}.f32"))
        };
        let cname = self.fresh(&format!("{reader}.widen.{name}"));
        let c = self
            .ng
            .add_node(cname, Op::cast(DType::F32), &[n], &[(out_name, ty)]);
        self.report.casts += 1;
        let w = self.ng.node(c).outputs[0];
        self.wide.insert(v, w);
        w
    }

    /// Whether `name` is already a value of the new graph.
    fn names_taken_by_new(&self, name: &str) -> bool {
        self.ng.values().iter().any(|v| v.name == name)
    }

    /// Old f32 value `v` in the narrow type: a converted constant or a Cast (made once).
    fn narrow_form(&mut self, v: ValueId, reader: &str) -> ValueId {
        if let Some(&n) = self.narrow.get(&v) {
            return n;
        }
        let val = self.g.value(v);
        let ty = TensorType::new(self.nt, val.ty.shape.clone());
        let name = self.fresh(&format!("{}.{}", val.name, self.nt.name()));
        let cast = Op::cast(self.nt);
        let converted = match &val.kind {
            ValueKind::Constant(t) => cast.eval(&[t]).ok().and_then(|mut r| r.pop()),
            _ => None,
        };
        let n = match converted {
            Some(t) => {
                self.report.constants += 1;
                self.ng.add_value(name, ty, ValueKind::Constant(t))
            }
            None => {
                let src = self.wide_form(v, reader);
                let cname = self.fresh(&format!("{reader}.narrow.{}", val.name));
                self.report.casts += 1;
                let c = self.ng.add_node(cname, cast, &[src], &[(name, ty)]);
                self.narrowing.insert(c);
                self.ng.node(c).outputs[0]
            }
        };
        self.narrow.insert(v, n);
        n
    }

    /// Emits old node `id` as native, staged or kept.
    fn node(&mut self, id: NodeId) {
        if self.skip.contains(&id) {
            return;
        }
        if self.silu(id) {
            return;
        }
        let n = self.g.node(id);
        let in_tys: Vec<&TensorType> = n.inputs.iter().map(|&v| &self.g.value(v).ty).collect();
        let consts: Vec<bool> = n.inputs.iter().map(|&v| self.is_const(v)).collect();
        let f32_data = n
            .inputs
            .iter()
            .chain(&n.outputs)
            .any(|&v| self.is_f32_data(v) && !self.is_const(v));
        if !f32_data || self.output_in_f32(id) {
            self.copy(id, false);
            return;
        }
        let first_f32 = n.inputs.first().is_some_and(|&v| self.is_f32_data(v));
        if first_f32 && staged(&n.op, &in_tys, &consts) {
            self.staged(id);
        } else if !self.native(id) {
            self.copy(id, true);
        }
    }

    /// Whether node `id`, whose outputs are all f32 graph outputs, computes in f32 and writes
    /// them directly: when widening its narrow inputs costs fewer bytes than a narrow copy of
    /// its outputs. Otherwise its narrow outputs would live beside their f32 forms (the Casts
    /// at the graph's end), and an output that is the peak (a decoder's logits, a
    /// classifier's scores) would plan a larger arena than f32 activations do.
    fn output_in_f32(&self, id: NodeId) -> bool {
        let n = self.g.node(id);
        let bytes = |v: ValueId, elem: usize| {
            self.g
                .value(v)
                .ty
                .numel()
                .unwrap_or(usize::MAX)
                .saturating_mul(elem)
        };
        if n.outputs.is_empty()
            || !n
                .outputs
                .iter()
                .all(|&v| self.g.outputs.contains(&v) && self.is_f32_data(v))
        {
            return false;
        }
        let narrow_out: usize = n
            .outputs
            .iter()
            .fold(0, |a, &v| a.saturating_add(bytes(v, self.nt.size())));
        let widened: usize = n
            .inputs
            .iter()
            // A narrowed input counts as in the first build, where it was wide.
            .filter(|&&v| {
                self.is_f32_data(v)
                    && !self.is_const(v)
                    && !self.wide.contains_key(&v)
                    && !self.pre.contains(&v)
            })
            .fold(0, |a, &v| a.saturating_add(bytes(v, 4)));
        widened < narrow_out
    }

    /// `s = Sigmoid(x)` read only by `Mul(x, s)` (either order): emitted as one staged
    /// fused node `x * sigmoid(x)` with the Mul's output (what element-wise fusion makes of it
    /// in f32), so a Conv before it applies SiLU in its epilogue and no buffer holds `s`.
    fn silu(&mut self, id: NodeId) -> bool {
        use crate::ops::{BinaryOp, FusedArg, FusedAttrs, FusedStep};
        let n = self.g.node(id);
        if n.op != Op::Unary(UnaryOp::Sigmoid) || n.inputs.len() != 1 || n.outputs.len() != 1 {
            return false;
        }
        let (x, sv) = (n.inputs[0], n.outputs[0]);
        if !self.is_f32_data(x) || self.is_const(x) || self.g.outputs.contains(&sv) {
            return false;
        }
        let [m] = self.g.consumers(sv)[..] else {
            return false;
        };
        let mn = self.g.node(m);
        let x_first = mn.inputs[..] == [x, sv];
        if mn.op != Op::Binary(BinaryOp::Mul) || !(x_first || mn.inputs[..] == [sv, x]) {
            return false;
        }
        let (a, b) = (FusedArg::Input(0), FusedArg::Step(0));
        let steps = vec![
            FusedStep {
                op: Op::Unary(UnaryOp::Sigmoid),
                args: vec![a.clone()],
            },
            FusedStep {
                op: Op::Binary(BinaryOp::Mul),
                args: if x_first { vec![a, b] } else { vec![b, a] },
            },
        ];
        let xin = self.narrow_form(x, &mn.name);
        let t = TensorType::new(self.nt, self.g.value(mn.outputs[0]).ty.shape.clone());
        let outs = self.narrow_outputs(m, std::slice::from_ref(&t));
        let op = Op::FusedElementwise(FusedAttrs { steps });
        let nid = self.ng.add_node(mn.name.clone(), op, &[xin], &outs);
        self.record_outputs(m, nid);
        self.skip.insert(m);
        self.report.narrow_nodes += 1;
        self.report.staged_nodes += 1;
        true
    }

    /// The node with its old types (inputs in their old form), f32 outputs widened on
    /// demand later; listed as kept when it touches f32 data.
    fn copy(&mut self, id: NodeId, listed: bool) {
        let n = self.g.node(id);
        let ins: Vec<ValueId> = n
            .inputs
            .iter()
            .map(|&v| self.wide_form(v, &n.name))
            .collect();
        let outs: Vec<(String, TensorType)> = n
            .outputs
            .iter()
            .map(|&v| (self.g.value(v).name.clone(), self.g.value(v).ty.clone()))
            .collect();
        let nid = self.ng.add_node(n.name.clone(), n.op.clone(), &ins, &outs);
        for (&old, &new) in n.outputs.iter().zip(&self.ng.node(nid).outputs) {
            self.wide.insert(old, new);
        }
        if listed {
            self.report
                .kept
                .push((n.name.clone(), n.op.name().to_string()));
        }
    }

    /// Outputs of node `id`: each f32 one in the narrow type (a graph output renamed, its
    /// f32 form made at the end).
    fn narrow_outputs(&mut self, id: NodeId, types: &[TensorType]) -> Vec<(String, TensorType)> {
        let n = self.g.node(id);
        n.outputs
            .iter()
            .zip(types)
            .map(|(&v, t)| {
                let val = self.g.value(v);
                let name = if val.ty.dtype == DType::F32 && self.g.outputs.contains(&v) {
                    self.fresh(&format!("{}.{}", val.name, self.nt.name()))
                } else {
                    val.name.clone()
                };
                (name, t.clone())
            })
            .collect()
    }

    fn record_outputs(&mut self, id: NodeId, nid: NodeId) {
        let n = self.g.node(id);
        for (&old, &new) in n.outputs.iter().zip(&self.ng.node(nid).outputs) {
            if self.is_f32_data(old) {
                self.narrow.insert(old, new);
            } else {
                self.wide.insert(old, new);
            }
        }
    }

    /// Emits node `id` with narrow data if its op infers the narrow types; false otherwise.
    fn native(&mut self, id: NodeId) -> bool {
        let n = self.g.node(id);
        if matches!(
            n.op,
            Op::If(_) | Op::Loop(_) | Op::Binary(crate::ops::BinaryOp::Pow)
        ) || crate::analysis::widen::widens(&n.op, DType::F16)
        {
            return false;
        }
        let op = match &n.op {
            Op::Cast { to: DType::F32, .. } => Op::cast(self.nt),
            op => op.clone(),
        };
        let narrow_ty = |t: &TensorType| {
            if t.dtype == DType::F32 {
                TensorType::new(self.nt, t.shape.clone())
            } else {
                t.clone()
            }
        };
        let in_types: Vec<TensorType> = n
            .inputs
            .iter()
            .map(|&v| narrow_ty(&self.g.value(v).ty))
            .collect();
        let want: Vec<TensorType> = n
            .outputs
            .iter()
            .map(|&v| narrow_ty(&self.g.value(v).ty))
            .collect();
        if op.infer(&in_types).ok().as_ref() != Some(&want) {
            return false;
        }
        let ins: Vec<ValueId> = n
            .inputs
            .iter()
            .map(|&v| {
                if self.is_f32_data(v) {
                    self.narrow_form(v, &n.name)
                } else {
                    self.wide_form(v, &n.name)
                }
            })
            .collect();
        let outs = self.narrow_outputs(id, &want);
        let nid = self.ng.add_node(n.name.clone(), op, &ins, &outs);
        self.record_outputs(id, nid);
        self.report.narrow_nodes += 1;
        true
    }

    /// Emits staged node `id`: narrow data in and out, constants as they are.
    fn staged(&mut self, id: NodeId) {
        let n = self.g.node(id);
        let ins: Vec<ValueId> = n
            .inputs
            .iter()
            .map(|&v| {
                if self.is_f32_data(v) && !self.is_const(v) {
                    self.narrow_form(v, &n.name)
                } else {
                    self.wide_form(v, &n.name)
                }
            })
            .collect();
        let types: Vec<TensorType> = n
            .outputs
            .iter()
            .map(|&v| {
                let t = &self.g.value(v).ty;
                if t.dtype == DType::F32 {
                    TensorType::new(self.nt, t.shape.clone())
                } else {
                    t.clone()
                }
            })
            .collect();
        let outs = self.narrow_outputs(id, &types);
        let nid = self.ng.add_node(n.name.clone(), n.op.clone(), &ins, &outs);
        self.record_outputs(id, nid);
        self.report.narrow_nodes += 1;
        self.report.staged_nodes += 1;
    }
}

#[cfg(test)]
mod tests;
