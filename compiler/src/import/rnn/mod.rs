//! LSTM, GRU and RNN as loops, expanded at import: per direction, the input projection of
//! every step is one MatMul over the whole sequence; then a `Scan` over the time axis runs one
//! body per step — a MatMul of the previous hidden state with the recurrent weights (a
//! constant transposed once at import and packed once at compile time, shared by every step),
//! Add/Mul/Sub and the activations per gate — carrying the hidden (and cell) state and
//! stacking the hidden states; Reshape + Concat give `Y`, `Y_h`, `Y_c`. So compile time and
//! memory do not grow with the sequence length. The nodes go through the importer's ordinary
//! path ([`emit`]), so weights that are initializers fold at import and every node is inferred
//! and verified like any other.
//!
//! Covered (ONNX opsets 7 to 28): directions forward / reverse / bidirectional, layout 0 and 1,
//! `initial_h`, `initial_c`, `B`, peepholes `P`, `linear_before_reset`, `activations` (with
//! `activation_alpha` / `activation_beta`), `clip`, `input_forget`, omitted optional outputs.
//! `sequence_lens` is accepted when every entry equals the sequence length; variable lengths
//! are a typed error.

mod act;
mod cells;
mod emit;

use arenac_proto::NodeProto;

use crate::error::{Error, OpError, Result};
use crate::ir::graph::ValueKind;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::ctx::NodeCtx;
use crate::ops::{MAX_OPSET, MIN_OPSET};

use super::Importer;
use act::Act;
use emit::Emitter;

/// The ops this module expands (from opset [`MIN_OPSET`] to [`MAX_OPSET`]); they are not in
/// the op registry (`ops::registry`), whose entries convert to one [`crate::ops::Op`].
pub const OPS: &[&str] = &["GRU", "LSTM", "RNN"];

/// Whether `op_type` is a recurrent op this module expands.
pub(super) fn is_recurrent(op_type: &str) -> bool {
    OPS.contains(&op_type)
}

/// Which recurrence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Lstm,
    Gru,
    Rnn,
}

impl Kind {
    /// Gates stacked in W and R.
    fn gates(self) -> usize {
        match self {
            Kind::Lstm => 4,
            Kind::Gru => 3,
            Kind::Rnn => 1,
        }
    }

    /// Default activations of one direction.
    fn default_acts(self) -> &'static [&'static str] {
        match self {
            Kind::Lstm => &["Sigmoid", "Tanh", "Tanh"],
            Kind::Gru => &["Sigmoid", "Tanh"],
            Kind::Rnn => &["Tanh"],
        }
    }

    /// Outputs the op defines.
    fn outputs(self) -> usize {
        if self == Kind::Lstm { 3 } else { 2 }
    }
}

/// Everything the expansion needs, checked.
struct Spec {
    kind: Kind,
    dtype: DType,
    /// One entry per direction: true when it runs backwards in time.
    reverse: Vec<bool>,
    seq: usize,
    batch: usize,
    hidden: usize,
    /// 0: time-major `[seq, batch, ..]`; 1: batch-major `[batch, seq, ..]`.
    layout: usize,
    x: String,
    w: String,
    r: String,
    b: Option<String>,
    h0: Option<String>,
    c0: Option<String>,
    p: Option<String>,
    /// `Kind::default_acts().len()` per direction, direction 0 first.
    acts: Vec<Act>,
    clip: Option<f32>,
    input_forget: bool,
    linear_before_reset: bool,
    /// Declared output names (Y, Y_h, Y_c), `None` when omitted.
    outs: Vec<Option<String>>,
}

impl Spec {
    /// Activation `k` of direction `d`.
    fn act(&self, d: usize, k: usize) -> &Act {
        &self.acts[d * self.kind.default_acts().len() + k]
    }
}

