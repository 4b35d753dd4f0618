//! `Loop` and `Scan` as one op: a body graph run a trip count known at compile time, with
//! carried state, per-iteration slices of scan inputs, and per-iteration results stacked into
//! scan outputs. ONNX's `Loop` (iteration number and condition in the body's signature, scan
//! outputs stacked along axis 0) and `Scan` (scan inputs and outputs along any axis, either
//! direction) both map onto it; so do the recurrences of LSTM/GRU/RNN.
//!
//! Operands, in order:
//! - node inputs: `[cond_init]` (with [`LoopAttrs::cond`]), the carried initial values, the
//!   scan inputs, then the captured outer values (read by the body as
//!   [`crate::ir::graph::ValueKind::Outer`]);
//! - body inputs: `[iteration (i64 scalar)]` (with [`LoopAttrs::iter_input`]), `[cond]`, the
//!   carried values, one slice of each scan input;
//! - body outputs: `[cond]`, the carried values' next values (same types), one slice of each
//!   scan output;
//! - node outputs: the carried values' final values, then the scan outputs (the body's slice
//!   type with the trip count inserted at the scan axis).
//!
//! The loop stops after [`LoopAttrs::trips`] iterations, or, with [`LoopAttrs::early_exit`],
//! before the first iteration whose incoming condition is false (then it has no scan outputs:
//! their length would depend on the data).

use crate::error::OpError;
use crate::ir::eval::eval_graph_outer;
use crate::ir::graph::Graph;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;

/// How a scan input is sliced, or a scan output stacked, per iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanAxis {
    /// The axis of the full tensor (normalized) along which iterations go.
    pub axis: usize,
    /// Iteration `i` reads or writes position `trips - 1 - i`.
    pub reverse: bool,
}

/// Which ONNX op a loop was imported from (its printed name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopKind {
    /// ONNX `Loop`.
    Loop,
    /// ONNX `Scan` (and the recurrences of LSTM, GRU, RNN).
    Scan,
}

/// The attributes of [`Op::Loop`].
#[derive(Clone, Debug, PartialEq)]
pub struct LoopAttrs {
    /// The ONNX op it stands for.
    pub kind: LoopKind,
    /// The body (see the module doc for its inputs and outputs).
    pub body: Graph,
    /// Iterations (the most, with `early_exit`).
    pub trips: usize,
    /// The body's first input is the iteration number, an i64 scalar from 0.
    pub iter_input: bool,
    /// A loop condition: the node's first input, the body's next input and first output.
    pub cond: bool,
    /// The condition is computed at run time: the loop stops before an iteration whose
    /// incoming condition is false. Without it the condition is known to stay true.
    pub early_exit: bool,
    /// Number of carried values.
    pub carried: usize,
    /// One entry per scan input.
    pub scan_in: Vec<ScanAxis>,
    /// One entry per scan output.
    pub scan_out: Vec<ScanAxis>,
    /// Bytes of the arena the body is planned in, recorded by planning; 0 before. The node's
    /// kernel scratch.
    pub arena_bytes: usize,
}

impl LoopAttrs {
    /// Node inputs before the captured ones: `[cond_init]`, carried, scan inputs.
    pub fn fixed_inputs(&self) -> usize {
        usize::from(self.cond) + self.carried + self.scan_in.len()
    }

    /// Index of the first carried value among the body's inputs.
    pub fn first_carried_input(&self) -> usize {
        usize::from(self.iter_input) + usize::from(self.cond)
    }
}

/// `t` with `axis` removed (a slice's type), or `None` when `t` has no such axis.
fn without_axis(t: &TensorType, axis: usize) -> Option<TensorType> {
    let mut shape = t.shape.clone();
    (axis < shape.len()).then(|| {
        shape.remove(axis);
        TensorType::new(t.dtype, shape)
    })
}

/// `t` with a dim of `n` inserted at `axis` (a stacked output's type).
fn with_axis(t: &TensorType, axis: usize, n: usize) -> Option<TensorType> {
    let mut shape = t.shape.clone();
    (axis <= shape.len()).then(|| {
        shape.insert(axis, n);
        TensorType::new(t.dtype, shape)
    })
}

