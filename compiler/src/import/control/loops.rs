//! `Loop` and `Scan` into [`Op::Loop`] (see `crate::ops::control::loops` for the operands).
//!
//! - `Loop`: the trip count `M` must be known at compile time (a shape operand: a given input
//!   is frozen); a loop without `M` (a while loop) is refused. The condition stays true when
//!   its initial value is a constant true and the body passes it through (or makes it a
//!   constant true); otherwise the loop may stop early, which is allowed only without scan
//!   outputs (their length would depend on the data) — except that a passed-through initial
//!   condition is then a shape operand like `M`.
//! - `Scan` (opset 9 on): the trip count is the scan inputs' length along their axes.
//! - `Scan` of opset 8 (a batch dim first): `super::scan8`.
//!
//! The body is imported as a graph of its own ([`import_subgraph`]). A carried value the body
//! passes through from *another* carried input (a swap) gets a copy node in the body, so that
//! the loop's copy-back of the next state never overwrites a value it still has to read.

use arenac_proto::NodeProto;

use super::super::Importer;
use super::super::tensor_proto::ExternalData;
use super::{Captures, add_node, graph_attr, import_subgraph};
use crate::error::{Error, OpError, Result};
use crate::ir::graph::{Graph, ValueId, ValueKind};
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;
use crate::ops::control::{LoopAttrs, LoopKind, ScanAxis};
use crate::ops::ctx::NodeCtx;

/// The value `v` of `g` stores its bytes in: through views (Identity, Reshape...) to the first
/// value that is not one.
fn view_root(g: &Graph, mut v: ValueId) -> ValueId {
    while let ValueKind::Computed(p) = g.value(v).kind {
        let n = g.node(p);
        match (n.op.is_view(), n.inputs.first()) {
            (true, Some(&x)) => v = x,
            _ => break,
        }
    }
    v
}

/// Whether `v` of `g` is the constant `true`.
fn is_true(g: &Graph, v: ValueId) -> bool {
    match &g.value(v).kind {
        ValueKind::Constant(t) => t.to_i64_vec().first().is_some_and(|&x| x != 0),
        _ => false,
    }
}

/// Makes every written-back body output (`[cond]`, carried) that stores its bytes in another
/// written-back input (`inputs[from + k]`, `k != j`) a copy of its own, so the copy-back is
/// a plain parallel assignment.
pub(super) fn separate_written_back(body: &mut Graph, from: usize, count: usize) {
    let written: Vec<ValueId> = body
        .inputs
        .get(from..from + count)
        .unwrap_or_default()
        .to_vec();
    for j in 0..count {
        let Some(&out) = body.outputs.get(j) else {
            return;
        };
        let root = view_root(body, out);
        if written.contains(&root) && written.get(j) != Some(&root) {
            let val = body.value(out);
            let (ty, mut name) = (val.ty.clone(), format!("{}.next", val.name));
            while body.find_value(&name).is_some() {
                name.push('_');
            }
            let op = Op::Expand {
                shape: ty.shape.clone(),
            };
            let copy = body.add_node(name.clone(), op, &[out], &[(name, ty)]);
            body.outputs[j] = body.node(copy).outputs[0];
        }
    }
}

/// The value named `name` of the importer's graph.
pub(super) fn lookup(imp: &Importer, name: &str, label: &str, op: &str) -> Result<ValueId> {
    imp.by_name
        .get(name)
        .copied()
        .ok_or_else(|| Error::MissingValue {
            node: label.to_string(),
            op: op.to_string(),
            value: name.to_string(),
        })
}

