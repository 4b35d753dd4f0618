//! Sampling and geometry ops computed by precompiled Rust kernels (`crate::codegen::host`):
//! GridSample and AffineGrid (`grid.rs`), RoiAlign (`roi.rs`), MaxUnpool (`unpool.rs`), Det
//! (`det.rs`). Each op's core is one generic function over
//! [`Real`] elements, read by the reference evaluation in f64 and by the kernel in f32 (the
//! difference is the element type only; the kernels are also checked against onnx's numpy
//! reference through the node tests).

pub mod argmax;
pub mod deform;
pub mod det;
pub mod dropout;
pub mod grid;
pub mod linear;
pub mod roi;
pub mod scatter;
pub mod unpool;

pub use argmax::ArgmaxAttrs;
pub use deform::DeformAttrs;
pub use dropout::DropoutAttrs;
pub use grid::{GridAttrs, GridMode, GridPadding};
pub use linear::LinearAttrs;
pub use roi::RoiAttrs;
pub use scatter::ScatterAttrs;
pub use unpool::UnpoolAttrs;

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::util::wrong_family;
use crate::ops::{MAX_OPSET, Op, OpDef};

/// Converters of this family.
pub const DEFS: &[OpDef] = &[
    OpDef {
        op_type: "GridSample",
        since: 16,
        until: MAX_OPSET,
        convert: grid::convert_grid_sample,
    },
    OpDef {
        op_type: "AffineGrid",
        since: 20,
        until: MAX_OPSET,
        convert: grid::convert_affine_grid,
    },
    OpDef {
        op_type: "RoiAlign",
        since: 10,
        until: MAX_OPSET,
        convert: roi::convert,
    },
    OpDef {
        op_type: "MaxUnpool",
        since: 9,
        until: MAX_OPSET,
        convert: unpool::convert,
    },
    OpDef {
        op_type: "Det",
        since: 11,
        until: MAX_OPSET,
        convert: det::convert,
    },
    OpDef {
        op_type: "LinearAttention",
        since: 27,
        until: MAX_OPSET,
        convert: linear::convert,
    },
    OpDef {
        op_type: "TensorScatter",
        since: 24,
        until: MAX_OPSET,
        convert: scatter::convert,
    },
    OpDef {
        op_type: "DeformConv",
        since: 19,
        until: MAX_OPSET,
        convert: deform::convert,
    },
];

