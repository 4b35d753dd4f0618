//! Graph inputs: declared types, symbolic dims, and binding them from user-given shapes.
//!
//! A user shape `NAME=DxD...` names either a graph input (binding its whole shape and, through
//! it, every symbolic dim it declares) or a symbolic dim itself (`N=8`). Dims still unbound
//! afterwards default to 1, with a warning naming them.

use std::collections::{BTreeMap, BTreeSet};

use arenac_proto::{
    GraphProto, ValueInfoProto, tensor_shape_proto::dimension::Value as DimValue, type_proto,
};

use crate::error::Error;
use crate::ir::types::{DType, Shape, TensorType};

/// A declared dim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeclDim {
    /// A fixed size.
    Fixed(usize),
    /// A named symbol (`dim_param`).
    Symbol(String),
    /// Neither value nor name.
    Unknown,
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
        let bad = |reason: &str| Error::InputType {
            input: name.clone(),
            reason: reason.to_string(),
        };
        let Some(type_proto::Value::TensorType(tt)) =
            vi.r#type.as_ref().and_then(|t| t.value.as_ref())
        else {
            return Err(bad(
                "is not a tensor (sequences, maps and optionals are not supported)",
            ));
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
                    .map(|d| match &d.value {
                        Some(DimValue::DimValue(v)) => usize::try_from(*v)
                            .map(DeclDim::Fixed)
                            .map_err(|_| bad(&format!("negative dim {v}"))),
                        Some(DimValue::DimParam(p)) if !p.is_empty() => {
                            Ok(DeclDim::Symbol(p.clone()))
                        }
                        _ => Ok(DeclDim::Unknown),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        Ok(DeclaredInput { name, dtype, dims })
    }

    /// The symbol naming the first dim (a free batch dim such as `N` in `[N,64]`), if any.
    pub fn leading_symbol(&self) -> Option<&str> {
        match self.dims.as_deref()?.first()? {
            DeclDim::Symbol(s) => Some(s),
            _ => None,
        }
    }

    /// `[N,3,224,224]`, `?` for unknown dims, `[*]` for no declared shape.
    pub fn declared_text(&self) -> String {
        match &self.dims {
            None => "[*]".to_string(),
            Some(dims) => {
                let parts: Vec<String> = dims
                    .iter()
                    .map(|d| match d {
                        DeclDim::Fixed(n) => n.to_string(),
                        DeclDim::Symbol(s) => s.clone(),
                        DeclDim::Unknown => "?".to_string(),
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

/// Parses `NAME=1x3x224x224` (a scalar is `NAME=`; `,` is accepted in place of `x`).
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

/// Resolves every input's static type from the declarations and the user's shapes.
/// Returns the types in declaration order and the warnings for dims defaulted to 1.
pub fn bind_inputs(
    inputs: &[DeclaredInput],
    given: &[(String, Shape)],
) -> Result<(Vec<TensorType>, Vec<String>), Error> {
    let mut symbols: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_input: BTreeMap<&str, &Shape> = BTreeMap::new();
    for (name, shape) in given {
        if inputs.iter().any(|i| &i.name == name) {
            by_input.insert(name, shape);
        } else if inputs.iter().any(|i| {
            i.dims
                .iter()
                .flatten()
                .any(|d| *d == DeclDim::Symbol(name.clone()))
        }) {
            match shape.as_slice() {
                [n] => {
                    symbols.insert(name.clone(), *n);
                }
                _ => {
                    return Err(Error::ShapeSpec {
                        spec: name.clone(),
                        reason: "a symbolic dim takes one size, e.g. N=8".into(),
                    });
                }
            }
        } else {
            let names: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
            return Err(Error::ShapeSpec {
                spec: name.clone(),
                reason: format!(
                    "names no graph input or symbolic dim (inputs: {})",
                    names.join(", ")
                ),
            });
        }
    }
    // Bind symbols from whole-input shapes first, checking fixed dims.
    for input in inputs {
        let Some(shape) = by_input.get(input.name.as_str()) else {
            continue;
        };
        let mismatch = || Error::InputShape {
            input: input.name.clone(),
            declared: input.declared_text(),
            given: (*shape).clone(),
        };
        let Some(dims) = &input.dims else { continue };
        if dims.len() != shape.len() {
            return Err(mismatch());
        }
        for (d, &g) in dims.iter().zip(shape.iter()) {
            match d {
                DeclDim::Fixed(n) if *n != g => return Err(mismatch()),
                DeclDim::Symbol(s) => {
                    if let Some(&prev) = symbols.get(s) {
                        if prev != g {
                            return Err(Error::ShapeSpec {
                                spec: format!(
                                    "{}={}",
                                    input.name,
                                    crate::ops::util::fmt_shape(shape)
                                ),
                                reason: format!("binds {s}={g} but {s}={prev} already"),
                            });
                        }
                    } else {
                        symbols.insert(s.clone(), g);
                    }
                }
                _ => {}
            }
        }
    }
    let mut warnings = Vec::new();
    let mut defaulted: BTreeMap<String, ()> = BTreeMap::new();
    let mut types = Vec::with_capacity(inputs.len());
    for input in inputs {
        let shape: Shape = if let Some(shape) = by_input.get(input.name.as_str()) {
            (*shape).clone()
        } else {
            let Some(dims) = &input.dims else {
                return Err(Error::InputType {
                    input: input.name.clone(),
                    reason: "declares no shape; give one with --shape".into(),
                });
            };
            dims.iter()
                .enumerate()
                .map(|(i, d)| match d {
                    DeclDim::Fixed(n) => *n,
                    DeclDim::Symbol(s) => *symbols.get(s).unwrap_or_else(|| {
                        defaulted.insert(format!("'{s}'"), ());
                        &1
                    }),
                    DeclDim::Unknown => {
                        defaulted.insert(format!("{}[{i}]", input.name), ());
                        1
                    }
                })
                .collect()
        };
        types.push(TensorType::new(input.dtype, shape));
    }
    if !defaulted.is_empty() {
        let names: Vec<&str> = defaulted.keys().map(String::as_str).collect();
        warnings.push(format!(
            "unbound symbolic dims default to 1: {} (bind them with --shape)",
            names.join(", ")
        ));
    }
    Ok((types, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(name: &str, dims: Vec<DeclDim>) -> DeclaredInput {
        DeclaredInput {
            name: name.into(),
            dtype: DType::F32,
            dims: Some(dims),
        }
    }

    #[test]
    fn spec_parsing() {
        assert_eq!(
            parse_shape_spec("x=1x3x224x224").unwrap(),
            ("x".into(), vec![1, 3, 224, 224])
        );
        assert_eq!(parse_shape_spec("s=").unwrap(), ("s".into(), vec![]));
        assert!(parse_shape_spec("x").is_err());
        assert!(parse_shape_spec("x=1xb").is_err());
    }

    #[test]
    fn binds_symbols_across_inputs() {
        let ins = [
            decl("a", vec![DeclDim::Symbol("N".into()), DeclDim::Fixed(3)]),
            decl("b", vec![DeclDim::Symbol("N".into())]),
        ];
        let (types, warnings) = bind_inputs(&ins, &[("a".into(), vec![4, 3])]).unwrap();
        assert_eq!(types[1].shape, vec![4]);
        assert!(warnings.is_empty());
        let (types, warnings) = bind_inputs(&ins, &[]).unwrap();
        assert_eq!(types[0].shape, vec![1, 3]);
        assert!(warnings[0].contains("'N'"), "{warnings:?}");
        assert!(bind_inputs(&ins, &[("a".into(), vec![4, 5])]).is_err());
        let (types, _) = bind_inputs(&ins, &[("N".into(), vec![7])]).unwrap();
        assert_eq!(types[1].shape, vec![7]);
        assert!(bind_inputs(&ins, &[("zz".into(), vec![7])]).is_err());
    }
}
