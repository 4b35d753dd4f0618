//! Helpers shared by the op family tests: build a node with attributes, make its inputs and
//! run its registered converter.

use arenac_proto::{AttributeProto, NodeProto, attribute_proto::AttributeType};

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::Op;
use crate::ops::ctx::{CtxInput, NodeCtx};

/// An attribute value.
pub(crate) enum A {
    I(i64),
    F(f32),
    S(&'static str),
    Is(Vec<i64>),
}

fn typed(name: &str, kind: AttributeType) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

/// An INT attribute.
pub(crate) fn attr_i(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        i: Some(v),
        ..typed(name, AttributeType::Int)
    }
}

/// A FLOAT attribute.
pub(crate) fn attr_f(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        f: Some(v),
        ..typed(name, AttributeType::Float)
    }
}

/// A STRING attribute.
pub(crate) fn attr_s(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        s: Some(v.as_bytes().to_vec()),
        ..typed(name, AttributeType::String)
    }
}

/// An INTS attribute.
pub(crate) fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        ints: v.to_vec(),
        ..typed(name, AttributeType::Ints)
    }
}

/// An integer attribute with `type` left unset, as old exporters write it.
pub(crate) fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        ..Default::default()
    }
}

/// An integer list attribute with `type` left unset.
pub(crate) fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        ..Default::default()
    }
}

/// A string attribute with `type` left unset.
pub(crate) fn str_attr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        s: Some(v.as_bytes().to_vec()),
        ..Default::default()
    }
}

impl A {
    fn into_attr(self, name: &str) -> AttributeProto {
        match self {
            A::I(i) => attr_i(name, i),
            A::F(f) => attr_f(name, f),
            A::S(s) => attr_s(name, s),
            A::Is(v) => attr_ints(name, &v),
        }
    }
}

/// A node of `op` with `n_out` outputs `y0, y1...` and no input names.
pub(crate) fn node(op: &str, n_out: usize, attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        output: (0..n_out).map(|i| format!("y{i}")).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

/// A data (non-constant) input called `name`.
pub(crate) fn data_named(name: &str, ty: TensorType) -> CtxInput {
    CtxInput {
        name: name.into(),
        ty: Some(ty),
        value: None,
    }
}

/// A constant input called `name`.
pub(crate) fn cnst_named(name: &str, t: Tensor) -> CtxInput {
    CtxInput {
        name: name.into(),
        ty: Some(t.ty()),
        value: Some(t),
    }
}

/// An f32 data input `x`.
pub(crate) fn data(shape: &[usize]) -> CtxInput {
    data_named("x", f32t(shape))
}

/// A constant input `c`.
pub(crate) fn cnst(t: Tensor) -> CtxInput {
    cnst_named("c", t)
}

/// An omitted optional input.
pub(crate) fn absent() -> CtxInput {
    CtxInput {
        name: String::new(),
        ty: None,
        value: None,
    }
}

/// Data inputs `in0, in1...` of the given types.
pub(crate) fn data_inputs(types: &[TensorType]) -> Vec<CtxInput> {
    types
        .iter()
        .enumerate()
        .map(|(i, t)| data_named(&format!("in{i}"), t.clone()))
        .collect()
}

/// Runs the registered converter of `node` at `opset`; returns the op and its data input
/// positions.
pub(crate) fn convert_node(
    node: &NodeProto,
    opset: i64,
    inputs: Vec<CtxInput>,
) -> Result<(Op, Vec<usize>), OpError> {
    let def = crate::ops::lookup(node.op_type(), opset).expect("op registered");
    let mut ctx = NodeCtx::new(node, opset, inputs);
    let op = (def.convert)(&mut ctx)?;
    Ok((op, ctx.data_inputs()))
}

/// Runs the converter of `op_type` at `opset` on a node with `attrs`, the given inputs
/// (named in the node as they are named here) and `outputs` declared output names.
pub(crate) fn convert_inputs(
    op_type: &str,
    opset: i64,
    attrs: Vec<AttributeProto>,
    inputs: Vec<CtxInput>,
    outputs: &[&str],
) -> Result<(Op, Vec<usize>), OpError> {
    let node = NodeProto {
        op_type: Some(op_type.into()),
        input: inputs.iter().map(|i| i.name.clone()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    };
    convert_node(&node, opset, inputs)
}

/// Runs the converter of `op_type` at `opset` on a node with `attrs`, data inputs of
/// `inputs` types and `outputs` declared outputs.
pub(crate) fn convert(
    op_type: &str,
    opset: i64,
    attrs: Vec<(&str, A)>,
    inputs: &[TensorType],
    outputs: usize,
) -> Result<Op, OpError> {
    let attrs = attrs.into_iter().map(|(n, v)| v.into_attr(n)).collect();
    let outputs: Vec<String> = (0..outputs).map(|i| format!("out{i}")).collect();
    let outputs: Vec<&str> = outputs.iter().map(String::as_str).collect();
    convert_inputs(op_type, opset, attrs, data_inputs(inputs), &outputs).map(|(op, _)| op)
}

/// An f32 type.
pub(crate) fn f32t(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape.to_vec())
}

/// `0, 1, 2...` as f64.
pub(crate) fn iota(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

/// An f32 tensor of `shape` holding `v`.
pub(crate) fn f32_tensor(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_f64(DType::F32, shape.to_vec(), v)
}

/// Evaluates the first output of `op`, checks its type against inference and returns its
/// shape and values.
pub(crate) fn eval_checked(op: &Op, inputs: &[&Tensor]) -> (Vec<usize>, Vec<f64>) {
    let types: Vec<TensorType> = inputs.iter().map(|x| x.ty()).collect();
    let ty = op.infer(&types).unwrap().remove(0);
    let y = op.eval(inputs).unwrap().remove(0);
    assert_eq!(y.ty(), ty);
    (y.shape().to_vec(), y.to_f64_vec())
}