/// The float types these ops read (f16/bf16/f64 nodes are widened to f32 kernels).
const FLOATS: &[DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

/// One op of this family.
#[derive(Clone, Debug, PartialEq)]
pub enum SampleOp {
    /// GridSample: `X` sampled at the normalized points of `grid`.
    GridSample(GridAttrs),
    /// AffineGrid: the sampling grid of affine matrices `theta` over a fixed output size.
    AffineGrid {
        /// Corner pixels' centers at -1 and 1 (else their outer edges).
        align_corners: bool,
        /// The output's spatial sizes (`size[2..]`; 2 or 3 of them).
        size: Vec<usize>,
    },
    /// RoiAlign: regions of interest pooled to a fixed size.
    RoiAlign(RoiAttrs),
    /// MaxUnpool: values scattered to MaxPool's indices.
    MaxUnpool(UnpoolAttrs),
    /// Det: the determinant of each matrix.
    Det,
    /// Dropout at inference with its mask or a run-time `training_mode` (`dropout.rs`).
    Dropout(DropoutAttrs),
    /// LinearAttention: the linear-attention recurrence (`linear.rs`).
    LinearAttention(LinearAttrs),
    /// TensorScatter: a KV-cache update (`scatter.rs`).
    TensorScatter(ScatterAttrs),
    /// MaxPool with its Indices output (`argmax.rs`).
    MaxPoolIndices(ArgmaxAttrs),
    /// DeformConv, 2-d (`deform.rs`).
    DeformConv(Box<DeformAttrs>),
}

/// An element type the cores compute on: read as and written from f64.
pub trait Real: Copy {
    /// The value as f64.
    fn get(self) -> f64;
    /// `v` rounded to this type.
    fn put(v: f64) -> Self;
}

impl Real for f32 {
    fn get(self) -> f64 {
        f64::from(self)
    }
    fn put(v: f64) -> f32 {
        v as f32
    }
}

impl Real for f64 {
    fn get(self) -> f64 {
        self
    }
    fn put(v: f64) -> f64 {
        v
    }
}

/// Checks that input `i` has a float type.
fn float_input(i: usize, ty: &TensorType) -> Result<(), OpError> {
    if FLOATS.contains(&ty.dtype) {
        Ok(())
    } else {
        Err(OpError::DType {
            input: i,
            dtype: ty.dtype,
            expected: "float, float16, bfloat16 or double".into(),
        })
    }
}

fn sample_op(op: &Op) -> Result<&SampleOp, OpError> {
    match op {
        Op::Sample(s) => Ok(s),
        _ => Err(wrong_family(op, "sampling")),
    }
}

/// The op's printed name.
pub fn name(op: &Op) -> &'static str {
    match op {
        Op::Sample(SampleOp::GridSample(_)) => "GridSample",
        Op::Sample(SampleOp::AffineGrid { .. }) => "AffineGrid",
        Op::Sample(SampleOp::RoiAlign(_)) => "RoiAlign",
        Op::Sample(SampleOp::MaxUnpool(_)) => "MaxUnpool",
        Op::Sample(SampleOp::Det) => "Det",
        Op::Sample(SampleOp::Dropout(_)) => "Dropout",
        Op::Sample(SampleOp::LinearAttention(_)) => "LinearAttention",
        Op::Sample(SampleOp::TensorScatter(_)) => "TensorScatter",
        Op::Sample(SampleOp::MaxPoolIndices(_)) => "MaxPool",
        Op::Sample(SampleOp::DeformConv(_)) => "DeformConv",
        _ => "?",
    }
}

/// Shape and type inference.
pub fn infer(op: &Op, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
    match sample_op(op)? {
        SampleOp::GridSample(_) => grid::infer_grid_sample(inputs),
        SampleOp::AffineGrid { size, .. } => grid::infer_affine_grid(size, inputs),
        SampleOp::RoiAlign(a) => roi::infer(a, inputs),
        SampleOp::MaxUnpool(a) => unpool::infer(a, inputs),
        SampleOp::Det => det::infer(inputs),
        SampleOp::Dropout(a) => dropout::infer(a, inputs),
        SampleOp::LinearAttention(a) => linear::infer(a, inputs),
        SampleOp::TensorScatter(a) => scatter::infer(a, inputs),
        SampleOp::MaxPoolIndices(a) => argmax::infer(a, inputs),
        SampleOp::DeformConv(a) => deform::infer(a, inputs),
    }
}

