//! Lowering of the statistics-based normalizations to [`NormDesc`] kernels: each op says which
//! dims of X are reduced, how its scale and bias move along X's dims (byte steps, 0 where
//! broadcast), and where its statistics go.

use super::{Ctx, RowSplit, prod, rows_call};
use crate::codegen::kernels::norm::{Level, NormDesc, Stats, merge_levels};
use crate::codegen::program::{Operand, Program};
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::ops::Op;
use crate::ops::norm::stats::MVN_EPSILON;

/// Byte steps of a contiguous f32 tensor of `shape`.
fn steps(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![0; shape.len()];
    let mut acc = 4;
    for (k, &d) in shape.iter().enumerate().rev() {
        s[k] = acc;
        acc *= d;
    }
    s
}

/// Byte steps of an f32 parameter of shape `p` broadcast (right-aligned) to `shape`: 0 on the
/// dims it does not have or has as 1.
fn bcast_steps(p: &[usize], shape: &[usize]) -> Vec<usize> {
    let own = steps(p);
    let lead = shape.len().saturating_sub(p.len());
    (0..shape.len())
        .map(|k| match k.checked_sub(lead) {
            Some(j) if p.get(j).is_some_and(|&d| d != 1) => own[j],
            _ => 0,
        })
        .collect()
}

/// The dims of X (`shape`, contiguous) split into outer (kept) and inner (`reduced`) levels.
/// `stat` gives the statistics' steps on kept dims: contiguous over them when None.
fn levels(
    shape: &[usize],
    reduced: &[bool],
    scale: &[usize],
    bias: &[usize],
    stat: Option<&[usize]>,
) -> (Vec<Level>, Vec<Level>) {
    let xs = steps(shape);
    let kept: Vec<usize> = (0..shape.len()).filter(|&k| !reduced[k]).collect();
    let kept_shape: Vec<usize> = kept.iter().map(|&k| shape[k]).collect();
    let kept_steps = steps(&kept_shape);
    let (mut outer, mut inner) = (Vec::new(), Vec::new());
    for k in 0..shape.len() {
        let stat_step = match (reduced[k], stat) {
            (true, _) => 0,
            (false, Some(s)) => s.get(k).copied().unwrap_or(0),
            (false, None) => kept
                .iter()
                .position(|&j| j == k)
                .map_or(0, |i| kept_steps[i]),
        };
        let l = Level {
            count: shape[k],
            x: xs[k],
            scale: scale.get(k).copied().unwrap_or(0),
            bias: bias.get(k).copied().unwrap_or(0),
            stat: stat_step,
        };
        if reduced[k] { &mut inner } else { &mut outer }.push(l);
    }
    (merge_levels(&outer), merge_levels(&inner))
}