/// ONNX `Loop`.
pub(super) fn import_loop(
    imp: &mut Importer,
    node: &NodeProto,
    label: &str,
    external: Option<&mut ExternalData>,
) -> Result<()> {
    let node_err = |source: OpError| Error::Node {
        node: label.to_string(),
        op: "Loop".into(),
        source,
    };
    let body_g = graph_attr(node, "body").map_err(node_err)?;
    let present = |i: usize| node.input.get(i).filter(|n| !n.is_empty());
    // The trip count.
    let m_name = present(0).ok_or_else(|| {
        node_err(OpError::Unsupported(
            "a Loop without a trip count M runs until its condition turns false; arenac needs \
             the number of iterations when compiling: give M (an initializer, or a value when \
             compiling)"
                .into(),
        ))
    })?;
    let m = imp.graph.value(lookup(imp, m_name, label, "Loop")?);
    let trips = match &m.kind {
        ValueKind::Constant(t) if t.numel() == 1 && t.dtype() == DType::I64 => {
            t.to_i64_vec().first().copied().unwrap_or(0).max(0)
        }
        ValueKind::Constant(t) => {
            return Err(node_err(OpError::DType {
                input: 0,
                dtype: t.dtype(),
                expected: format!("a one-element int64 trip count (got {})", t.ty()),
            }));
        }
        _ => {
            return Err(node_err(OpError::NotConstant {
                input: 0,
                name: m_name.clone(),
            }));
        }
    };
    let trips = usize::try_from(trips).unwrap_or(usize::MAX);
    // The condition (absent: true).
    let cond = match present(1) {
        Some(name) => lookup(imp, name, label, "Loop")?,
        None => {
            let mut name = format!("{label}:cond");
            while imp.by_name.contains_key(&name) {
                name.push('_');
            }
            let t = Tensor::from_i64(DType::Bool, vec![], &[1]);
            imp.define(
                &name,
                format!("node '{label}'"),
                t.ty(),
                ValueKind::Constant(t),
            )?;
            lookup(imp, &name, label, "Loop")?
        }
    };
    let cond_ty = imp.graph.value(cond).ty.clone();
    if cond_ty.dtype != DType::Bool || cond_ty.numel() != Some(1) {
        return Err(node_err(OpError::DType {
            input: 1,
            dtype: cond_ty.dtype,
            expected: format!("a one-element bool condition (got {cond_ty})"),
        }));
    }
    let cond_init = match &imp.graph.value(cond).kind {
        ValueKind::Constant(t) => Some(t.to_i64_vec().first().is_some_and(|&x| x != 0)),
        _ => None,
    };
    // A loop whose initial condition is a constant false never runs.
    let trips = if cond_init == Some(false) { 0 } else { trips };
    let mut carried = Vec::new();
    for (k, name) in node.input.iter().enumerate().skip(2) {
        if name.is_empty() {
            return Err(node_err(OpError::Unsupported(format!(
                "loop-carried input {k} is omitted (optional values are not supported)"
            ))));
        }
        carried.push(lookup(imp, name, label, "Loop")?);
    }
    let mut types = vec![
        TensorType::new(DType::I64, vec![]),
        TensorType::new(DType::Bool, vec![]),
    ];
    types.extend(carried.iter().map(|&v| imp.graph.value(v).ty.clone()));
    let caps = Captures::resolve(imp, node, 1 + carried.len(), label)?;
    let prefix = format!("{label}/body");
    let mut body = import_subgraph(imp, body_g, &types, &caps, &prefix, external)?;
    let n = carried.len();
    let k = body.outputs.len().checked_sub(1 + n).ok_or_else(|| {
        node_err(OpError::attr(
            "body",
            format!(
                "has {} outputs; a Loop body gives the condition and the {n} carried values \
                 first",
                body.outputs.len()
            ),
        ))
    })?;
    // Does the condition stay true?
    let cond_in = body.inputs[1];
    let cond_out = body.outputs[0];
    let passed = view_root(&body, cond_out) == cond_in;
    let stays = passed || is_true(&body, cond_out);
    let early_exit = trips > 0 && !(cond_init == Some(true) && stays);
    if early_exit && k > 0 {
        return Err(node_err(if passed {
            // The initial condition decides whether the scan outputs are empty.
            OpError::NotConstant {
                input: 1,
                name: node.input.get(1).cloned().unwrap_or_default(),
            }
        } else {
            OpError::Unsupported(format!(
                "the body computes the loop condition at run time and the loop has {k} scan \
                 output(s): their length would depend on the data, and arenac's shapes are \
                 static"
            ))
        }));
    }
    separate_written_back(&mut body, 1, 1 + n);
    let attrs = LoopAttrs {
        kind: LoopKind::Loop,
        body,
        trips,
        iter_input: true,
        cond: true,
        early_exit,
        carried: n,
        scan_in: Vec::new(),
        scan_out: vec![
            ScanAxis {
                axis: 0,
                reverse: false
            };
            k
        ],
        arena_bytes: 0,
    };
    let mut inputs = vec![cond];
    inputs.extend(&carried);
    inputs.extend(&caps.inputs);
    finish(imp, node, label, Op::Loop(Box::new(attrs)), &inputs)
}

/// Infers the loop's output types and adds (or folds) it.
pub(super) fn finish(
    imp: &mut Importer,
    node: &NodeProto,
    label: &str,
    op: Op,
    inputs: &[ValueId],
) -> Result<()> {
    let in_types: Vec<TensorType> = inputs
        .iter()
        .map(|&v| imp.graph.value(v).ty.clone())
        .collect();
    let types = op.infer(&in_types).map_err(|source| Error::Node {
        node: label.to_string(),
        op: op.name().to_string(),
        source,
    })?;
    add_node(imp, node, label, op, inputs, types)
}

/// A normalized axis attribute entry for a tensor of `rank` dims.
fn axis(v: i64, rank: usize, attr: &str) -> Result<usize, OpError> {
    let r = rank as i64;
    if !(-r..r).contains(&v) {
        return Err(OpError::attr(
            attr,
            format!("axis {v} is out of range for rank {rank}"),
        ));
    }
    Ok(if v < 0 { (v + r) as usize } else { v as usize })
}

