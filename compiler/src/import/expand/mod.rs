//! Import-time expansion of composite ONNX ops (Attention, RotaryEmbedding, Einsum, SwiGLU,
//! CausalConvWithState,
//! NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, QuantizeLinear, DequantizeLinear,
//! DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearConv, QLinearMatMul) into nodes of
//! ops arenac already has, as ONNX's own function bodies do.
//!
//! An expansion reads the node's attributes and its inputs' static types and writes a short
//! list of ordinary [`NodeProto`]s: every shape it needs is known at import, so shapes, axes and
//! masks that depend only on shapes are emitted as `Constant` nodes. The importer then imports
//! these nodes one by one through its ordinary path (conversion, inference, folding), so
//! everything downstream sees plain IR. Sub-nodes are named `<node>/<step>` so an error in one
//! still names the original node; their intermediate values are named the same way.

mod attention;
mod einsum;
mod exact;
mod gated;
mod loss;
mod rotary;
// Quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger).
mod quant;
// Integer convolution, quantized Conv and MatMul (ConvInteger, QLinearConv, QLinearMatMul).
mod qlinear;

use arenac_proto::{AttributeProto, NodeProto, attribute_proto::AttributeType};

use crate::error::{Error, OpError};
use crate::import::builder::tensor_proto;
use crate::ir::graph::ValueKind;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::ctx::{CtxInput, NodeCtx};

/// The op types expanded at import, with the first default-domain opset defining each (they
/// are handled up to [`crate::ops::MAX_OPSET`]).
pub const EXPANDED: [(&str, i64); 14] = [
    ("Attention", 23),
    ("RotaryEmbedding", 23),
    ("Einsum", 12),
    ("SwiGLU", 28),
    ("CausalConvWithState", 27),
    ("NegativeLogLikelihoodLoss", 12),
    ("SoftmaxCrossEntropyLoss", 12),
    // Quantization.
    ("QuantizeLinear", 10),
    ("DequantizeLinear", 10),
    ("DynamicQuantizeLinear", 11),
    ("MatMulInteger", 10),
    ("ConvInteger", 10),
    ("QLinearConv", 10),
    ("QLinearMatMul", 10),
];

/// The lowest opset the nodes of an expansion are written for: they are written for and
/// imported at the model's opset or this one, whichever is higher (so a QLinearConv of an
/// opset-10 model may use Round, and Clip's bounds as inputs; a loss of an opset-12 model is
/// written with opset 13's Unsqueeze).
pub const EXPANSION_OPSET: i64 = 13;

/// Whether `op_type` (default domain) is expanded at import, and from which opset.
pub fn expanded_since(op_type: &str) -> Option<i64> {
    EXPANDED
        .iter()
        .find(|(name, _)| *name == op_type)
        .map(|&(_, since)| since)
}