/// Emits the kernel of a statistics normalization node (`op` one of them).
pub(super) fn stats_norm(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    cx.all_f32()?;
    let n = cx.g.node(cx.id);
    let x = cx.input(0)?;
    let xs = cx.ty(x).shape.clone();
    let rank = xs.len();
    let zeros = vec![0; rank];
    let pshape = |i: usize| n.inputs.get(i).map(|&v| cx.ty(v).shape.clone());
    let mut desc = NormDesc {
        outer: vec![],
        inner: vec![],
        epsilon: 0.0,
        eps_after_sqrt: false,
        center: true,
        has_scale: true,
        has_bias: true,
        stats: Stats::None,
    };
    // Operands by input index.
    let mut ops: [Operand; 4] = [Operand::Null; 4];
    let mut operand = |i: usize| -> Result<Operand, Error> {
        match n.inputs.get(i) {
            Some(&v) => cx.operand(v, w),
            None => Ok(Operand::Null),
        }
    };
    let c = xs.get(1).copied().unwrap_or(1);
    let spatial = prod(xs.get(2..).unwrap_or_default());
    match &n.op {
        Op::BatchNormalization { epsilon, training } => {
            desc.epsilon = *epsilon;
            let shape = [xs.first().copied().unwrap_or(1), c, spatial];
            let per_c = [0, 4, 0];
            let (o, i) = match training {
                Some(m) => {
                    desc.stats = Stats::Running(*m);
                    levels(&shape, &[true, false, true], &per_c, &per_c, None)
                }
                None => {
                    desc.stats = Stats::Given;
                    levels(&shape, &[false, false, true], &per_c, &per_c, Some(&per_c))
                }
            };
            (desc.outer, desc.inner) = (o, i);
            ops[2] = operand(3)?;
            ops[3] = operand(4)?;
        }
        Op::LayerNormalization {
            axis,
            epsilon,
            stats,
        } => {
            desc.epsilon = *epsilon;
            desc.has_bias = n.inputs.len() > 2;
            if stats.is_some() {
                desc.stats = Stats::MeanInvStd;
            }
            let reduced: Vec<bool> = (0..rank).map(|k| k >= *axis).collect();
            let sc = bcast_steps(&pshape(1).unwrap_or_default(), &xs);
            let bi = pshape(2).map_or_else(|| zeros.clone(), |p| bcast_steps(&p, &xs));
            // A parameter that moves along a kept dim would need a per-group parameter walk
            // the kernel does not do.
            if (0..*axis).any(|k| sc[k] != 0 || bi[k] != 0) {
                return Err(cx.err(
                    "no kernel for LayerNormalization with scale/bias varying over the \
                     dims before axis",
                ));
            }
            (desc.outer, desc.inner) = levels(&xs, &reduced, &sc, &bi, None);
        }
        Op::RmsNormalization { axis, epsilon } => {
            desc.epsilon = *epsilon;
            desc.center = false;
            desc.has_bias = false;
            let reduced: Vec<bool> = (0..rank).map(|k| k >= *axis).collect();
            let sc = bcast_steps(&pshape(1).unwrap_or_default(), &xs);
            if (0..*axis).any(|k| sc[k] != 0) {
                return Err(cx.err(
                    "no kernel for RMSNormalization with a scale varying over the dims \
                     before axis",
                ));
            }
            (desc.outer, desc.inner) = levels(&xs, &reduced, &sc, &zeros, None);
        }
        Op::InstanceNormalization { epsilon } => {
            desc.epsilon = *epsilon;
            let shape = [xs.first().copied().unwrap_or(1), c, spatial];
            let per_c = [0, 4, 0];
            (desc.outer, desc.inner) = levels(&shape, &[false, false, true], &per_c, &per_c, None);
        }
        Op::GroupNormalization {
            groups,
            epsilon,
            per_channel,
        } => {
            desc.epsilon = *epsilon;
            let g = (*groups).max(1);
            let cg = c / g;
            let shape = [xs.first().copied().unwrap_or(1), g, cg, spatial];
            let p = if *per_channel {
                [0, cg * 4, 4, 0]
            } else {
                [0, 4, 0, 0]
            };
            (desc.outer, desc.inner) = levels(&shape, &[false, false, true, true], &p, &p, None);
        }
        Op::MeanVarianceNormalization { axes } => {
            desc.epsilon = MVN_EPSILON as f32;
            desc.eps_after_sqrt = true;
            desc.has_scale = false;
            desc.has_bias = false;
            let reduced: Vec<bool> = (0..rank).map(|k| axes.contains(&k)).collect();
            (desc.outer, desc.inner) = levels(&xs, &reduced, &zeros, &zeros, None);
        }
        other => return Err(cx.err(format!("{} is not a normalization", other.name()))),
    }
    let scale = if desc.has_scale {
        operand(1)?
    } else {
        Operand::Null
    };
    let bias = if desc.has_bias {
        operand(2)?
    } else {
        Operand::Null
    };
    let out = |k: usize| -> Result<Operand, Error> {
        match n.outputs.get(k) {
            Some(&v) => cx.arena(v),
            None => Ok(Operand::Null),
        }
    };
    let (s0, s1) = match desc.stats {
        Stats::MeanInvStd | Stats::Running(_) => (out(1)?, out(2)?),
        Stats::None | Stats::Given => (Operand::Null, Operand::Null),
    };
    if matches!(desc.stats, Stats::MeanInvStd | Stats::Running(_))
        && (s0 == Operand::Null || s1 == Operand::Null)
    {
        return Err(cx.err("statistics outputs missing (an arenac bug)"));
    }
    let args = vec![
        cx.arena(x)?,
        scale,
        bias,
        cx.arena(cx.output()?)?,
        s0,
        s1,
        ops[2],
        ops[3],
    ];
    let (node, opn) = cx.label();
    // Groups are independent: the outermost group level splits into rows.
    let split = match desc.outer.first() {
        Some(l) => {
            let (x, st) = (l.x, l.stat);
            RowSplit {
                rows: l.count,
                unit: 1,
                steps: vec![x, l.scale, l.bias, x, st, st, st, st],
                row_elems: desc.group_len() * prod_counts(&desc.outer[1..]),
            }
        }
        None => RowSplit {
            rows: 1,
            unit: 1,
            steps: vec![0; 8],
            row_elems: 0,
        },
    };
    rows_call(cx, prog, w, split, args, &mut |prog, rows| {
        let mut d = desc.clone();
        if let Some(l) = d.outer.first_mut() {
            l.count = rows;
        }
        prog.kernel(format!("norm {d:?}"), 8, (&node, &opn), |b, p, _| {
            d.emit(b, p)
        })
    })
}

/// Product of the levels' trip counts.
fn prod_counts(levels: &[Level]) -> usize {
    levels.iter().map(|l| l.count).product()
}
