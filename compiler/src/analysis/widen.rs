//! `widen_floats`: nodes whose op has an f32 kernel but none for their f16, bf16 or f64 data
//! are rewritten to compute in f32:
//!
//! ```text
//!   y:f16 = MatMul(a:f16, b:f16)
//! becomes
//!   a.f32 = Cast<f32>(a)   b.f32 = Cast<f32>(b)   (a constant input is converted in place)
//!   y.f32 = MatMul(a.f32, b.f32)
//!   y:f16 = Cast<f16>(y.f32)
//! ```
//!
//! so the result is the op computed in f32 and rounded once to the original dtype (round to
//! nearest even, the Cast kernel's rounding) — what the element-wise f16/bf16 kernels already
//! do inside one loop. f16 and bf16 widen exactly (every value is an f32); an f64 operand is
//! rounded to f32 first, so a widened f64 node carries f32 precision (relative error about
//! 1e-7, well inside the backend tests' `rtol = 1e-3`).
//!
//! It runs at the end of import (after folding: constant nodes never reach it) and before
//! planning. Only inputs and outputs of the node's own float dtype (that of its first input)
//! are cast; others (integer operands, a Pow exponent of another dtype, MaxPool's i64
//! indices, LayerNormalization's f32 statistics) are left as they are. The f32 op's outputs
//! are re-inferred; a node whose f32 form does not infer, or infers other shapes, is left
//! alone (its lowering then reports the missing kernel). An f16 value read by several widened
//! nodes is cast once. The f32→narrow→f32 casts between two widened nodes stay: each rounds,
//! as the original graph does. Casts are typed ops, not fusible, so [`super::fuse`] works on
//! the f32 element-wise chains between them unchanged.
//!
//! Rounding once is not what ONNX's reference (numpy) does for Softmax in f16/bf16: it
//! rounds each step (`x - max`, `exp`, the sum, the quotient) to the narrow type, as the
//! op's function body (ReduceMax, Sub, Exp, ReduceSum, Div) reads in that type, and
//! ml_dtypes' bf16 sum rounds every addition. Results then differ by one unit in the last
//! place now and then, which the backend tests' `rtol = 1e-3` does not cover for bf16 (nor,
//! sometimes, for f16): the expanded f16/bf16 Attention cases that fail do so there.
//!
//! # The table ([`widens`])
//!
//! For a node whose first input is f16, bf16 or f64 (or i8/u8 for MaxPool):
//!
//! | op | widened | why |
//! |---|---|---|
//! | MatMul, Gemm, Conv, ConvTranspose | yes | the GEMM/conv core is f32 |
//! | MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool | yes | f32 pooling kernels (MaxPool on i8/u8 too) |
//! | BatchNormalization, LayerNormalization, InstanceNormalization, GroupNormalization, MeanVarianceNormalization, RMSNormalization, LRN, Softmax, LogSoftmax | yes | f32 kernels |
//! | Reduce*, ArgMax/ArgMin, Hardmax, CumSum/CumProd, TopK, LpNormalization, LpPool | f16/bf16 only | native f32/f64/integer kernels (ArgMax and TopK widen exactly: the order of values is kept) |
//! | Resize other than nearest | yes | linear is f32 (nearest is a byte gather: any dtype) |
//! | DFT, STFT | yes | the FFT kernel (`crate::fft`) is f32 |
//! | Relu, LeakyRelu, Clip, Sigmoid, Tanh, Erf, Gelu, HardSigmoid, HardSwish, Sqrt, Reciprocal, Exp, Log | yes | f32x4 kernels only |
//! | PRelu, Mean (variadic) | yes | f32x4 kernels only |
//! | Neg, Abs, Math ops (Sin, Floor, Celu...), Add/Sub/Mul/Div, Mod, comparisons, Sum/Max/Min, Where, Cast, movement and views | no | typed kernels for every float dtype (Math on f64: exact ones only, the others stay an error) |
//! | Pow | no | the typed-kernel error on f16/bf16/f64 is pinned by a test; widening it is one line here |
//!
//! Integer and bool dtypes are not widened, except MaxPool on i8/u8 (exact: every 8-bit
//! integer is an f32, and a max returns one of its inputs; a node with a window made only
//! of padding is left alone); an integer result computed in
//! f32 would otherwise be truncated from a rounded value.

use std::collections::{HashMap, HashSet};

use crate::ir::graph::{Graph, NodeId, ValueId, ValueKind};
use crate::ir::types::{DType, TensorType};
use crate::ops::resize::ResizeMode;
use crate::ops::{BinaryOp, Op, PoolAttrs, UnaryOp, VariadicOp};

/// What [`widen_floats`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WidenStats {
    /// Nodes now computed in f32.
    pub nodes: usize,
    /// Cast nodes added (to f32 and back).
    pub casts: usize,
    /// Constants converted to f32 at compile time.
    pub constants: usize,
}