/// The `count` entries of a per-scan list attribute (default 0 each), checked to be 0 or 1
/// for directions.
pub(super) fn per_scan(ctx: &NodeCtx<'_>, name: &str, count: usize) -> Result<Vec<i64>, OpError> {
    match ctx.attr_ints(name)? {
        None => Ok(vec![0; count]),
        Some(v) if v.len() == count => Ok(v),
        Some(v) => Err(OpError::attr(
            name,
            format!("has {} entries for {count} scan tensors", v.len()),
        )),
    }
}

/// ONNX `Scan` (opset 9 on: no batch dim; any opset when `internal`, a Scan made by the
/// importer itself).
pub(super) fn import_scan(
    imp: &mut Importer,
    node: &NodeProto,
    label: &str,
    external: Option<&mut ExternalData>,
    internal: bool,
) -> Result<()> {
    let node_err = |source: OpError| Error::Node {
        node: label.to_string(),
        op: "Scan".into(),
        source,
    };
    let opset = imp.graph.opset;
    if opset < 9 && !internal {
        return super::scan8::import_scan8(imp, node, label, external);
    }
    let body_g = graph_attr(node, "body").map_err(node_err)?;
    let ctx = NodeCtx::new(node, opset, Vec::new());
    let m = usize::try_from(
        ctx.attr_int_opt("num_scan_inputs")
            .map_err(node_err)?
            .unwrap_or(0),
    )
    .ok()
    .filter(|&m| m >= 1 && m <= node.input.len())
    .ok_or_else(|| {
        node_err(OpError::attr(
            "num_scan_inputs",
            format!("must be 1 to {} (the node's inputs)", node.input.len()),
        ))
    })?;
    let n = node.input.len() - m;
    let mut ids = Vec::with_capacity(node.input.len());
    for name in &node.input {
        if name.is_empty() {
            return Err(node_err(OpError::Unsupported(
                "an omitted Scan input (optional values are not supported)".into(),
            )));
        }
        ids.push(lookup(imp, name, label, "Scan")?);
    }
    let in_axes = per_scan(&ctx, "scan_input_axes", m).map_err(node_err)?;
    let in_dirs = per_scan(&ctx, "scan_input_directions", m).map_err(node_err)?;
    let mut scan_in = Vec::with_capacity(m);
    let mut types: Vec<TensorType> = ids[..n]
        .iter()
        .map(|&v| imp.graph.value(v).ty.clone())
        .collect();
    let mut trips: Option<usize> = None;
    for j in 0..m {
        let t = imp.graph.value(ids[n + j]).ty.clone();
        let a = axis(in_axes[j], t.shape.len(), "scan_input_axes").map_err(node_err)?;
        let len = t.shape[a];
        if trips.is_some_and(|l| l != len) {
            return Err(node_err(OpError::shape(
                format!("scan inputs have different lengths along their scan axes ({in_axes:?})"),
                &[&t.shape],
            )));
        }
        trips = Some(len);
        let mut slice = t.shape.clone();
        slice.remove(a);
        types.push(TensorType::new(t.dtype, slice));
        scan_in.push(ScanAxis {
            axis: a,
            reverse: in_dirs[j] != 0,
        });
    }
    let trips = trips.unwrap_or(0);
    let caps = Captures::resolve(imp, node, n + m, label)?;
    let prefix = format!("{label}/body");
    let mut body = import_subgraph(imp, body_g, &types, &caps, &prefix, external)?;
    let k = body.outputs.len().checked_sub(n).ok_or_else(|| {
        node_err(OpError::attr(
            "body",
            format!(
                "has {} outputs, fewer than the {n} state variables",
                body.outputs.len()
            ),
        ))
    })?;
    let out_axes = per_scan(&ctx, "scan_output_axes", k).map_err(node_err)?;
    let out_dirs = per_scan(&ctx, "scan_output_directions", k).map_err(node_err)?;
    let mut scan_out = Vec::with_capacity(k);
    for j in 0..k {
        let rank = body.value(body.outputs[n + j]).ty.shape.len() + 1;
        scan_out.push(ScanAxis {
            axis: axis(out_axes[j], rank, "scan_output_axes").map_err(node_err)?,
            reverse: out_dirs[j] != 0,
        });
    }
    separate_written_back(&mut body, 0, n);
    let attrs = LoopAttrs {
        kind: LoopKind::Scan,
        body,
        trips,
        iter_input: false,
        cond: false,
        early_exit: false,
        carried: n,
        scan_in,
        scan_out,
        arena_bytes: 0,
    };
    let mut inputs = ids;
    inputs.extend(&caps.inputs);
    finish(imp, node, label, Op::Loop(Box::new(attrs)), &inputs)
}
