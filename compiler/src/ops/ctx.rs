//! [`NodeCtx`]: what an op's converter sees of one ONNX node — its attributes, the opset,
//! the types of its inputs, and the values of those inputs known at compile time.
//!
//! A converter turns shape-deciding constant inputs (Reshape's shape, Slice's starts...) into
//! attributes of its [`crate::ops::Op`] with [`NodeCtx::take_const`]; the inputs it does not
//! take stay data inputs of the IR node.

use arenac_proto::{AttributeProto, NodeProto, attribute_proto::AttributeType};

use crate::error::OpError;
use crate::import::tensor_proto::tensor_from_proto;
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;

/// One node's input as the converter sees it.
#[derive(Clone, Debug)]
pub struct CtxInput {
    /// Value name in the file (empty for an omitted optional input).
    pub name: String,
    /// Its type, `None` for an omitted optional input.
    pub ty: Option<TensorType>,
    /// Its value when known at compile time.
    pub value: Option<Tensor>,
}

/// Conversion context of one node.
#[derive(Debug)]
pub struct NodeCtx<'a> {
    node: &'a NodeProto,
    /// Default-domain opset version of the model.
    pub opset: i64,
    inputs: Vec<CtxInput>,
    taken: Vec<bool>,
}

impl<'a> NodeCtx<'a> {
    /// Builds the context; `inputs` has one entry per entry of `node.input`.
    pub fn new(node: &'a NodeProto, opset: i64, inputs: Vec<CtxInput>) -> NodeCtx<'a> {
        let taken = vec![false; inputs.len()];
        NodeCtx {
            node,
            opset,
            inputs,
            taken,
        }
    }

    /// The node's op type as written in the file.
    pub fn op_type(&self) -> &str {
        self.node.op_type()
    }

    /// Number of input slots in the file, including omitted optional ones.
    pub fn input_count(&self) -> usize {
        self.inputs.len()
    }

    /// Number of outputs the node declares (non-empty names).
    pub fn output_count(&self) -> usize {
        self.node.output.iter().filter(|o| !o.is_empty()).count()
    }

    /// Whether output slot `i` is present (declared with a non-empty name).
    pub fn has_output(&self, i: usize) -> bool {
        self.node.output.get(i).is_some_and(|o| !o.is_empty())
    }

    /// Whether input slot `i` is present (not omitted).
    pub fn has_input(&self, i: usize) -> bool {
        self.inputs.get(i).is_some_and(|x| x.ty.is_some())
    }

    /// Whether input slot `i` is present and its value known at compile time.
    pub fn is_const(&self, i: usize) -> bool {
        self.inputs
            .get(i)
            .is_some_and(|x| x.ty.is_some() && x.value.is_some())
    }

    /// Type of input `i`, or an arity error when absent.
    pub fn input_type(&self, i: usize) -> Result<&TensorType, OpError> {
        self.inputs
            .get(i)
            .and_then(|x| x.ty.as_ref())
            .ok_or_else(|| OpError::Arity {
                expected: format!("input {i} to be present"),
                actual: self.inputs.iter().filter(|x| x.ty.is_some()).count(),
            })
    }

    /// Checks that between `min` and `max` input slots are given.
    pub fn expect_inputs(&self, min: usize, max: usize) -> Result<(), OpError> {
        let n = self.inputs.len();
        if n < min || n > max || (0..min).any(|i| !self.has_input(i)) {
            let expected = if min == max {
                min.to_string()
            } else {
                format!("{min} to {max}")
            };
            return Err(OpError::Arity {
                expected,
                actual: n,
            });
        }
        Ok(())
    }

    /// The value of input `i` when known at compile time (without taking it).
    pub fn input_value(&self, i: usize) -> Option<&Tensor> {
        self.inputs.get(i).and_then(|x| x.value.as_ref())
    }

    /// Takes input `i` as a compile-time constant: it becomes part of the op, not a data input.
    /// `Ok(None)` when the optional input is omitted; [`OpError::NotConstant`] when it is given
    /// but not known at compile time.
    pub fn take_const(&mut self, i: usize) -> Result<Option<Tensor>, OpError> {
        let Some(input) = self.inputs.get(i) else {
            return Ok(None);
        };
        if input.ty.is_none() {
            return Ok(None);
        }
        match &input.value {
            Some(t) => {
                self.taken[i] = true;
                Ok(Some(t.clone()))
            }
            None => Err(OpError::NotConstant {
                input: i,
                name: input.name.clone(),
            }),
        }
    }

    /// The compile-time value of input `i`, if it has one, without taking it.
    pub fn const_value(&self, i: usize) -> Option<&Tensor> {
        self.inputs.get(i)?.value.as_ref()
    }

    /// Like [`NodeCtx::take_const`], returning the elements as `i64`.
    pub fn take_const_ints(&mut self, i: usize) -> Result<Option<Vec<i64>>, OpError> {
        Ok(self.take_const(i)?.map(|t| t.to_i64_vec()))
    }

    /// Marks an optional input as ignored (e.g. Dropout's ratio at inference).
    pub fn ignore_input(&mut self, i: usize) {
        if let Some(t) = self.taken.get_mut(i) {
            *t = true;
        }
    }

    /// Positions of the inputs that stay data inputs: present and not taken.
    pub fn data_inputs(&self) -> Vec<usize> {
        (0..self.inputs.len())
            .filter(|&i| self.inputs[i].ty.is_some() && !self.taken[i])
            .collect()
    }

    fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.node.attribute.iter().find(|a| a.name() == name)
    }

