//! `Scan` of opset 8: every operand has a batch dim first, scan inputs are scanned along axis
//! 1 (`directions` per scan input), and `sequence_lens` may come first. It becomes a loop over
//! the batch (every operand a scan input along axis 0, every output a scan output) whose body
//! is the opset-9 loop over the sequence with the file's body.

use arenac_proto::NodeProto;

use super::super::Importer;
use super::super::tensor_proto::ExternalData;
use super::loops::{finish, lookup, per_scan, separate_written_back};
use super::{Captures, graph_attr, import_subgraph};
use crate::error::{Error, OpError, Result};
use crate::ir::graph::{Graph, ValueKind};
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::ops::control::{LoopAttrs, LoopKind, ScanAxis};
use crate::ops::ctx::NodeCtx;

/// ONNX `Scan` of opset 8: inputs `[sequence_lens], states..., scan inputs...`, every one with
/// a batch dim first, scan inputs scanned along axis 1 (`directions` per scan input); outputs
/// the final states and the scan outputs stacked along axis 1, all with the batch dim. Becomes
/// a loop over the batch (every operand a scan input along axis 0, every output a scan
/// output) whose body runs the opset-9 loop over the sequence with the file's body.
/// `sequence_lens` must be absent or a constant equal to the sequence length everywhere.
pub(super) fn import_scan8(
    imp: &mut Importer,
    node: &NodeProto,
    label: &str,
    external: Option<&mut ExternalData>,
) -> Result<()> {
    let node_err = |source: OpError| Error::Node {
        node: label.to_string(),
        op: "Scan".into(),
        source,
    };
    let body_g = graph_attr(node, "body").map_err(node_err)?;
    let ctx = NodeCtx::new(node, imp.graph.opset, Vec::new());
    let operands = node.input.get(1..).unwrap_or_default();
    let m = usize::try_from(
        ctx.attr_int_opt("num_scan_inputs")
            .map_err(node_err)?
            .unwrap_or(0),
    )
    .ok()
    .filter(|&m| m >= 1 && m <= operands.len())
    .ok_or_else(|| {
        node_err(OpError::attr(
            "num_scan_inputs",
            format!(
                "must be 1 to {} (the inputs after sequence_lens)",
                operands.len()
            ),
        ))
    })?;
    let n = operands.len() - m;
    let mut ids = Vec::with_capacity(operands.len());
    for name in operands {
        if name.is_empty() {
            return Err(node_err(OpError::Unsupported(
                "an omitted Scan input (optional values are not supported)".into(),
            )));
        }
        ids.push(lookup(imp, name, label, "Scan")?);
    }
    let types: Vec<TensorType> = ids.iter().map(|&v| imp.graph.value(v).ty.clone()).collect();
    let batch = types
        .first()
        .and_then(|t| t.shape.first())
        .copied()
        .unwrap_or(0);
    let seq = types[n].shape.get(1).copied().unwrap_or(0);
    for (j, t) in types.iter().enumerate() {
        let ok = t.shape.first() == Some(&batch) && (j < n || t.shape.get(1) == Some(&seq));
        if !ok {
            return Err(node_err(OpError::shape(
                format!(
                    "every operand of an opset-8 Scan starts with the batch dim ({batch}), and \
                     every scan input continues with the sequence length ({seq})"
                ),
                &[&t.shape],
            )));
        }
    }
    if let Some(lens) = node.input.first().filter(|s| !s.is_empty()) {
        let id = lookup(imp, lens, label, "Scan")?;
        match &imp.graph.value(id).kind {
            ValueKind::Constant(t) if t.to_i64_vec().iter().all(|&l| l == seq as i64) => {}
            ValueKind::Constant(t) => {
                return Err(node_err(OpError::Unsupported(format!(
                    "variable sequence lengths are not supported: sequence_lens is {:?}, every \
                     entry must equal the sequence length {seq}",
                    t.to_i64_vec()
                ))));
            }
            _ => {
                return Err(node_err(OpError::NotConstant {
                    input: 0,
                    name: lens.clone(),
                }));
            }
        }
    }
    let dirs = per_scan(&ctx, "directions", m).map_err(node_err)?;
    // The file's body sees one batch element: states without the batch dim, scan slices
    // without batch and sequence dims.
    let slice = |t: &TensorType, drop: usize| {
        TensorType::new(t.dtype, t.shape.get(drop..).unwrap_or_default().to_vec())
    };
    let mut body_types: Vec<TensorType> = types[..n].iter().map(|t| slice(t, 1)).collect();
    body_types.extend(types[n..].iter().map(|t| slice(t, 2)));
    // Captures are node inputs after the n + m operands, in both loops alike.
    let caps = Captures::resolve(imp, node, n + m, label)?;
    let prefix = format!("{label}/body");
    let mut body = import_subgraph(imp, body_g, &body_types, &caps, &prefix, external)?;
    let k = body.outputs.len().checked_sub(n).ok_or_else(|| {
        node_err(OpError::attr(
            "body",
            format!(
                "has {} outputs, fewer than the {n} states",
                body.outputs.len()
            ),
        ))
    })?;
    separate_written_back(&mut body, 0, n);
    let fwd = ScanAxis {
        axis: 0,
        reverse: false,
    };
    let inner = LoopAttrs {
        kind: LoopKind::Scan,
        body,
        trips: seq,
        iter_input: false,
        cond: false,
        early_exit: false,
        carried: n,
        scan_in: dirs
            .iter()
            .map(|&d| ScanAxis {
                axis: 0,
                reverse: d != 0,
            })
            .collect(),
        scan_out: vec![fwd; k],
        arena_bytes: 0,
    };
    // The batch loop's body: one element of every operand, the captured values read through,
    // and the sequence loop over them.
    let mut per_batch = Graph::new(format!("{label}/batch"), imp.graph.opset);
    let mut inner_inputs = Vec::new();
    for (j, t) in types.iter().enumerate() {
        let v = per_batch.add_value(
            format!("{}.element", operands[j]),
            slice(t, 1),
            ValueKind::Input,
        );
        per_batch.inputs.push(v);
        inner_inputs.push(v);
    }
    for (j, &c) in caps.inputs.iter().enumerate() {
        let val = imp.graph.value(c);
        let v = per_batch.add_value(
            val.name.clone(),
            val.ty.clone(),
            ValueKind::Outer(n + m + j),
        );
        inner_inputs.push(v);
    }
    let in_types: Vec<TensorType> = inner_inputs
        .iter()
        .map(|&v| per_batch.value(v).ty.clone())
        .collect();
    let op = Op::Loop(Box::new(inner));
    let out_types = op.infer(&in_types).map_err(node_err)?;
    let outs: Vec<(String, TensorType)> = out_types
        .into_iter()
        .enumerate()
        .map(|(j, t)| (format!("{label}/sequence:{j}"), t))
        .collect();
    let seq_node = per_batch.add_node(format!("{label}/sequence"), op, &inner_inputs, &outs);
    per_batch.outputs = per_batch.node(seq_node).outputs.to_vec();
    let outer = LoopAttrs {
        kind: LoopKind::Scan,
        body: per_batch,
        trips: batch,
        iter_input: false,
        cond: false,
        early_exit: false,
        carried: 0,
        scan_in: vec![fwd; n + m],
        scan_out: vec![fwd; n + k],
        arena_bytes: 0,
    };
    let mut inputs = ids;
    inputs.extend(&caps.inputs);
    finish(imp, node, label, Op::Loop(Box::new(outer)), &inputs)
}