/// Whether a node computing `op` on float dtype `dt` is widened to f32 (the table in the
/// module doc). False for f32 and every non-float dtype but MaxPool's i8/u8.
pub fn widens(op: &Op, dt: DType) -> bool {
    if matches!(op, Op::MaxPool(_)) && matches!(dt, DType::I8 | DType::U8) {
        // Exact: every 8-bit integer is an f32 and a max picks one of its inputs (when no
        // window is all padding: checked per node).
        return true;
    }
    if !matches!(dt, DType::F16 | DType::BF16 | DType::F64) {
        return false;
    }
    match op {
        Op::MatMul | Op::Gemm(_) | Op::Conv(_) | Op::ConvTranspose(_) => true,
        Op::MaxPool(_) | Op::AveragePool(_) | Op::GlobalAveragePool | Op::GlobalMaxPool => true,
        Op::BatchNormalization { .. }
        | Op::LayerNormalization { .. }
        | Op::InstanceNormalization { .. }
        | Op::GroupNormalization { .. }
        | Op::MeanVarianceNormalization { .. }
        | Op::RmsNormalization { .. }
        | Op::Lrn(_)
        | Op::Softmax { .. } => true,
        // Native f32, f64 and integer kernels; none for f16/bf16.
        Op::Reduce(_)
        | Op::ArgReduce(_)
        | Op::Hardmax { .. }
        | Op::CumScan(_)
        | Op::TopK(_)
        | Op::LpNormalization { .. }
        | Op::LpPool(_) => dt != DType::F64,
        Op::Resize(a) => !matches!(a.mode, ResizeMode::Nearest),
        Op::Dft(_) | Op::Stft(_) => true,
        // Dropout and TensorScatter move bytes of any type.
        Op::Sample(s) => !matches!(
            s,
            crate::ops::SampleOp::Dropout(_) | crate::ops::SampleOp::TensorScatter(_)
        ),
        Op::Unary(u) => matches!(
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
        ),
        Op::Binary(b) => matches!(b, BinaryOp::PRelu),
        Op::Variadic(v) => matches!(v, VariadicOp::Mean),
        _ => false,
    }
}

/// Rewrites every node [`widens`] selects (see the module doc); names of existing values do
/// not change (a widened node's f32 outputs are named `<output>.f32`).
pub fn widen_floats(g: &mut Graph) -> WidenStats {
    let plans: HashMap<NodeId, Widened> = g
        .nodes()
        .filter_map(|(id, _)| plan_node(g, id).map(|w| (id, w)))
        .collect();
    if plans.is_empty() {
        return WidenStats::default();
    }
    let (ng, stats) = rebuild(g, &plans);
    *g = ng;
    stats
}

/// One widened node: its narrow dtype and the f32 op's output types.
struct Widened {
    dt: DType,
    out_types: Vec<TensorType>,
}

/// The widening of node `id`, if the table selects it and its f32 form infers the same shapes.
fn plan_node(g: &Graph, id: NodeId) -> Option<Widened> {
    let n = g.node(id);
    let dt = g.value(*n.inputs.first()?).ty.dtype;
    if !widens(&n.op, dt) {
        return None;
    }
    if let Op::MaxPool(a) = &n.op
        && !dt.is_float()
    {
        // A window made only of padding gives the dtype's lowest value in the reference;
        // in f32 it would be f32's, which does not narrow back to it.
        let xs = &g.value(*n.inputs.first()?).ty.shape;
        let ys = &g.value(*n.outputs.first()?).ty.shape;
        if !every_window_reads_input(a, xs, ys) {
            return None;
        }
    }
    let in_types: Vec<TensorType> = n
        .inputs
        .iter()
        .map(|&v| widened_type(&g.value(v).ty, dt))
        .collect();
    let out_types = n.op.infer(&in_types).ok()?;
    let same_shapes = out_types.len() == n.outputs.len()
        && out_types
            .iter()
            .zip(&n.outputs)
            .all(|(t, &v)| t.shape == g.value(v).ty.shape);
    same_shapes.then_some(Widened { dt, out_types })
}

/// Whether every pooling window of `a` over an input of shape `xs` (output `ys`, both
/// `N x C x spatial`) covers at least one input element (not only padding).
fn every_window_reads_input(a: &PoolAttrs, xs: &[usize], ys: &[usize]) -> bool {
    let d = a.kernel.len();
    if xs.len() != d + 2 || ys.len() != d + 2 {
        return false;
    }
    (0..d).all(|i| {
        let (n, k) = (xs[i + 2] as i64, a.kernel[i] as i64);
        let s = a.strides.get(i).copied().unwrap_or(1) as i64;
        let dil = a.dilations.get(i).copied().unwrap_or(1) as i64;
        let p = a.pads.get(i).copied().unwrap_or(0) as i64;
        (0..ys[i + 2] as i64).all(|j| (0..k).any(|t| (0..n).contains(&(j * s - p + t * dil))))
    })
}

/// `ty` with f32 in place of `dt`.
fn widened_type(ty: &TensorType, dt: DType) -> TensorType {
    if ty.dtype == dt {
        TensorType::new(DType::F32, ty.shape.clone())
    } else {
        ty.clone()
    }
}