fn one_bool(t: &TensorType) -> bool {
    t.dtype == DType::Bool && t.numel() == Some(1)
}

/// Output types; checks the body's signature against the node's inputs.
pub(super) fn infer(a: &LoopAttrs, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let bad = |m: String| OpError::Unsupported(m);
    let fixed = a.fixed_inputs();
    if inputs.len() < fixed {
        return Err(OpError::Arity {
            expected: format!("at least {fixed}"),
            actual: inputs.len(),
        });
    }
    super::check_outer(&a.body, "body", inputs, fixed)?;
    let b = &a.body;
    let bin: Vec<&TensorType> = b.inputs.iter().map(|&v| &b.value(v).ty).collect();
    let bout: Vec<&TensorType> = b.outputs.iter().map(|&v| &b.value(v).ty).collect();
    let c = usize::from(a.cond);
    let first = a.first_carried_input();
    if bin.len() != first + a.carried + a.scan_in.len() {
        return Err(bad(format!(
            "the body has {} inputs, expected {}",
            bin.len(),
            first + a.carried + a.scan_in.len()
        )));
    }
    if bout.len() != c + a.carried + a.scan_out.len() {
        return Err(bad(format!(
            "the body has {} outputs, expected {}",
            bout.len(),
            c + a.carried + a.scan_out.len()
        )));
    }
    if a.iter_input && (bin[0].dtype != DType::I64 || bin[0].numel() != Some(1)) {
        return Err(bad(format!(
            "the iteration number is {}, expected an i64 scalar",
            bin[0]
        )));
    }
    if a.cond && !(one_bool(&inputs[0]) && one_bool(bin[first - 1]) && one_bool(bout[0])) {
        return Err(bad("the loop condition must be a one-element bool".into()));
    }
    if a.early_exit && !a.scan_out.is_empty() {
        return Err(bad(
            "a loop that may stop early has no scan outputs (their length would depend on the \
             data)"
                .into(),
        ));
    }
    let mut out = Vec::with_capacity(a.carried + a.scan_out.len());
    for j in 0..a.carried {
        let init = &inputs[c + j];
        if bin[first + j] != init || bout[c + j] != init {
            return Err(bad(format!(
                "carried value {j} is {init} but the body takes {} and gives {}",
                bin[first + j],
                bout[c + j]
            )));
        }
        out.push(init.clone());
    }
    for (k, s) in a.scan_in.iter().enumerate() {
        let full = &inputs[c + a.carried + k];
        let slice = without_axis(full, s.axis);
        if full.shape.get(s.axis) != Some(&a.trips)
            || slice.as_ref() != Some(bin[first + a.carried + k])
        {
            return Err(bad(format!(
                "scan input {k} is {full}: along axis {} it needs {} slices of the body's {}",
                s.axis,
                a.trips,
                bin[first + a.carried + k]
            )));
        }
    }
    for (k, s) in a.scan_out.iter().enumerate() {
        let slice = bout[c + a.carried + k];
        let full = with_axis(slice, s.axis, a.trips)
            .ok_or_else(|| bad(format!("scan output {k} ({slice}) has no axis {}", s.axis)))?;
        if full.bytes().is_none() {
            return Err(OpError::Overflow(format!(
                "scan output {k} of {} slices",
                a.trips
            )));
        }
        out.push(full);
    }
    Ok(out)
}