/// Expands recurrent node `node` (file position `index`, message label `label`) into the graph.
pub(super) fn expand(
    imp: &mut Importer,
    node: &NodeProto,
    index: usize,
    label: &str,
) -> Result<()> {
    let op = node.op_type().to_string();
    let opset = imp.graph.opset;
    if opset < MIN_OPSET {
        return Err(Error::UnsupportedOpset {
            domain: String::new(),
            version: opset,
            supported: format!("{MIN_OPSET} to {MAX_OPSET} for {op}, needed by node '{label}'"),
        });
    }
    let node_err = |source: OpError| Error::Node {
        node: label.to_string(),
        op: op.clone(),
        source,
    };
    let spec = parse(imp, node).map_err(node_err)?;
    let mut em = Emitter::new(imp, label, index, spec.dtype);
    let mut dirs = Vec::with_capacity(spec.reverse.len());
    for d in 0..spec.reverse.len() {
        dirs.push(cells::direction(&mut em, &spec, d)?);
    }
    em.scope.clear();
    let (b, h, l) = (spec.batch, spec.hidden, spec.layout);
    // Y: [seq, dirs, batch, hidden] (layout 0) or [batch, seq, dirs, hidden] (layout 1).
    if let Some(name) = &spec.outs[0] {
        let mut per_dir = Vec::with_capacity(dirs.len());
        for (d, dir) in dirs.iter().enumerate() {
            em.scope = format!("d{d}");
            let seq = spec.seq;
            let shape: &[usize] = if l == 0 {
                &[seq, 1, b, h]
            } else {
                &[b, seq, 1, h]
            };
            per_dir.push(em.reshape("Y", &dir.y, shape)?);
        }
        em.scope.clear();
        em.concat("Y", &per_dir, l + 1, Some(name))?;
    }
    // Y_h, Y_c: [dirs, batch, hidden] (layout 0) or [batch, dirs, hidden] (layout 1).
    let shape: &[usize] = if l == 0 { &[1, b, h] } else { &[b, 1, h] };
    for (k, what) in [(1, "Y_h"), (2, "Y_c")] {
        let Some(name) = spec.outs.get(k).cloned().flatten() else {
            continue;
        };
        let mut parts = Vec::with_capacity(dirs.len());
        for (d, dir) in dirs.iter().enumerate() {
            em.scope = format!("d{d}");
            let last = if k == 1 {
                dir.h.clone()
            } else {
                dir.c.clone().ok_or_else(|| {
                    node_err(OpError::Unsupported(
                        "Y_c of an op without a cell state".into(),
                    ))
                })?
            };
            parts.push(em.reshape(what, &last, shape)?);
        }
        em.scope.clear();
        em.concat(what, &parts, l, Some(&name))?;
    }
    Ok(())
}

/// Name and type of input `i` when present.
fn input(
    imp: &Importer,
    node: &NodeProto,
    i: usize,
) -> Result<Option<(String, TensorType)>, OpError> {
    let Some(name) = node.input.get(i).filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    let id = imp
        .by_name
        .get(name)
        .ok_or_else(|| OpError::Unsupported(format!("input '{name}' is not defined")))?;
    Ok(Some((name.clone(), imp.graph.value(*id).ty.clone())))
}

