//! A small programmatic builder of ONNX `ModelProto`s, for tests, fuzzing and tools — so no
//! test needs hand-written protobuf literals.

use arenac_proto::tensor_shape_proto::{Dimension, dimension::Value as DimValue};
use arenac_proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto, attribute_proto::AttributeType, type_proto,
};

use crate::ir::tensor::Tensor;
use crate::ir::types::DType;

/// A declared dim of a graph input or output.
#[derive(Clone, Debug)]
pub enum Dim {
    /// Fixed size.
    N(usize),
    /// Symbolic name.
    Sym(&'static str),
}

/// An attribute value.
#[derive(Clone, Debug)]
pub enum Attr {
    /// INT.
    Int(i64),
    /// FLOAT.
    Float(f32),
    /// INTS.
    Ints(Vec<i64>),
    /// FLOATS.
    Floats(Vec<f32>),
    /// STRING.
    Str(String),
    /// TENSOR.
    Tensor(Tensor),
}

/// Builds a model with one graph.
#[derive(Clone, Debug, Default)]
pub struct ModelBuilder {
    graph: GraphProto,
    opset: i64,
}

/// The `ValueInfoProto` of a tensor with these dims.
pub fn value_info(name: &str, dtype: DType, dims: &[Dim]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Dim::N(n) => DimValue::DimValue(*n as i64),
                Dim::Sym(s) => DimValue::DimParam((*s).to_string()),
            }),
            ..Dimension::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(dtype.to_onnx()),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..TypeProto::default()
        }),
        ..ValueInfoProto::default()
    }
}

/// A `TensorProto` with raw data from a [`Tensor`] (4- and 2-bit types packed).
pub fn tensor_proto(name: &str, t: &Tensor) -> TensorProto {
    let raw = if t.dtype().packed_bits().is_some() {
        bytes::Bytes::from(crate::ir::lowp::pack(t.dtype(), t.bytes()))
    } else {
        t.bytes().clone()
    };
    TensorProto {
        name: Some(name.to_string()),
        dims: t.shape().iter().map(|&d| d as i64).collect(),
        data_type: Some(t.dtype().to_onnx()),
        raw_data: Some(raw),
        ..TensorProto::default()
    }
}

fn attribute(name: &str, value: Attr) -> AttributeProto {
    let mut a = AttributeProto {
        name: Some(name.to_string()),
        ..AttributeProto::default()
    };
    let kind = match value {
        Attr::Int(i) => {
            a.i = Some(i);
            AttributeType::Int
        }
        Attr::Float(f) => {
            a.f = Some(f);
            AttributeType::Float
        }
        Attr::Ints(v) => {
            a.ints = v;
            AttributeType::Ints
        }
        Attr::Floats(v) => {
            a.floats = v;
            AttributeType::Floats
        }
        Attr::Str(s) => {
            a.s = Some(s.into_bytes());
            AttributeType::String
        }
        Attr::Tensor(t) => {
            a.t = Some(tensor_proto("", &t));
            AttributeType::Tensor
        }
    };
    a.set_type(kind);
    a
}

impl ModelBuilder {
    /// A model importing the default domain at `opset`.
    pub fn new(name: &str, opset: i64) -> ModelBuilder {
        ModelBuilder {
            graph: GraphProto {
                name: Some(name.to_string()),
                ..GraphProto::default()
            },
            opset,
        }
    }

    /// Adds a graph input.
    pub fn input(mut self, name: &str, dtype: DType, dims: &[Dim]) -> Self {
        self.graph.input.push(value_info(name, dtype, dims));
        self
    }

    /// Adds a graph output (its declared shape is ignored by arenac; give `&[]`).
    pub fn output(mut self, name: &str, dtype: DType, dims: &[Dim]) -> Self {
        self.graph.output.push(value_info(name, dtype, dims));
        self
    }

    /// Adds an initializer.
    pub fn initializer(mut self, name: &str, t: &Tensor) -> Self {
        self.graph.initializer.push(tensor_proto(name, t));
        self
    }

    /// Adds an initializer given as a raw `TensorProto` (e.g. with external data).
    pub fn initializer_proto(mut self, t: TensorProto) -> Self {
        self.graph.initializer.push(t);
        self
    }

    /// Adds a node `outputs = op(inputs) {attrs}` named `name`.
    pub fn node(
        mut self,
        name: &str,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: Vec<(&str, Attr)>,
    ) -> Self {
        self.graph.node.push(NodeProto {
            name: Some(name.to_string()),
            op_type: Some(op.to_string()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            attribute: attrs.into_iter().map(|(k, v)| attribute(k, v)).collect(),
            ..NodeProto::default()
        });
        self
    }

    /// The finished model (IR version 8).
    pub fn build(self) -> ModelProto {
        ModelProto {
            ir_version: Some(8),
            producer_name: Some("arenac-builder".to_string()),
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(self.opset),
            }],
            graph: Some(self.graph),
            ..ModelProto::default()
        }
    }
}