/// Reference evaluation: the body run iteration by iteration.
pub(super) fn eval(a: &LoopAttrs, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let c = usize::from(a.cond);
    let get = |i: usize| {
        inputs
            .get(i)
            .copied()
            .ok_or_else(|| OpError::Unsupported(format!("missing loop input {i}")))
    };
    let truthy = |t: &Tensor| t.to_i64_vec().first().copied().unwrap_or(0) != 0;
    let mut cond = if a.cond { truthy(get(0)?) } else { true };
    let mut state: Vec<Tensor> = (0..a.carried)
        .map(|j| get(c + j).cloned())
        .collect::<Result<_, _>>()?;
    let scans: Vec<&Tensor> = (0..a.scan_in.len())
        .map(|k| get(c + a.carried + k))
        .collect::<Result<_, _>>()?;
    let mut stacked: Vec<Vec<Tensor>> = vec![Vec::with_capacity(a.trips); a.scan_out.len()];
    for i in 0..a.trips {
        if a.early_exit && !cond {
            break;
        }
        let mut args: Vec<Tensor> = Vec::with_capacity(a.body.inputs.len());
        if a.iter_input {
            args.push(Tensor::i64(vec![], &[i as i64]));
        }
        if a.cond {
            args.push(Tensor::from_i64(DType::Bool, vec![], &[i64::from(cond)]));
        }
        args.extend(state.iter().cloned());
        for (s, x) in a.scan_in.iter().zip(&scans) {
            let at = if s.reverse { a.trips - 1 - i } else { i };
            let index = Tensor::i64(vec![], &[at as i64]);
            let slice = Op::Gather { axis: s.axis }.eval(&[x, &index])?;
            args.extend(slice);
        }
        let mut outs = eval_graph_outer(&a.body, &args, inputs)
            .map_err(|e| OpError::Unsupported(format!("evaluating the body: {e}")))?
            .into_iter();
        if a.cond {
            cond = outs.next().is_some_and(|t| truthy(&t));
        }
        state = outs.by_ref().take(a.carried).collect();
        for (k, t) in outs.enumerate() {
            if let Some(list) = stacked.get_mut(k) {
                list.push(t);
            }
        }
    }
    let mut result = state;
    for ((k, s), list) in a.scan_out.iter().enumerate().zip(stacked) {
        if list.len() != a.trips {
            return Err(OpError::Unsupported(format!(
                "scan output {k} got {} of {} slices",
                list.len(),
                a.trips
            )));
        }
        result.push(stack(
            &a.body.value(a.body.outputs[c + a.carried + k]).ty,
            s,
            list,
        )?);
    }
    Ok(result)
}

/// The slices of one scan output stacked along its axis (in iteration order, or reversed).
fn stack(slice: &TensorType, s: &ScanAxis, mut list: Vec<Tensor>) -> Result<Tensor, OpError> {
    if s.reverse {
        list.reverse();
    }
    if list.is_empty() {
        let full = with_axis(slice, s.axis, 0)
            .ok_or_else(|| OpError::Unsupported(format!("no axis {}", s.axis)))?;
        return Tensor::from_bytes(full.dtype, full.shape, Default::default())
            .map_err(|e| OpError::Unsupported(e.to_string()));
    }
    let unsqueeze = Op::Unsqueeze { axes: vec![s.axis] };
    let mut parts = Vec::with_capacity(list.len());
    for t in &list {
        parts.extend(unsqueeze.eval(&[t])?);
    }
    let refs: Vec<&Tensor> = parts.iter().collect();
    Op::Concat { axis: s.axis }
        .eval(&refs)?
        .into_iter()
        .next()
        .ok_or_else(|| OpError::Unsupported("stacking gave nothing".into()))
}

/// Attributes for the printer.
pub(super) fn attrs(a: &LoopAttrs) -> Vec<(&'static str, String)> {
    let axes = |v: &[ScanAxis]| {
        let items: Vec<String> = v
            .iter()
            .map(|s| format!("{}{}", if s.reverse { "rev" } else { "" }, s.axis))
            .collect();
        format!("[{}]", items.join(","))
    };
    let mut out = vec![("trips", a.trips.to_string())];
    if a.iter_input {
        out.push(("iter", "1".into()));
    }
    if a.cond {
        out.push((
            "cond",
            if a.early_exit { "early_exit" } else { "true" }.into(),
        ));
    }
    out.push(("carried", a.carried.to_string()));
    if !a.scan_in.is_empty() {
        out.push(("scan_in", axes(&a.scan_in)));
    }
    if !a.scan_out.is_empty() {
        out.push(("scan_out", axes(&a.scan_out)));
    }
    out
}