    /// Whether the attribute is present.
    pub fn has_attr(&self, name: &str) -> bool {
        self.attr(name).is_some()
    }

    fn attr_of(
        &self,
        name: &str,
        kind: AttributeType,
    ) -> Result<Option<&'a AttributeProto>, OpError> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => {
                // Files from old exporters leave `type` unset; accept them when the payload
                // field for the expected kind is filled.
                let declared = a.r#type();
                if declared == kind || declared == AttributeType::Undefined {
                    Ok(Some(a))
                } else {
                    Err(OpError::attr(
                        name,
                        format!("expected {kind:?}, found {declared:?}"),
                    ))
                }
            }
        }
    }

    /// An INT attribute, or `None` when absent.
    pub fn attr_int_opt(&self, name: &str) -> Result<Option<i64>, OpError> {
        Ok(self.attr_of(name, AttributeType::Int)?.map(|a| a.i()))
    }

    /// An INT attribute with a default.
    pub fn attr_int(&self, name: &str, default: i64) -> Result<i64, OpError> {
        Ok(self.attr_int_opt(name)?.unwrap_or(default))
    }

    /// A FLOAT attribute with a default.
    pub fn attr_float(&self, name: &str, default: f32) -> Result<f32, OpError> {
        Ok(self
            .attr_of(name, AttributeType::Float)?
            .map_or(default, |a| a.f()))
    }

    /// A FLOAT attribute, or `None` when absent.
    pub fn attr_float_opt(&self, name: &str) -> Result<Option<f32>, OpError> {
        Ok(self.attr_of(name, AttributeType::Float)?.map(|a| a.f()))
    }

    /// An INTS attribute, or `None` when absent.
    pub fn attr_ints(&self, name: &str) -> Result<Option<Vec<i64>>, OpError> {
        Ok(self
            .attr_of(name, AttributeType::Ints)?
            .map(|a| a.ints.clone()))
    }

    /// A FLOATS attribute, or `None` when absent.
    pub fn attr_floats(&self, name: &str) -> Result<Option<Vec<f32>>, OpError> {
        Ok(self
            .attr_of(name, AttributeType::Floats)?
            .map(|a| a.floats.clone()))
    }

    /// A STRING attribute (UTF-8) with a default.
    pub fn attr_string(&self, name: &str, default: &str) -> Result<String, OpError> {
        match self.attr_of(name, AttributeType::String)? {
            None => Ok(default.to_string()),
            Some(a) => String::from_utf8(a.s().to_vec())
                .map_err(|_| OpError::attr(name, "not valid UTF-8")),
        }
    }

    /// A TENSOR attribute, or `None` when absent.
    pub fn attr_tensor(&self, name: &str) -> Result<Option<Tensor>, OpError> {
        match self.attr_of(name, AttributeType::Tensor)? {
            None => Ok(None),
            Some(a) => match &a.t {
                None => Err(OpError::attr(name, "TENSOR attribute without a tensor")),
                Some(t) => tensor_from_proto(t, None)
                    .map(Some)
                    .map_err(|e| OpError::attr(name, e.to_string())),
            },
        }
    }
}

/// Normalizes a possibly negative axis against `rank` (valid range `-rank..rank`).
pub fn norm_axis(attr: &str, axis: i64, rank: usize) -> Result<usize, OpError> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(OpError::attr(
            attr,
            format!("axis {axis} out of range for rank {rank}"),
        ));
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}
