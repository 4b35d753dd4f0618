//! Helpers for the op family tests: build a node with attributes and run its converter.

use arenac_proto::{AttributeProto, NodeProto, attribute_proto::AttributeType};

use crate::error::OpError;
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

/// Runs the converter of `op_type` at `opset` on a node with `attrs`, data inputs of
/// `inputs` types and `outputs` declared outputs.
pub(crate) fn convert(
    op_type: &str,
    opset: i64,
    attrs: Vec<(&str, A)>,
    inputs: &[TensorType],
    outputs: usize,
) -> Result<Op, OpError> {
    let attribute = attrs
        .into_iter()
        .map(|(name, v)| {
            let mut a = AttributeProto {
                name: Some(name.to_string()),
                ..Default::default()
            };
            let kind = match v {
                A::I(i) => {
                    a.i = Some(i);
                    AttributeType::Int
                }
                A::F(f) => {
                    a.f = Some(f);
                    AttributeType::Float
                }
                A::S(s) => {
                    a.s = Some(s.as_bytes().to_vec());
                    AttributeType::String
                }
                A::Is(v) => {
                    a.ints = v;
                    AttributeType::Ints
                }
            };
            a.r#type = Some(kind as i32);
            a
        })
        .collect();
    let node = NodeProto {
        op_type: Some(op_type.to_string()),
        input: (0..inputs.len()).map(|i| format!("in{i}")).collect(),
        output: (0..outputs).map(|i| format!("out{i}")).collect(),
        attribute,
        ..Default::default()
    };
    let ctx_inputs = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| CtxInput {
            name: format!("in{i}"),
            ty: Some(t.clone()),
            value: None,
        })
        .collect();
    let mut ctx = NodeCtx::new(&node, opset, ctx_inputs);
    let def = crate::ops::lookup(op_type, opset).expect("op registered");
    (def.convert)(&mut ctx)
}

/// An f32 type.
pub(crate) fn f32t(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape.to_vec())
}

/// `0, 1, 2...` as f64.
pub(crate) fn iota(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}
