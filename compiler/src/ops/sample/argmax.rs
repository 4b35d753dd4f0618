//! MaxPool with its second output, Indices (1 to 3 spatial dims): each pooled maximum's flat
//! index into `X` (`storage_order` 0: row-major spatial dims; 1: column-major), counting the
//! batch and channel offsets as onnxruntime and onnx's reference do. The first maximum in
//! window order wins ties. A window entirely in the padding gives `f32::MIN` and index 0.

use super::Real;
use crate::error::OpError;
use crate::gemm::pool3d::Pool3d;
use crate::ir::types::{DType, TensorType};
use crate::ops::{Op, PoolAttrs};

/// The pooling attributes and the index order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgmaxAttrs {
    /// The pooling window.
    pub pool: PoolAttrs,
    /// `storage_order = 1`: indices of a column-major layout of the spatial dims.
    pub column_major: bool,
}

pub(super) fn infer(a: &ArgmaxAttrs, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    let y = crate::ops::pool::infer(&Op::MaxPool(a.pool.clone()), inputs)?.remove(0);
    if a.pool.kernel.len() > 3 {
        return Err(OpError::Unsupported(
            "MaxPool Indices over more than 3 spatial dims".into(),
        ));
    }
    let idx = TensorType::new(DType::I64, y.shape.clone());
    Ok(vec![y, idx])
}

/// The geometry over 3 dims (leading size-1 dims added) of input `x` and output `y` shapes.
pub fn geometry(a: &ArgmaxAttrs, x: &[usize], y: &[usize]) -> Option<Pool3d> {
    let d = a.pool.kernel.len();
    if !(1..=3).contains(&d) || x.len() != d + 2 || y.len() != d + 2 {
        return None;
    }
    let lift = |v: &[usize], fill: usize| -> [usize; 3] {
        let mut o = [fill; 3];
        o[3 - d..].copy_from_slice(v);
        o
    };
    Some(Pool3d {
        planes: x[0] * x[1],
        input: lift(&x[2..], 1),
        output: lift(&y[2..], 1),
        kernel: lift(&a.pool.kernel, 1),
        strides: lift(&a.pool.strides, 1),
        dilations: lift(&a.pool.dilations, 1),
        pad_begin: lift(a.pool.pads.get(..d)?, 0),
        pad_end: lift(a.pool.pads.get(d..)?, 0),
        max: true,
        include_pad: false,
    })
}

/// Max pooling of `x` into `y` with the maxima's flat indices in `idx`.
pub fn max_pool_indices<T: Real>(
    g: &Pool3d,
    column_major: bool,
    x: &[T],
    y: &mut [T],
    idx: &mut [i64],
) {
    let [id, ih, iw] = g.input;
    let [od, oh, ow] = g.output;
    let in_plane = id * ih * iw;
    let start = |d: usize, o: usize| (o * g.strides[d]) as i64 - g.pad_begin[d] as i64;
    let mut out = 0;
    for p in 0..g.planes {
        for a in 0..od {
            for b in 0..oh {
                for c in 0..ow {
                    let (sa, sb, sc) = (start(0, a), start(1, b), start(2, c));
                    let mut best: Option<(f64, usize)> = None;
                    for ka in 0..g.kernel[0] {
                        let qa = sa + (ka * g.dilations[0]) as i64;
                        for kb in 0..g.kernel[1] {
                            let qb = sb + (kb * g.dilations[1]) as i64;
                            for kc in 0..g.kernel[2] {
                                let qc = sc + (kc * g.dilations[2]) as i64;
                                let inside = (0..id as i64).contains(&qa)
                                    && (0..ih as i64).contains(&qb)
                                    && (0..iw as i64).contains(&qc);
                                if !inside {
                                    continue;
                                }
                                let (qa, qb, qc) = (qa as usize, qb as usize, qc as usize);
                                let at = (qa * ih + qb) * iw + qc;
                                let v = x.get(p * in_plane + at).map_or(0.0, |v| v.get());
                                if best.is_none_or(|(m, _)| v > m) {
                                    let flat = if column_major {
                                        (qc * ih + qb) * id + qa
                                    } else {
                                        at
                                    };
                                    best = Some((v, p * in_plane + flat));
                                }
                            }
                        }
                    }
                    let (v, i) = best.unwrap_or((f64::from(f32::MIN), 0));
                    if let (Some(yo), Some(io)) = (y.get_mut(out), idx.get_mut(out)) {
                        *yo = T::put(v);
                        *io = i as i64;
                    }
                    out += 1;
                }
            }
        }
    }
}
