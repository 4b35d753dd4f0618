//! The `activations` attribute of LSTM/GRU/RNN: names, their alpha/beta parameters, and the
//! nodes each one becomes.

use crate::error::{OpError, Result};

use super::emit::{A, Emitter};

/// One activation function with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Act {
    /// An ONNX op of one input and no attributes (Sigmoid, Tanh, Relu, Softsign, Softplus).
    Plain(&'static str),
    /// An ONNX op with an `alpha` attribute (LeakyRelu, ThresholdedRelu, Elu).
    Alpha(&'static str, f32),
    /// HardSigmoid(alpha, beta).
    HardSigmoid(f32, f32),
    /// `alpha * x + beta`.
    Affine(f32, f32),
    /// `alpha * tanh(beta * x)`.
    ScaledTanh(f32, f32),
}

/// How a name's parameters are used: (canonical op, default alpha, default beta).
fn lookup(name: &str) -> Option<(&'static str, Option<f32>, Option<f32>)> {
    Some(match name.to_ascii_lowercase().as_str() {
        "sigmoid" => ("Sigmoid", None, None),
        "tanh" => ("Tanh", None, None),
        "relu" => ("Relu", None, None),
        "softsign" => ("Softsign", None, None),
        "softplus" => ("Softplus", None, None),
        "leakyrelu" => ("LeakyRelu", Some(0.01), None),
        "thresholdedrelu" => ("ThresholdedRelu", Some(1.0), None),
        "elu" => ("Elu", Some(1.0), None),
        "hardsigmoid" => ("HardSigmoid", Some(0.2), Some(0.5)),
        "affine" => ("Affine", Some(1.0), Some(0.0)),
        "scaledtanh" => ("ScaledTanh", Some(1.0), Some(1.0)),
        _ => return None,
    })
}

/// The activations of every direction, `per_dir` each (direction 0's first). `names` holds
/// either `per_dir * directions` names or `per_dir` (used for every direction); absent, the
/// defaults. Alphas and betas are consumed in order by the functions that take them (as
/// onnxruntime does); when they run out, the op's ONNX default applies.
pub(super) fn parse(
    names: Option<Vec<String>>,
    alphas: &[f32],
    betas: &[f32],
    defaults: &[&str],
    directions: usize,
) -> Result<Vec<Act>, OpError> {
    let per_dir = defaults.len();
    let names: Vec<String> = match names {
        None => defaults.iter().map(|s| s.to_string()).collect(),
        Some(v) => v,
    };
    let names: Vec<String> = if names.len() == per_dir * directions {
        names
    } else if names.len() == per_dir {
        (0..directions)
            .flat_map(|_| names.iter().cloned())
            .collect()
    } else {
        return Err(OpError::attr(
            "activations",
            format!(
                "{} names given; this op takes {per_dir} per direction ({} for {directions} \
                 direction(s))",
                names.len(),
                per_dir * directions
            ),
        ));
    };
    let (mut ai, mut bi) = (alphas.iter(), betas.iter());
    names
        .iter()
        .map(|n| {
            let (op, alpha, beta) = lookup(n).ok_or_else(|| {
                OpError::Unsupported(format!(
                    "activation '{n}' (arenac has Sigmoid, Tanh, Relu, Softsign, Softplus, \
                     LeakyRelu, ThresholdedRelu, Elu, HardSigmoid, Affine, ScaledTanh)"
                ))
            })?;
            let alpha = alpha.map(|d| ai.next().copied().unwrap_or(d));
            let beta = beta.map(|d| bi.next().copied().unwrap_or(d));
            Ok(match (op, alpha, beta) {
                ("HardSigmoid", Some(a), Some(b)) => Act::HardSigmoid(a, b),
                ("Affine", Some(a), Some(b)) => Act::Affine(a, b),
                ("ScaledTanh", Some(a), Some(b)) => Act::ScaledTanh(a, b),
                (op, Some(a), None) => Act::Alpha(op, a),
                (op, _, _) => Act::Plain(op),
            })
        })
        .collect()
}

/// Emits `act(x)`; returns the result's name.
pub(super) fn apply(em: &mut Emitter<'_>, act: &Act, what: &str, x: &str) -> Result<String> {
    match *act {
        Act::Plain(op) => em.node(op, what, &[x], vec![], None),
        Act::Alpha(op, a) => em.node(op, what, &[x], vec![("alpha", A::Float(a))], None),
        Act::HardSigmoid(a, b) => em.node(
            "HardSigmoid",
            what,
            &[x],
            vec![("alpha", A::Float(a)), ("beta", A::Float(b))],
            None,
        ),
        Act::Affine(a, b) => {
            let ca = em.scalar(f64::from(a))?;
            let cb = em.scalar(f64::from(b))?;
            let ax = em.bin("Mul", &format!("{what}.ax"), x, &ca)?;
            em.bin("Add", what, &ax, &cb)
        }
        Act::ScaledTanh(a, b) => {
            let ca = em.scalar(f64::from(a))?;
            let cb = em.scalar(f64::from(b))?;
            let bx = em.bin("Mul", &format!("{what}.bx"), x, &cb)?;
            let t = em.node("Tanh", &format!("{what}.tanh"), &[&bx], vec![], None)?;
            em.bin("Mul", what, &t, &ca)
        }
    }
}
