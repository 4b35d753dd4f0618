//! Graph inputs: declared types, symbolic dims, and binding them from user-given shapes.
//!
//! A declared dim is a size, a named symbol (`dim_param: "N"`: every dim named `N`, in any
//! input, has one size) or anonymous: `dim_value: -1` (Paddle's exports), `dim_param: "?"`,
//! or neither value nor name. Each anonymous dim is a symbol of its own, unrelated to every
//! other dim; messages and `--shape` call it `INPUT[i]` (the input's name and the dim's
//! index), e.g. `x[0]`.
//!
//! A user shape `NAME=DxD...` names a graph input (binding its whole shape and, through it,
//! every symbolic dim it declares), a named symbol (`N=8`) or one dim of an input
//! (`x[2]=224`), in that order of precedence. Dims still unbound afterwards default to 1, with
//! a warning naming them and how to bind them ([`bind_inputs`]).

use std::collections::BTreeSet;

use arenac_proto::{
    GraphProto, ValueInfoProto, tensor_shape_proto::dimension::Value as DimValue, type_proto,
};

use crate::error::Error;
use crate::ir::types::{DType, Shape};

mod bind;
#[cfg(test)]
mod tests;

pub use bind::bind_inputs;

/// A declared dim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeclDim {
    /// A fixed size.
    Fixed(usize),
    /// A named symbol (`dim_param`): dims with the same name have the same size.
    Symbol(String),
    /// An anonymous dim (`-1`, `"?"`, or neither value nor name): a fresh symbol of its own,
    /// called `INPUT[i]` ([`DeclaredInput::dim_label`]).
    Anonymous,
}

impl DeclDim {
    /// Reads one `TensorShapeProto.Dimension` of `input` (for the error message).
    fn from_proto(input: &str, value: Option<&DimValue>) -> Result<DeclDim, Error> {
        Ok(match value {
            Some(DimValue::DimValue(-1)) => DeclDim::Anonymous,
            Some(DimValue::DimValue(v)) => {
                DeclDim::Fixed(usize::try_from(*v).map_err(|_| Error::InputType {
                    input: input.to_string(),
                    reason: format!(
                        "declares dim {v} (a dim is a size >= 0, or -1 or '?' for an unknown one)"
                    ),
                })?)
            }
            Some(DimValue::DimParam(p)) if !p.is_empty() && p != "?" => DeclDim::Symbol(p.clone()),
            _ => DeclDim::Anonymous,
        })
    }
}

/// A graph input as declared in the file.
#[derive(Clone, Debug)]
pub struct DeclaredInput {
    /// Name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Declared dims; `None` when the file gives no shape at all.
    pub dims: Option<Vec<DeclDim>>,
}

impl DeclaredInput {
    /// Reads a `ValueInfoProto`.
    pub fn from_proto(vi: &ValueInfoProto) -> Result<DeclaredInput, Error> {
        let name = vi.name().to_string();
        let Some(type_proto::Value::TensorType(tt)) =
            vi.r#type.as_ref().and_then(|t| t.value.as_ref())
        else {
            return Err(Error::InputType {
                input: name,
                reason: "is not a tensor (sequences, maps and optionals are not supported)".into(),
            });
        };
        let dtype = DType::from_onnx(tt.elem_type()).ok_or_else(|| Error::UnsupportedDType {
            name: name.clone(),
            code: tt.elem_type(),
        })?;
        let dims = match &tt.shape {
            None => None,
            Some(s) => Some(
                s.dim
                    .iter()
                    .map(|d| DeclDim::from_proto(&name, d.value.as_ref()))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        Ok(DeclaredInput { name, dtype, dims })
    }

    /// What a user calls dim `i` in `--shape` and what messages call it: a named symbol's
    /// name, `INPUT[i]` for an anonymous dim; `None` for a fixed dim or no such dim.
    pub fn dim_label(&self, i: usize) -> Option<String> {
        match self.dims.as_deref()?.get(i)? {
            DeclDim::Fixed(_) => None,
            DeclDim::Symbol(s) => Some(s.clone()),
            DeclDim::Anonymous => Some(format!("{}[{i}]", self.name)),
        }
    }

    /// The label ([`DeclaredInput::dim_label`]) of the first dim when it is not fixed: a free
    /// batch dim such as `N` in `[N,64]`, or `x[0]` in `[-1,3,224,224]`.
    pub fn leading_symbol(&self) -> Option<String> {
        self.dim_label(0)
    }

    /// `[N,3,224,224]`, `?` for anonymous dims, `[*]` for no declared shape.
    pub fn declared_text(&self) -> String {
        match &self.dims {
            None => "[*]".to_string(),
            Some(dims) => {
                let parts: Vec<String> = dims
                    .iter()
                    .map(|d| match d {
                        DeclDim::Fixed(n) => n.to_string(),
                        DeclDim::Symbol(s) => s.clone(),
                        DeclDim::Anonymous => "?".to_string(),
                    })
                    .collect();
                format!("[{}]", parts.join(","))
            }
        }
    }
}

/// The graph's declared runtime inputs: its `input` list minus those with an initializer
/// (older files list initializers as inputs too).
pub fn declared_inputs(gp: &GraphProto) -> Result<Vec<DeclaredInput>, Error> {
    let init_names: BTreeSet<&str> = gp.initializer.iter().map(|t| t.name()).collect();
    gp.input
        .iter()
        .filter(|vi| !init_names.contains(vi.name()))
        .map(DeclaredInput::from_proto)
        .collect()
}

/// Parses `NAME=1x3x224x224` (a scalar is `NAME=`; `,` is accepted in place of `x`). The
/// sizes follow the last `=`, so a NAME may itself hold `=`, `/`, `:` or `[i]`.
pub fn parse_shape_spec(spec: &str) -> Result<(String, Shape), Error> {
    let err = |reason: &str| Error::ShapeSpec {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    let (name, dims) = spec
        .rsplit_once('=')
        .ok_or_else(|| err("expected NAME=DxDxD"))?;
    if name.is_empty() {
        return Err(err("empty name"));
    }
    let dims = dims.trim();
    let shape = if dims.is_empty() {
        Vec::new()
    } else {
        dims.split(['x', ','])
            .map(|d| {
                d.trim()
                    .parse::<usize>()
                    .map_err(|_| err(&format!("'{d}' is not a dim size")))
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    Ok((name.to_string(), shape))
}