/// Reads and checks the node's inputs and attributes.
fn parse(imp: &Importer, node: &NodeProto) -> Result<Spec, OpError> {
    let kind = match node.op_type() {
        "LSTM" => Kind::Lstm,
        "GRU" => Kind::Gru,
        _ => Kind::Rnn,
    };
    let max_inputs = if kind == Kind::Lstm { 8 } else { 6 };
    let given = |i: usize| node.input.get(i).is_some_and(|n| !n.is_empty());
    if node.input.len() > max_inputs || !(0..3).all(given) {
        return Err(OpError::Arity {
            expected: format!("3 to {max_inputs} (X, W, R required)"),
            actual: node.input.len(),
        });
    }
    let n_out = node.output.len();
    if n_out > kind.outputs() {
        return Err(OpError::Unsupported(format!(
            "{n_out} outputs declared; {} has {}",
            node.op_type(),
            kind.outputs()
        )));
    }
    let ctx = NodeCtx::new(node, imp.graph.opset, Vec::new());
    let layout = match ctx.attr_int("layout", 0)? {
        0 => 0,
        1 => 1,
        v => return Err(OpError::attr("layout", format!("{v}; expected 0 or 1"))),
    };
    let reverse = match ctx.attr_string("direction", "forward")?.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => {
            return Err(OpError::attr(
                "direction",
                format!("'{other}'; expected forward, reverse or bidirectional"),
            ));
        }
    };
    let nd = reverse.len();
    let req = |i: usize| -> Result<(String, TensorType), OpError> {
        input(imp, node, i)?.ok_or_else(|| OpError::Arity {
            expected: format!("input {i} to be present"),
            actual: node.input.len(),
        })
    };
    let (x, xt) = req(0)?;
    let (w, wt) = req(1)?;
    let (r, rt) = req(2)?;
    let dtype = xt.dtype;
    if !matches!(dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
        return Err(OpError::DType {
            input: 0,
            dtype,
            expected: "a float type".into(),
        });
    }
    let bad = |detail: String, shapes: &[&[usize]]| OpError::shape(detail, shapes);
    if xt.shape.len() != 3 || wt.shape.len() != 3 || rt.shape.len() != 3 {
        return Err(bad(
            "X, W and R must be 3-d".into(),
            &[&xt.shape, &wt.shape, &rt.shape],
        ));
    }
    let (seq, batch) = if layout == 0 {
        (xt.shape[0], xt.shape[1])
    } else {
        (xt.shape[1], xt.shape[0])
    };
    let input_size = xt.shape[2];
    let hidden = rt.shape[2];
    if let Some(hs) = ctx.attr_int_opt("hidden_size")?
        && usize::try_from(hs).ok() != Some(hidden)
    {
        return Err(bad(
            format!("hidden_size is {hs} but R's last dim is {hidden}"),
            &[&rt.shape],
        ));
    }
    let g = kind.gates();
    let gh = g * hidden;
    if wt.shape != [nd, gh, input_size] || rt.shape != [nd, gh, hidden] {
        return Err(bad(
            format!(
                "expected W [{nd}, {gh}, {input_size}] and R [{nd}, {gh}, {hidden}] \
                 ({nd} direction(s), {g} gate(s), hidden size {hidden})"
            ),
            &[&xt.shape, &wt.shape, &rt.shape],
        ));
    }
    if seq == 0 || batch == 0 || hidden == 0 {
        return Err(OpError::Unsupported(format!(
            "an empty sequence, batch or hidden size (X {:?}, R {:?})",
            xt.shape, rt.shape
        )));
    }
    // Optional inputs with their expected shapes.
    let state_shape = if layout == 0 {
        vec![nd, batch, hidden]
    } else {
        vec![batch, nd, hidden]
    };
    let optional = |i: usize, shape: Vec<usize>, what: &str| -> Result<_, OpError> {
        let Some((name, t)) = input(imp, node, i)? else {
            return Ok(None);
        };
        if t.dtype != dtype {
            return Err(OpError::DType {
                input: i,
                dtype: t.dtype,
                expected: format!("{dtype} (the dtype of X)"),
            });
        }
        if t.shape != shape {
            return Err(bad(format!("{what} must be {shape:?}"), &[&t.shape]));
        }
        Ok(Some(name))
    };
    let b = optional(3, vec![nd, 2 * gh], "B")?;
    let h0 = optional(5, state_shape.clone(), "initial_h")?;
    let (c0, p) = if kind == Kind::Lstm {
        (
            optional(6, state_shape, "initial_c")?,
            optional(7, vec![nd, 3 * hidden], "P")?,
        )
    } else {
        (None, None)
    };
    check_sequence_lens(imp, node, seq, batch)?;
    let names = node
        .attribute
        .iter()
        .find(|a| a.name() == "activations")
        .map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        });
    let alphas = ctx.attr_floats("activation_alpha")?.unwrap_or_default();
    let betas = ctx.attr_floats("activation_beta")?.unwrap_or_default();
    let acts = act::parse(names, &alphas, &betas, kind.default_acts(), nd)?;
    let clip = ctx.attr_float_opt("clip")?;
    if let Some(c) = clip
        && (c.is_nan() || c <= 0.0)
    {
        return Err(OpError::attr(
            "clip",
            format!("{c}; expected a positive threshold"),
        ));
    }
    let outs = (0..kind.outputs())
        .map(|k| node.output.get(k).filter(|n| !n.is_empty()).cloned())
        .collect();
    Ok(Spec {
        kind,
        dtype,
        reverse,
        seq,
        batch,
        hidden,
        layout,
        x,
        w,
        r,
        b,
        h0,
        c0,
        p,
        acts,
        clip,
        input_forget: kind == Kind::Lstm && ctx.attr_int("input_forget", 0)? != 0,
        linear_before_reset: kind == Kind::Gru && ctx.attr_int("linear_before_reset", 0)? != 0,
        outs,
    })
}

/// `sequence_lens` (input 4) must be absent or a constant whose every entry is `seq`. A value
/// known only at run time asks for its value ([`OpError::NotConstant`]: a given value freezes it).
fn check_sequence_lens(
    imp: &Importer,
    node: &NodeProto,
    seq: usize,
    batch: usize,
) -> Result<(), OpError> {
    let Some((name, t)) = input(imp, node, 4)? else {
        return Ok(());
    };
    if !matches!(t.dtype, DType::I32 | DType::I64) || t.shape != [batch] {
        return Err(OpError::shape(
            format!("sequence_lens must be int32 [{batch}] (got {t})"),
            &[&t.shape],
        ));
    }
    let Some(&id) = imp.by_name.get(&name) else {
        return Ok(());
    };
    let ValueKind::Constant(v) = &imp.graph.value(id).kind else {
        return Err(OpError::NotConstant { input: 4, name });
    };
    let lens: Vec<i64> = Tensor::to_i64_vec(v);
    if lens.iter().any(|&n| usize::try_from(n).ok() != Some(seq)) {
        return Err(OpError::Unsupported(format!(
            "variable sequence lengths are not supported: sequence_lens is {lens:?}, every entry \
             must equal the sequence length {seq}"
        )));
    }
    Ok(())
}