/// Reference evaluation: the op's core in f64.
pub fn eval(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    match sample_op(op)? {
        SampleOp::Dropout(a) => return dropout::eval(a, inputs),
        SampleOp::LinearAttention(a) => return eval_linear(a, inputs),
        SampleOp::TensorScatter(a) => return eval_scatter(a, inputs),
        SampleOp::MaxPoolIndices(a) => return eval_argmax(a, inputs),
        _ => {}
    }
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out = infer(op, &types)?.remove(0);
    let xs: Vec<Vec<f64>> = inputs.iter().map(|t| t.to_f64_vec()).collect();
    let mut y = vec![0.0f64; out.numel().unwrap_or(0)];
    match sample_op(op)? {
        SampleOp::GridSample(a) => {
            let g = grid::GridGeometry::new(&types[0].shape, &types[1].shape)?;
            grid::grid_sample(a, &g, &xs[0], &xs[1], &mut y);
        }
        SampleOp::AffineGrid {
            align_corners,
            size,
        } => grid::affine_grid(*align_corners, size, &xs[0], &mut y),
        SampleOp::RoiAlign(a) => {
            let s = &types[0].shape;
            let batch: Vec<i64> = xs[2].iter().map(|&v| v as i64).collect();
            roi::roi_align(a, [s[0], s[1], s[2], s[3]], &xs[1], &batch, &xs[0], &mut y);
        }
        SampleOp::MaxUnpool(a) => {
            let inner = unpool::unpooled(a, &types[0].shape)?;
            let idx: Vec<i64> = inputs[1].to_f64_vec().iter().map(|&v| v as i64).collect();
            unpool::max_unpool(&inner, &out.shape, &xs[0], &idx, &mut y);
        }
        SampleOp::Det => {
            let m = det::order(&types[0].shape);
            let mut lu = vec![0.0; m * m];
            det::det(m, &xs[0], &mut y, &mut lu);
        }
        SampleOp::Dropout(_)
        | SampleOp::LinearAttention(_)
        | SampleOp::TensorScatter(_)
        | SampleOp::MaxPoolIndices(_) => {}
        SampleOp::DeformConv(a) => {
            let g = deform::DeformGeometry::new(a, &types)?;
            let mut rest = xs[3..].iter().map(Vec::as_slice);
            let bias = if a.bias { rest.next() } else { None };
            let mask = if a.mask { rest.next() } else { None };
            let d = deform::DeformInputs {
                x: &xs[0],
                w: &xs[1],
                offset: &xs[2],
                bias,
                mask,
            };
            deform::deform_conv(a, &g, &d, &mut y);
        }
    }
    Ok(vec![Tensor::from_f64(out.dtype, out.shape, &y)])
}

/// Attributes for the printer.
pub fn attrs(op: &Op) -> Vec<(&'static str, String)> {
    match op {
        Op::Sample(SampleOp::GridSample(a)) => vec![
            ("mode", format!("{:?}", a.mode).to_lowercase()),
            ("padding_mode", format!("{:?}", a.padding).to_lowercase()),
            ("align_corners", u8::from(a.align_corners).to_string()),
        ],
        Op::Sample(SampleOp::AffineGrid {
            align_corners,
            size,
        }) => vec![
            ("align_corners", u8::from(*align_corners).to_string()),
            ("size", format!("{size:?}")),
        ],
        Op::Sample(SampleOp::RoiAlign(a)) => vec![
            ("mode", if a.max { "max" } else { "avg" }.to_string()),
            (
                "coordinate_transformation_mode",
                if a.half_pixel {
                    "half_pixel"
                } else {
                    "output_half_pixel"
                }
                .to_string(),
            ),
            ("output_height", a.out_h.to_string()),
            ("output_width", a.out_w.to_string()),
            ("sampling_ratio", a.sampling_ratio.to_string()),
            ("spatial_scale", a.spatial_scale.to_string()),
        ],
        Op::Sample(SampleOp::MaxUnpool(a)) => vec![
            ("kernel_shape", format!("{:?}", a.kernel)),
            ("strides", format!("{:?}", a.strides)),
            ("pads", format!("{:?}", a.pads)),
            ("output_shape", format!("{:?}", a.output_shape)),
        ],
        Op::Sample(SampleOp::LinearAttention(a)) => vec![
            ("q_num_heads", a.q_heads.to_string()),
            ("kv_num_heads", a.kv_heads.to_string()),
            ("scale", a.scale.to_string()),
            ("past", u8::from(a.past).to_string()),
            ("gating", u8::from(a.gating).to_string()),
            ("delta", u8::from(a.delta).to_string()),
        ],
        Op::Sample(SampleOp::TensorScatter(a)) => vec![
            ("axis", a.axis.to_string()),
            (
                "mode",
                if a.circular { "circular" } else { "linear" }.to_string(),
            ),
        ],
        Op::Sample(SampleOp::MaxPoolIndices(a)) => {
            let mut v = crate::ops::pool::attrs(&Op::MaxPool(a.pool.clone()));
            v.push(("storage_order", u8::from(a.column_major).to_string()));
            v
        }
        Op::Sample(SampleOp::DeformConv(a)) => vec![
            ("kernel_shape", format!("{:?}", a.kernel)),
            ("strides", format!("{:?}", a.strides)),
            ("dilations", format!("{:?}", a.dilations)),
            ("pads", format!("{:?}", a.pads)),
            ("group", a.group.to_string()),
            ("offset_group", a.offset_group.to_string()),
        ],
        Op::Sample(SampleOp::Dropout(a)) => vec![
            ("check_training", u8::from(a.check).to_string()),
            ("mask", u8::from(a.mask).to_string()),
        ],
        _ => vec![],
    }
}

