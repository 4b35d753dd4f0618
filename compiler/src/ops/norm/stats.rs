//! The statistics-based normalizations: BatchNormalization, LayerNormalization,
//! InstanceNormalization, GroupNormalization, MeanVarianceNormalization, RMSNormalization.
//!
//! Each normalizes X by a mean and variance computed over a set of its elements (a "group":
//! the elements sharing their coordinates on the kept dims), then applies a scale and a bias
//! broadcast its own way. The reference evaluation computes every group's moments in `f64`
//! (two passes: the mean, then the centered squares), then each element.

use super::{expect_float, input, numel};
use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::TensorType;
use crate::ops::Op;
use crate::ops::util::{broadcast_index_map, broadcast_shapes, expect_arity, wrong_family};

/// MeanVarianceNormalization's epsilon, added to the standard deviation (its function body).
pub const MVN_EPSILON: f64 = 1e-9;

/// Whether `op` is one of this file's ops.
pub(super) fn is_stats(op: &Op) -> bool {
    matches!(
        op,
        Op::BatchNormalization { .. }
            | Op::LayerNormalization { .. }
            | Op::InstanceNormalization { .. }
            | Op::GroupNormalization { .. }
            | Op::MeanVarianceNormalization { .. }
            | Op::RmsNormalization { .. }
    )
}

fn per_channel(x: &TensorType, p: &TensorType, len: usize, what: &str) -> Result<(), OpError> {
    if p.shape != [len] {
        return Err(OpError::shape(
            format!("{what} must have shape [{len}]"),
            &[&x.shape, &p.shape],
        ));
    }
    Ok(())
}

fn rank_at_least(x: &TensorType, r: usize) -> Result<(), OpError> {
    if x.shape.len() < r {
        return Err(OpError::shape(
            format!("X must have rank >= {r} (N, C, ...)"),
            &[&x.shape],
        ));
    }
    Ok(())
}

/// Parameters that broadcast (numpy-style) to X's shape without growing it.
fn broadcast_params(x: &TensorType, params: &[TensorType]) -> Result<(), OpError> {
    for p in params {
        let b = broadcast_shapes(&[&x.shape, &p.shape])?;
        if b != x.shape {
            return Err(OpError::shape(
                "scale/bias must broadcast to X's shape",
                &[&x.shape, &p.shape],
            ));
        }
    }
    Ok(())
}

/// Shape and type inference.
pub(super) fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let arity = match op {
        Op::BatchNormalization { .. } => 5..=5,
        Op::LayerNormalization { .. } => 2..=3,
        Op::InstanceNormalization { .. } | Op::GroupNormalization { .. } => 3..=3,
        Op::MeanVarianceNormalization { .. } => 1..=1,
        Op::RmsNormalization { .. } => 2..=2,
        _ => return Err(wrong_family(op, "norm")),
    };
    if !arity.contains(&inputs.len()) {
        return Err(OpError::Arity {
            expected: format!("{} to {}", arity.start(), arity.end()),
            actual: inputs.len(),
        });
    }
    for i in 0..inputs.len() {
        expect_float(inputs, i)?;
    }
    let x = &inputs[0];
    numel(x)?;
    let rank = x.shape.len();
    let axis_ok = |axis: usize| {
        if axis >= rank {
            return Err(OpError::shape(
                format!("axis {axis} out of range"),
                &[&x.shape],
            ));
        }
        Ok(())
    };
    match op {
        Op::BatchNormalization { training, .. } => {
            expect_arity(inputs, 5)?;
            rank_at_least(x, 2)?;
            let c = x.shape[1];
            for p in &inputs[1..] {
                per_channel(x, p, c, "scale, B, mean and var")?;
            }
            let mut out = vec![x.clone()];
            if training.is_some() {
                out.push(inputs[3].clone());
                out.push(inputs[4].clone());
            }
            Ok(out)
        }
        Op::LayerNormalization { axis, stats, .. } => {
            axis_ok(*axis)?;
            broadcast_params(x, &inputs[1..])?;
            let mut out = vec![x.clone()];
            if let Some(d) = stats {
                let mut shape = x.shape[..*axis].to_vec();
                shape.resize(rank, 1);
                let t = TensorType::new(*d, shape);
                out.push(t.clone());
                out.push(t);
            }
            Ok(out)
        }
        Op::InstanceNormalization { .. } => {
            rank_at_least(x, 2)?;
            for p in &inputs[1..] {
                per_channel(x, p, x.shape[1], "scale and B")?;
            }
            Ok(vec![x.clone()])
        }
        Op::GroupNormalization {
            groups,
            per_channel: pc,
            ..
        } => {
            rank_at_least(x, 2)?;
            let c = x.shape[1];
            if !c.is_multiple_of(*groups) {
                return Err(OpError::shape(
                    format!("num_groups {groups} does not divide the {c} channels"),
                    &[&x.shape],
                ));
            }
            let len = if *pc { c } else { *groups };
            for p in &inputs[1..] {
                per_channel(x, p, len, "scale and bias")?;
            }
            Ok(vec![x.clone()])
        }
        Op::MeanVarianceNormalization { axes } => {
            for &a in axes {
                axis_ok(a)?;
            }
            Ok(vec![x.clone()])
        }
        Op::RmsNormalization { axis, .. } => {
            axis_ok(*axis)?;
            broadcast_params(x, &inputs[1..])?;
            Ok(vec![TensorType::new(inputs[1].dtype, x.shape.clone())])
        }
        _ => Err(wrong_family(op, "norm")),
    }
}