/// Expands `node` (labelled `label` in messages) of a model at `opset` into ordinary nodes.
/// `inputs` has one entry per input slot of the node (types of present inputs, values of
/// constant ones). The node's declared outputs are outputs of the returned nodes.
pub fn expand(
    node: &NodeProto,
    label: &str,
    opset: i64,
    inputs: Vec<CtxInput>,
) -> Result<Vec<NodeProto>, OpError> {
    let since = expanded_since(node.op_type()).unwrap_or(i64::MAX);
    if opset < since {
        return Err(OpError::Unsupported(format!(
            "{} exists from opset {since}; the model imports opset {opset}",
            node.op_type()
        )));
    }
    // The nodes are written for, and imported at, the opset they will be read at.
    let ctx = NodeCtx::new(node, opset.max(EXPANSION_OPSET), inputs);
    let mut e = Emitter::new(label);
    match node.op_type() {
        "Attention" => attention::expand(&ctx, node, &mut e)?,
        "RotaryEmbedding" => rotary::expand(&ctx, node, &mut e)?,
        "Einsum" => einsum::expand(&ctx, node, &mut e)?,
        "SwiGLU" => gated::expand_swiglu(&ctx, node, &mut e)?,
        "CausalConvWithState" => gated::expand_causal_conv(&ctx, node, &mut e)?,
        "NegativeLogLikelihoodLoss" => loss::expand_nll(&ctx, node, &mut e)?,
        "SoftmaxCrossEntropyLoss" => loss::expand_sce(&ctx, node, &mut e)?,
        // Quantization.
        "QuantizeLinear" => quant::expand_quantize(&ctx, node, &mut e)?,
        "DequantizeLinear" => quant::expand_dequantize(&ctx, node, &mut e)?,
        "DynamicQuantizeLinear" => quant::expand_dynamic(&ctx, node, &mut e)?,
        "MatMulInteger" => quant::expand_matmul_integer(&ctx, node, &mut e)?,
        "ConvInteger" => qlinear::expand_conv_integer(&ctx, node, &mut e)?,
        "QLinearConv" => qlinear::expand_qlinear_conv(&ctx, node, &mut e)?,
        "QLinearMatMul" => qlinear::expand_qlinear_matmul(&ctx, node, &mut e)?,
        other => {
            return Err(OpError::Unsupported(format!(
                "no import-time expansion for {other}"
            )));
        }
    }
    Ok(e.nodes)
}

/// Writes the nodes of one expansion.
struct Emitter {
    prefix: String,
    nodes: Vec<NodeProto>,
}

impl Emitter {
    fn new(label: &str) -> Emitter {
        Emitter {
            prefix: label.to_string(),
            nodes: Vec::new(),
        }
    }

    /// A fresh value/node name for step `what`.
    fn fresh(&self, what: &str) -> String {
        format!("{}/{}_{what}", self.prefix, self.nodes.len())
    }

    /// Adds `op(inputs) {attrs}` with one output named `out`; returns `out`.
    fn op_to(
        &mut self,
        op: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
        out: &str,
    ) -> String {
        let name = self.fresh(op);
        self.nodes.push(NodeProto {
            name: Some(name),
            op_type: Some(op.to_string()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.to_string()],
            attribute: attrs,
            ..NodeProto::default()
        });
        out.to_string()
    }

    /// Adds `op(inputs) {attrs}` with one fresh output; returns its name.
    fn op(&mut self, op: &str, inputs: &[&str], attrs: Vec<AttributeProto>) -> String {
        let out = self.fresh(op);
        self.op_to(op, inputs, attrs, &out)
    }

    /// Adds `op(inputs)`, its output named `out` when given, else fresh.
    fn op_maybe_to(
        &mut self,
        op: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
        out: Option<&str>,
    ) -> String {
        match out {
            Some(out) => self.op_to(op, inputs, attrs, out),
            None => self.op(op, inputs, attrs),
        }
    }

    /// A `Constant` node holding `t`; returns its output name.
    fn constant(&mut self, t: &Tensor) -> String {
        let out = self.fresh("Constant");
        let attr = AttributeProto {
            name: Some("value".to_string()),
            r#type: Some(AttributeType::Tensor as i32),
            t: Some(tensor_proto("", t)),
            ..AttributeProto::default()
        };
        self.op_to("Constant", &[], vec![attr], &out)
    }

    /// An `i64` constant of these values, shape `[len]`.
    fn ints(&mut self, v: &[i64]) -> String {
        self.constant(&Tensor::i64(vec![v.len()], v))
    }

    /// A `dtype` scalar constant (shape `[]`).
    fn scalar(&mut self, dtype: DType, v: f64) -> String {
        self.constant(&Tensor::from_f64(dtype, vec![], &[v]))
    }

    /// `Reshape(x, shape)` with a constant target.
    fn reshape(&mut self, x: &str, shape: &[usize], out: Option<&str>) -> String {
        let s = self.ints(&dims_i64(shape));
        self.op_maybe_to("Reshape", &[x, &s], vec![], out)
    }