/// Builds the rewritten graph.
struct Builder<'a> {
    g: &'a Graph,
    ng: Graph,
    /// Old value → new value.
    map: HashMap<ValueId, ValueId>,
    /// Old value → its f32 form (a Cast output or a converted constant), made once.
    wide: HashMap<ValueId, ValueId>,
    names: HashSet<String>,
    stats: WidenStats,
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

    fn new_id(&self, v: ValueId) -> ValueId {
        self.map.get(&v).copied().unwrap_or(v)
    }

    /// The f32 form of old value `v` (of the narrow dtype): a constant converted at compile
    /// time, or the output of a Cast node added here.
    fn widened_input(&mut self, v: ValueId, node: &str) -> ValueId {
        if let Some(&w) = self.wide.get(&v) {
            return w;
        }
        let val = self.g.value(v);
        let ty = TensorType::new(DType::F32, val.ty.shape.clone());
        let name = self.fresh(&format!("{}.f32", val.name));
        let cast = Op::cast(DType::F32);
        let converted = match &val.kind {
            ValueKind::Constant(t) => cast.eval(&[t]).ok().and_then(|mut r| r.pop()),
            _ => None,
        };
        let w = match converted {
            Some(t) => {
                self.stats.constants += 1;
                self.ng.add_value(name, ty, ValueKind::Constant(t))
            }
            None => {
                self.stats.casts += 1;
                let src = self.new_id(v);
                let cname = self.fresh(&format!("{node}.widen.{}", val.name));
                let nid = self.ng.add_node(cname, cast, &[src], &[(name, ty)]);
                self.ng.node(nid).outputs[0]
            }
        };
        self.wide.insert(v, w);
        w
    }

    /// Emits node `id` widened by `w`.
    fn widened_node(&mut self, id: NodeId, w: &Widened) {
        let n = self.g.node(id);
        self.stats.nodes += 1;
        let ins: Vec<ValueId> = n
            .inputs
            .iter()
            .map(|&v| {
                if self.g.value(v).ty.dtype == w.dt {
                    self.widened_input(v, &n.name)
                } else {
                    self.new_id(v)
                }
            })
            .collect();
        let outs: Vec<(String, TensorType)> = n
            .outputs
            .iter()
            .zip(&w.out_types)
            .map(|(&v, t)| {
                let val = self.g.value(v);
                let name = if t.dtype == val.ty.dtype {
                    val.name.clone()
                } else {
                    self.fresh(&format!("{}.f32", val.name))
                };
                (name, t.clone())
            })
            .collect();
        let nid = self.ng.add_node(n.name.clone(), n.op.clone(), &ins, &outs);
        let wide_outs = self.ng.node(nid).outputs.clone();
        for ((&old, &new), t) in n.outputs.iter().zip(&wide_outs).zip(&w.out_types) {
            let val = self.g.value(old);
            if t.dtype == val.ty.dtype {
                self.map.insert(old, new);
                continue;
            }
            self.stats.casts += 1;
            let cname = self.fresh(&format!("{}.narrow.{}", n.name, val.name));
            let cast = Op::cast(val.ty.dtype);
            let c = self
                .ng
                .add_node(cname, cast, &[new], &[(val.name.clone(), val.ty.clone())]);
            let out = self.ng.node(c).outputs[0];
            self.map.insert(old, out);
        }
    }
}

/// A copy of `g` with each planned node widened. Input and constant values keep their
/// relative order, computed values theirs; the other nodes are copied unchanged.
fn rebuild(g: &Graph, plans: &HashMap<NodeId, Widened>) -> (Graph, WidenStats) {
    let mut b = Builder {
        g,
        ng: Graph::new(g.name.clone(), g.opset),
        map: HashMap::new(),
        wide: HashMap::new(),
        names: g.values().iter().map(|v| v.name.clone()).collect(),
        stats: WidenStats::default(),
    };
    for v in g.value_ids() {
        let val = g.value(v);
        if !matches!(val.kind, ValueKind::Computed(_)) {
            let id =
                b.ng.add_value(val.name.clone(), val.ty.clone(), val.kind.clone());
            b.map.insert(v, id);
        }
    }
    for (id, n) in g.nodes() {
        if let Some(w) = plans.get(&id) {
            b.widened_node(id, w);
            continue;
        }
        let ins: Vec<ValueId> = n.inputs.iter().map(|&v| b.new_id(v)).collect();
        let outs: Vec<(String, TensorType)> = n
            .outputs
            .iter()
            .map(|&v| (g.value(v).name.clone(), g.value(v).ty.clone()))
            .collect();
        let nid = b.ng.add_node(n.name.clone(), n.op.clone(), &ins, &outs);
        for (&old, &new) in n.outputs.iter().zip(b.ng.node(nid).outputs.iter()) {
            b.map.insert(old, new);
        }
    }
    b.ng.inputs = g.inputs.iter().map(|&v| b.new_id(v)).collect();
    b.ng.outputs = g.outputs.iter().map(|&v| b.new_id(v)).collect();
    (b.ng, b.stats)
}