/// For each element of `shape`, the index of its group: the row-major index of its
/// coordinates on the dims not `reduced`; with the number of groups.
fn groups_of(shape: &[usize], reduced: &[bool]) -> (Vec<usize>, usize) {
    let numel: usize = shape.iter().product();
    let count: usize = shape
        .iter()
        .zip(reduced)
        .filter(|(_, r)| !**r)
        .map(|(d, _)| d)
        .product();
    let mut out = vec![0; numel];
    // Odometer over the coordinates.
    let mut coord = vec![0usize; shape.len()];
    for g in out.iter_mut() {
        *g = coord
            .iter()
            .zip(shape)
            .zip(reduced)
            .filter(|(_, r)| !**r)
            .fold(0, |acc, ((&c, &d), _)| acc * d + c);
        for k in (0..shape.len()).rev() {
            coord[k] += 1;
            if coord[k] < shape[k] {
                break;
            }
            coord[k] = 0;
        }
    }
    (out, count)
}

/// Per group: the mean and the variance (centered second moment), or with `center` false a
/// zero mean and the mean square.
fn moments(xv: &[f64], group: &[usize], count: usize, center: bool) -> (Vec<f64>, Vec<f64>) {
    let mut n = vec![0usize; count];
    let mut mean = vec![0.0; count];
    if center {
        for (&x, &g) in xv.iter().zip(group) {
            mean[g] += x;
            n[g] += 1;
        }
        for (m, &k) in mean.iter_mut().zip(&n) {
            *m /= k.max(1) as f64;
        }
    } else {
        for &g in group {
            n[g] += 1;
        }
    }
    let mut var = vec![0.0; count];
    for (&x, &g) in xv.iter().zip(group) {
        let d = x - mean[g];
        var[g] += d * d;
    }
    for (v, &k) in var.iter_mut().zip(&n) {
        *v /= k.max(1) as f64;
    }
    (mean, var)
}

/// Multiplies `y` by `scale` and adds `bias`, both broadcast to `shape`.
fn scale_bias(y: &mut [f64], shape: &[usize], scale: &Tensor, bias: Option<&Tensor>) {
    let sv = scale.to_f64_vec();
    for (yi, &si) in y.iter_mut().zip(&broadcast_index_map(scale.shape(), shape)) {
        *yi *= sv[si];
    }
    if let Some(bias) = bias {
        let bv = bias.to_f64_vec();
        for (yi, &bi) in y.iter_mut().zip(&broadcast_index_map(bias.shape(), shape)) {
            *yi += bv[bi];
        }
    }
}

