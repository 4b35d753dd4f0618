//! Binding the open dims of the graph inputs from user-given shapes ([`bind_inputs`]).

use std::collections::BTreeMap;

use super::{DeclDim, DeclaredInput};
use crate::error::Error;
use crate::ir::types::{Shape, TensorType};

/// A dim the declarations leave open.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Var {
    /// A named symbol, shared by every dim with that name.
    Named(String),
    /// Anonymous dim `dim` of input number `input`: its own symbol.
    Anon { input: usize, dim: usize },
}

/// The sizes bound so far.
struct Binder<'a> {
    inputs: &'a [DeclaredInput],
    values: BTreeMap<Var, usize>,
}

impl Binder<'_> {
    /// The open dim `dim` of input number `input` is, `None` when fixed or absent.
    fn var(&self, input: usize, dim: usize) -> Option<Var> {
        match self.inputs.get(input)?.dims.as_deref()?.get(dim)? {
            DeclDim::Fixed(_) => None,
            DeclDim::Symbol(s) => Some(Var::Named(s.clone())),
            DeclDim::Anonymous => Some(Var::Anon { input, dim }),
        }
    }

    /// `N` or `x[0]`: the name `--shape` takes.
    fn label(&self, v: &Var) -> String {
        match v {
            Var::Named(s) => s.clone(),
            Var::Anon { input, dim } => {
                let name = self.inputs.get(*input).map_or("?", |i| i.name.as_str());
                format!("{name}[{dim}]")
            }
        }
    }

    /// Binds `v` to `size`; a different earlier size is an error naming `spec`.
    fn bind(&mut self, v: Var, size: usize, spec: &str) -> Result<(), Error> {
        match self.values.get(&v) {
            Some(&prev) if prev != size => {
                let l = self.label(&v);
                Err(Error::ShapeSpec {
                    spec: spec.to_string(),
                    reason: format!("binds {l}={size} but {l}={prev} already"),
                })
            }
            _ => {
                self.values.insert(v, size);
                Ok(())
            }
        }
    }

    /// Binds dim `dim` of input number `input` (fixed dims must agree).
    fn bind_dim(&mut self, input: usize, dim: usize, size: usize, spec: &str) -> Result<(), Error> {
        if let Some(v) = self.var(input, dim) {
            return self.bind(v, size, spec);
        }
        let Some(decl) = self.inputs.get(input) else {
            return Ok(());
        };
        match decl.dims.as_deref().and_then(|d| d.get(dim)) {
            Some(DeclDim::Fixed(n)) if *n != size => Err(Error::ShapeSpec {
                spec: spec.to_string(),
                reason: format!(
                    "dim {dim} of input '{}' is {n} in the model ({})",
                    decl.name,
                    decl.declared_text()
                ),
            }),
            _ => Ok(()),
        }
    }
}

/// `x=1x3x224x224` as the user would write it.
fn spec_text(name: &str, shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("{name}={}", dims.join("x"))
}

/// `NAME[i]` where NAME is a graph input: `(input number, i)`. An index past the input's
/// declared rank, or an input with no declared shape, is an error.
fn dim_ref(
    inputs: &[DeclaredInput],
    name: &str,
    spec: &str,
) -> Result<Option<(usize, usize)>, Error> {
    let Some((base, index)) = name.strip_suffix(']').and_then(|s| s.rsplit_once('[')) else {
        return Ok(None);
    };
    let (Some(k), Ok(i)) = (
        inputs.iter().position(|d| d.name == base),
        index.parse::<usize>(),
    ) else {
        return Ok(None);
    };
    let err = |reason: String| Error::ShapeSpec {
        spec: spec.to_string(),
        reason,
    };
    let decl = &inputs[k]; // k came from `position` over `inputs`
    match &decl.dims {
        None => Err(err(format!(
            "input '{base}' declares no shape: give its whole shape, {base}=DxD..."
        ))),
        Some(dims) if i >= dims.len() => Err(err(format!(
            "input '{base}' has {} dims ({}): no dim {i}",
            dims.len(),
            decl.declared_text()
        ))),
        Some(_) => Ok(Some((k, i))),
    }
}