/// Scratch bytes of a node: Det's LU work space (`M * M` f64); none for the others.
pub fn scratch_bytes(op: &SampleOp, x: &TensorType) -> usize {
    match op {
        SampleOp::Det => {
            let m = det::order(&x.shape);
            m.saturating_mul(m).saturating_mul(8)
        }
        _ => 0,
    }
}

/// LinearAttention's reference: the recurrence in f64.
fn eval_linear(a: &LinearAttrs, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out = linear::infer(a, &types)?;
    let g = linear::LinearGeometry::new(a, &types)?;
    let xs: Vec<Vec<f64>> = inputs.iter().map(|t| t.to_f64_vec()).collect();
    let mut rest = xs[3..].iter().map(Vec::as_slice);
    let past = if a.past { rest.next() } else { None };
    let decay = if a.gating { rest.next() } else { None };
    let beta = if a.delta { rest.next() } else { None };
    let x = linear::LinearInputs {
        q: &xs[0],
        k: &xs[1],
        v: &xs[2],
        past,
        decay,
        beta,
    };
    let mut y = vec![0.0; out[0].numel().unwrap_or(0)];
    let mut state = vec![0.0; out[1].numel().unwrap_or(0)];
    linear::linear_attention(a, &g, &x, &mut y, &mut state);
    Ok(vec![
        Tensor::from_f64(out[0].dtype, out[0].shape.clone(), &y),
        Tensor::from_f64(out[1].dtype, out[1].shape.clone(), &state),
    ])
}

/// TensorScatter's reference: the byte moves, a linear-mode index outside the cache an error.
fn eval_scatter(a: &ScatterAttrs, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let g = scatter::ScatterGeometry::new(a, &types)?;
    let idx = inputs.get(2).map(|t| t.to_i64_vec());
    if let Some(bad) = idx.as_deref().and_then(|v| scatter::bad_index(a, &g, v)) {
        return Err(OpError::index(2, bad, g.max - g.len + 1));
    }
    let mut out = vec![0u8; inputs[0].bytes().len()];
    let elem = types[0].dtype.size();
    scatter::tensor_scatter(
        a,
        &g,
        elem,
        inputs[0].bytes(),
        inputs[1].bytes(),
        idx.as_deref(),
        &mut out,
    );
    Tensor::from_bytes(types[0].dtype, types[0].shape.clone(), out.into())
        .map_err(|e| OpError::Unsupported(format!("TensorScatter: {e}")))
        .map(|t| vec![t])
}

/// MaxPool with Indices: the reference in f64.
fn eval_argmax(a: &ArgmaxAttrs, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let out = argmax::infer(a, &types)?;
    let g = argmax::geometry(a, &types[0].shape, &out[0].shape)
        .ok_or_else(|| OpError::Unsupported("MaxPool Indices: 1 to 3 spatial dims".into()))?;
    let n = out[0].numel().unwrap_or(0);
    let (mut y, mut idx) = (vec![0.0; n], vec![0i64; n]);
    argmax::max_pool_indices(
        &g,
        a.column_major,
        &inputs[0].to_f64_vec(),
        &mut y,
        &mut idx,
    );
    Ok(vec![
        Tensor::from_f64(out[0].dtype, out[0].shape.clone(), &y),
        Tensor::from_i64(DType::I64, out[1].shape.clone(), &idx),
    ])
}