/// Reference evaluation.
pub(super) fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out_types = infer(op, &types)?;
    let x = input(inputs, 0)?;
    let shape = x.shape().to_vec();
    let rank = shape.len();
    let xv = x.to_f64_vec();
    let from = |i: usize| inputs.get(i).map(|t| t.to_f64_vec()).unwrap_or_default();
    // Per-channel parameters of an NC... tensor: the channel of element i.
    let inner: usize = shape.get(2..).unwrap_or_default().iter().product();
    let channel = |i: usize| (i / inner.max(1)) % shape.get(1).copied().unwrap_or(1).max(1);
    let normalize = |group: &[usize], mean: &[f64], var: &[f64], eps: f64| -> Vec<f64> {
        xv.iter()
            .zip(group)
            .map(|(&x, &g)| (x - mean[g]) / (var[g] + eps).sqrt())
            .collect::<Vec<f64>>()
    };
    let mut extra: Vec<Vec<f64>> = Vec::new();
    let y = match op {
        Op::BatchNormalization { epsilon, training } => {
            let [scale, b, in_mean, in_var] = [1, 2, 3, 4].map(from);
            let eps = f64::from(*epsilon);
            let (mean, var) = match training {
                Some(m) => {
                    let reduced: Vec<bool> = (0..rank).map(|d| d != 1).collect();
                    let (group, count) = groups_of(&shape, &reduced);
                    let (mean, var) = moments(&xv, &group, count, true);
                    let m = f64::from(*m);
                    let run = |input: &[f64], batch: &[f64]| -> Vec<f64> {
                        input
                            .iter()
                            .zip(batch)
                            .map(|(i, b)| i * m + b * (1.0 - m))
                            .collect()
                    };
                    extra.push(run(&in_mean, &mean));
                    extra.push(run(&in_var, &var));
                    (mean, var)
                }
                None => (in_mean, in_var),
            };
            xv.iter()
                .enumerate()
                .map(|(i, &xi)| {
                    let c = channel(i);
                    (xi - mean[c]) / (var[c] + eps).sqrt() * scale[c] + b[c]
                })
                .collect()
        }
        Op::LayerNormalization {
            axis,
            epsilon,
            stats,
        } => {
            let reduced: Vec<bool> = (0..rank).map(|d| d >= *axis).collect();
            let (group, count) = groups_of(&shape, &reduced);
            let (mean, var) = moments(&xv, &group, count, true);
            let eps = f64::from(*epsilon);
            let mut y = normalize(&group, &mean, &var, eps);
            scale_bias(&mut y, &shape, input(inputs, 1)?, inputs.get(2).copied());
            if stats.is_some() {
                extra.push(var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect());
                extra.insert(0, mean);
            }
            y
        }
        Op::InstanceNormalization { epsilon } => {
            let reduced: Vec<bool> = (0..rank).map(|d| d >= 2).collect();
            let (group, count) = groups_of(&shape, &reduced);
            let (mean, var) = moments(&xv, &group, count, true);
            let (scale, b) = (from(1), from(2));
            normalize(&group, &mean, &var, f64::from(*epsilon))
                .iter()
                .enumerate()
                .map(|(i, v)| v * scale[channel(i)] + b[channel(i)])
                .collect()
        }
        Op::GroupNormalization {
            groups,
            epsilon,
            per_channel,
        } => {
            // X as [N, groups, C/groups * inner].
            let c = shape[1];
            let virt = [shape[0], *groups, (c / groups) * inner];
            let (group, count) = groups_of(&virt, &[false, false, true]);
            let (mean, var) = moments(&xv, &group, count, true);
            let (scale, b) = (from(1), from(2));
            let param = |i: usize| {
                if *per_channel {
                    channel(i)
                } else {
                    channel(i) / (c / groups).max(1)
                }
            };
            normalize(&group, &mean, &var, f64::from(*epsilon))
                .iter()
                .enumerate()
                .map(|(i, v)| v * scale[param(i)] + b[param(i)])
                .collect()
        }
        Op::MeanVarianceNormalization { axes } => {
            let reduced: Vec<bool> = (0..rank).map(|d| axes.contains(&d)).collect();
            let (group, count) = groups_of(&shape, &reduced);
            let (mean, var) = moments(&xv, &group, count, true);
            xv.iter()
                .zip(&group)
                .map(|(&x, &g)| (x - mean[g]) / (var[g].sqrt() + MVN_EPSILON))
                .collect()
        }
        Op::RmsNormalization { axis, epsilon } => {
            let reduced: Vec<bool> = (0..rank).map(|d| d >= *axis).collect();
            let (group, count) = groups_of(&shape, &reduced);
            let zero = vec![0.0; count];
            let (_, ms) = moments(&xv, &group, count, false);
            let mut y = normalize(&group, &zero, &ms, f64::from(*epsilon));
            scale_bias(&mut y, &shape, input(inputs, 1)?, None);
            y
        }
        _ => return Err(wrong_family(op, "norm")),
    };
    let mut out = vec![Tensor::from_f64(out_types[0].dtype, shape, &y)];
    for (t, v) in out_types[1..].iter().zip(&extra) {
        out.push(Tensor::from_f64(t.dtype, t.shape.clone(), v));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