/// Resolves every input's static type from the declarations and the user's shapes.
/// Returns the types in declaration order and the warnings for dims defaulted to 1.
///
/// Each `(NAME, sizes)` in `given` names, in this order of precedence: a graph input (its
/// whole shape: fixed dims must agree, open dims are bound), a named symbol (one size), or
/// `INPUT[i]`, dim `i` of a graph input (one size; binds the dim's symbol if it is named).
/// Anything else, a rank or fixed dim that disagrees, or two sizes for one symbol is an error.
pub fn bind_inputs(
    inputs: &[DeclaredInput],
    given: &[(String, Shape)],
) -> Result<(Vec<TensorType>, Vec<String>), Error> {
    let mut b = Binder {
        inputs,
        values: BTreeMap::new(),
    };
    let is_symbol = |name: &str| {
        inputs
            .iter()
            .flat_map(|i| i.dims.iter().flatten())
            .any(|d| matches!(d, DeclDim::Symbol(s) if s == name))
    };
    // Single dims first (symbols and INPUT[i]), then whole shapes checked against them.
    let mut whole: Vec<Option<&Shape>> = vec![None; inputs.len()];
    for (name, shape) in given {
        let spec = spec_text(name, shape);
        if let Some(k) = inputs.iter().position(|i| i.name == *name) {
            whole[k] = Some(shape);
            continue;
        }
        let one = || match shape.as_slice() {
            [n] => Ok(*n),
            _ => Err(Error::ShapeSpec {
                spec: spec.clone(),
                reason: format!("'{name}' is one dim: it takes one size, e.g. {name}=8"),
            }),
        };
        if is_symbol(name) {
            b.bind(Var::Named(name.clone()), one()?, &spec)?;
        } else if let Some((k, i)) = dim_ref(inputs, name, &spec)? {
            b.bind_dim(k, i, one()?, &spec)?;
        } else {
            let names: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
            return Err(Error::ShapeSpec {
                spec,
                reason: format!(
                    "'{name}' names no graph input, symbolic dim or input dim INPUT[i] \
                     (inputs: {})",
                    names.join(", ")
                ),
            });
        }
    }
    for (k, input) in inputs.iter().enumerate() {
        let (Some(shape), Some(dims)) = (whole[k], &input.dims) else {
            continue;
        };
        if dims.len() != shape.len() {
            return Err(Error::InputShape {
                input: input.name.clone(),
                declared: input.declared_text(),
                given: shape.clone(),
            });
        }
        let spec = spec_text(&input.name, shape);
        for (i, (d, &g)) in dims.iter().zip(shape.iter()).enumerate() {
            if matches!(d, DeclDim::Fixed(n) if *n != g) {
                return Err(Error::InputShape {
                    input: input.name.clone(),
                    declared: input.declared_text(),
                    given: shape.clone(),
                });
            }
            b.bind_dim(k, i, g, &spec)?;
        }
    }

    let mut defaulted: Vec<Var> = Vec::new();
    let mut example_input = None;
    let mut types = Vec::with_capacity(inputs.len());
    for (k, input) in inputs.iter().enumerate() {
        let shape: Shape = if let Some(shape) = whole[k] {
            shape.clone()
        } else {
            let Some(dims) = &input.dims else {
                return Err(Error::InputType {
                    input: input.name.clone(),
                    reason: "declares no shape; give one with --shape".into(),
                });
            };
            let mut shape = Vec::with_capacity(dims.len());
            for (i, d) in dims.iter().enumerate() {
                shape.push(match (d, b.var(k, i)) {
                    (DeclDim::Fixed(n), _) => *n,
                    (_, Some(v)) => match b.values.get(&v) {
                        Some(&n) => n,
                        None => {
                            example_input.get_or_insert(k);
                            if !defaulted.contains(&v) {
                                defaulted.push(v);
                            }
                            1
                        }
                    },
                    (_, None) => 1,
                });
            }
            shape
        };
        types.push(TensorType::new(input.dtype, shape));
    }
    let warnings = match example_input {
        Some(k) => vec![defaulted_warning(&b, &defaulted, &inputs[k])],
        None => Vec::new(),
    };
    Ok((types, warnings))
}

/// `unbound symbolic dims default to 1: 'N', x[0]; bind them with --shape: ...`, with
/// examples made of the model's own names.
fn defaulted_warning(b: &Binder<'_>, defaulted: &[Var], example: &DeclaredInput) -> String {
    let names: Vec<String> = defaulted
        .iter()
        .map(|v| match v {
            Var::Named(s) => format!("'{s}'"),
            Var::Anon { .. } => b.label(v),
        })
        .collect();
    let mut how = Vec::new();
    if let Some(Var::Named(s)) = defaulted.iter().find(|v| matches!(v, Var::Named(_))) {
        how.push(format!("a symbol as {s}=8"));
    }
    if let Some(v) = defaulted.iter().find(|v| matches!(v, Var::Anon { .. })) {
        how.push(format!(
            "an unnamed dim (-1, '?' or none) as {}=8",
            b.label(v)
        ));
    }
    let dims: Vec<String> = example
        .dims
        .iter()
        .flatten()
        .map(|d| match d {
            DeclDim::Fixed(n) => n.to_string(),
            _ => "D".to_string(),
        })
        .collect();
    how.push(format!(
        "a whole input as {}={}",
        example.name,
        dims.join("x")
    ));
    format!(
        "unbound symbolic dims default to 1: {}; bind them with --shape: {}",
        names.join(", "),
        how.join(", ")
    )
}