    /// `Transpose(x) {perm}`.
    fn transpose(&mut self, x: &str, perm: &[i64], out: Option<&str>) -> String {
        self.op_maybe_to("Transpose", &[x], vec![ints_attr("perm", perm)], out)
    }

    /// `Cast(x) {to}` unless `from == to` (then `x` itself).
    fn cast(&mut self, x: &str, from: DType, to: DType) -> String {
        if from == to {
            return x.to_string();
        }
        self.op("Cast", &[x], vec![int_attr("to", i64::from(to.to_onnx()))])
    }

    /// `Slice(x, [start], [end], [axis], [step])`.
    fn slice(&mut self, x: &str, axis: i64, start: i64, end: i64, step: i64) -> String {
        let s = self.ints(&[start]);
        let e = self.ints(&[end]);
        let a = self.ints(&[axis]);
        let st = self.ints(&[step]);
        self.op("Slice", &[x, &s, &e, &a, &st], vec![])
    }
}

/// An INT attribute.
fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..AttributeProto::default()
    }
}

/// An INTS attribute.
fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..AttributeProto::default()
    }
}

/// Dims as ONNX shape values.
fn dims_i64(shape: &[usize]) -> Vec<i64> {
    shape
        .iter()
        .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
        .collect()
}

/// The name and type of input `i`, `None` when omitted.
fn input<'c>(
    ctx: &'c NodeCtx<'_>,
    node: &'c NodeProto,
    i: usize,
) -> Option<(&'c str, &'c TensorType)> {
    if !ctx.has_input(i) {
        return None;
    }
    let ty = ctx.input_type(i).ok()?;
    Some((node.input.get(i)?.as_str(), ty))
}

/// The name of declared output `k`, `None` when absent or empty.
fn output(node: &NodeProto, k: usize) -> Option<&str> {
    node.output
        .get(k)
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// The element count of a constant of `shape` the expansion builds, or an error when it would
/// take more than [`crate::import::MAX_FOLD_BYTES`] (counting 8 bytes per element, as it is
/// built from f64/i64 values).
fn const_numel(shape: &[usize], what: &str) -> Result<usize, OpError> {
    crate::ir::types::checked_numel(shape)
        .filter(|n| {
            n.checked_mul(8)
                .is_some_and(|b| b <= crate::import::MAX_FOLD_BYTES)
        })
        .ok_or_else(|| {
            OpError::Overflow(format!(
                "the {what} constant [{}] would be too large",
                dims_i64(shape)
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// An error for a model this expansion does not handle.
fn unsupported(what: impl Into<String>) -> OpError {
    OpError::Unsupported(what.into())
}

impl super::Importer {
    /// Imports `node` (an op with an expansion) as the ordinary nodes of its expansion.
    pub(super) fn import_expanded(
        &mut self,
        node: &NodeProto,
        index: usize,
        label: &str,
    ) -> crate::error::Result<()> {
        let node_err = |source: OpError| Error::Node {
            node: label.to_string(),
            op: node.op_type().to_string(),
            source,
        };
        let mut inputs = Vec::with_capacity(node.input.len());
        for name in &node.input {
            let found = self.by_name.get(name).map(|&id| self.graph.value(id));
            if found.is_none() && !name.is_empty() {
                return Err(Error::MissingValue {
                    node: label.to_string(),
                    op: node.op_type().to_string(),
                    value: name.clone(),
                });
            }
            inputs.push(CtxInput {
                name: name.clone(),
                ty: found.map(|v| v.ty.clone()),
                value: found.and_then(|v| match &v.kind {
                    ValueKind::Constant(t) => Some(t.clone()),
                    _ => None,
                }),
            });
        }
        let nodes = expand(node, label, self.graph.opset, inputs).map_err(node_err)?;
        let saved = self
            .node_opset
            .replace(self.graph.opset.max(EXPANSION_OPSET));
        let imported = nodes
            .iter()
            .try_for_each(|n| self.import_node(n, index, None));
        self.node_opset = saved;
        imported
    }
}
