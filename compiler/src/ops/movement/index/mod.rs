//! Index-driven and rearranging movement: GatherElements, GatherND, ScatterElements (and the
//! older Scatter), ScatterND, OneHot, Trilu, DepthToSpace, SpaceToDepth, ReverseSequence,
//! Compress, EyeLike, CenterCropPad (converted to a cropping/padding [`Op::Pad`]), and the
//! ops whose output *shape* depends on input values (NonZero, Unique, NonMaxSuppression),
//! which are computed at conversion time when every input is known and refused otherwise
//! ([`OpError::DataDependent`]).
//!
//! Run-time indices follow ONNX: negative ones count from the end; the reference evaluation
//! rejects out-of-range ones (ONNX calls them an error), the kernels report them and use a
//! valid one instead (memory safety). OneHot ignores out-of-range indices, as its spec says.

mod convert;
mod eval;
mod folded;
mod infer;
#[cfg(test)]
mod tests;

pub use eval::eval;
pub use infer::infer;

use crate::error::OpError;
use crate::ir::tensor::Tensor;
use crate::ir::types::{DType, TensorType};
use crate::ops::ctx::NodeCtx;
use crate::ops::util::fmt_list;
use crate::ops::{MAX_OPSET, MIN_OPSET, Op, OpDef, ScalarArg};

/// How a scatter combines an update with the element already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// Replace (the last update of a repeated index wins).
    None,
    /// Add.
    Add,
    /// Multiply.
    Mul,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}

impl Reduction {
    /// The ONNX attribute value.
    pub fn name(self) -> &'static str {
        match self {
            Reduction::None => "none",
            Reduction::Add => "add",
            Reduction::Mul => "mul",
            Reduction::Max => "max",
            Reduction::Min => "min",
        }
    }
}

/// One op of this group with its attributes (shape operands taken as constants).
#[derive(Clone, Debug, PartialEq)]
pub enum MoveOp {
    /// `out[i] = data[i with i[axis] = idx[i]]`; inputs data, indices.
    GatherElements {
        /// Normalized axis.
        axis: usize,
    },
    /// Slices of `data` addressed by the last dim of `indices`; inputs data, indices.
    GatherNd {
        /// Leading dims shared by data and indices.
        batch_dims: usize,
    },
    /// `out = data; out[i with i[axis] = idx[i]] (op)= updates[i]`; inputs data, indices,
    /// updates.
    ScatterElements {
        /// Normalized axis.
        axis: usize,
        /// Combination.
        reduction: Reduction,
        /// Printed as the opset 9-10 `Scatter`.
        legacy: bool,
    },
    /// `out = data; out[idx[j]] (op)= updates[j]` over the index rows; inputs data, indices,
    /// updates.
    ScatterNd {
        /// Combination.
        reduction: Reduction,
    },
    /// `values[1]` where the index hits, `values[0]` elsewhere; inputs indices, values.
    OneHot {
        /// Position of the new dim in the output (normalized over rank + 1).
        axis: usize,
        /// Size of the new dim.
        depth: usize,
    },
    /// Upper or lower triangle of the last two dims, the rest zero; inputs x, then `k` (an
    /// i64 scalar) when it is read at run time.
    Trilu {
        /// Keep `j - i >= k` (upper) or `j - i <= k` (lower).
        upper: bool,
        /// Diagonal offset.
        k: ScalarArg<i64>,
    },
    /// NCHW depth to space; input x.
    DepthToSpace {
        /// Block size.
        block: usize,
        /// CRD (column-row-depth) order instead of DCR.
        crd: bool,
    },
    /// NCHW space to depth; input x.
    SpaceToDepth {
        /// Block size.
        block: usize,
        /// CRD order instead of DCR.
        crd: bool,
    },
    /// Reverses the first `lens[b]` steps of every batch entry; inputs x, sequence_lens.
    ReverseSequence {
        /// 0 or 1.
        batch_axis: usize,
        /// 1 or 0.
        time_axis: usize,
    },
    /// Keeps the listed positions along `axis` (the flattened input when `None`); input x.
    Compress {
        /// Normalized axis, `None` to flatten.
        axis: Option<usize>,
        /// Positions kept (where the constant condition is true).
        keep: Vec<usize>,
    },
    /// Ones on diagonal `k`, zeros elsewhere, of the input's 2-d shape; input x (its type
    /// only: the kernel copies the identity made at compile time).
    EyeLike {
        /// Output dtype (`None`: the input's).
        dtype: Option<DType>,
        /// Diagonal offset.
        k: i64,
    },
    /// Col2Im: the sliding blocks of `input` (`[N, C * prod(block), L]`) summed back into
    /// images `[N, C, *image]`; input x.
    Col2Im(Col2ImAttrs),
    /// An op whose output shape depends on input values, computed at conversion from its
    /// constant inputs; no inputs, always folded.
    Folded {
        /// The ONNX op type (NonZero, Unique, NonMaxSuppression).
        op: &'static str,
        /// Its outputs.
        outputs: Vec<Tensor>,
    },
}

/// Col2Im geometry (image and block shapes are constants, frozen when given as inputs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Col2ImAttrs {
    /// Spatial dims of the output image.
    pub image: Vec<usize>,
    /// Block (kernel) dims.
    pub block: Vec<usize>,
    /// Strides.
    pub strides: Vec<usize>,
    /// Dilations.
    pub dilations: Vec<usize>,
    /// `[begin.., end..]` pads.
    pub pads: Vec<usize>,
}

impl Col2ImAttrs {
    /// Blocks per spatial dim (`None` when a dim has none).
    pub fn blocks(&self) -> Option<Vec<usize>> {
        let nd = self.image.len();
        (0..nd)
            .map(|d| {
                let span = self.dilations[d]
                    .checked_mul(self.block[d].checked_sub(1)?)?
                    .checked_add(1)?;
                let padded = self.image[d] + self.pads[d] + self.pads[d + nd];
                let n = padded.checked_sub(span)? / self.strides[d].max(1) + 1;
                Some(n)
            })
            .collect()
    }

    /// For each (block tap, block position) pair in input order, the image element it adds
    /// into (row-major over `image`), or `None` in the padding.
    pub fn targets(&self) -> Option<Vec<Option<usize>>> {
        let nd = self.image.len();
        let blocks = self.blocks()?;
        let taps: usize = self.block.iter().product();
        let positions: usize = blocks.iter().product();
        let mut out = Vec::with_capacity(taps.checked_mul(positions)?);
        for t in 0..taps {
            let k = crate::ops::util::unravel(t, &self.block);
            for l in 0..positions {
                let bpos = crate::ops::util::unravel(l, &blocks);
                let mut at = 0usize;
                let mut inside = true;
                for d in 0..nd {
                    let x = (bpos[d] * self.strides[d] + k[d] * self.dilations[d]) as i64
                        - self.pads[d] as i64;
                    inside &= (0..self.image[d] as i64).contains(&x);
                    at = at * self.image[d] + x.max(0) as usize;
                }
                out.push(inside.then_some(at));
            }
        }
        Some(out)
    }
}

/// Converters of this group.
pub const DEFS: &[OpDef] = &[
    def("GatherElements", 11, MAX_OPSET, convert::gather_elements),
    def("GatherND", 11, MAX_OPSET, convert::gather_nd),
    // Replaced by ScatterElements at opset 11.
    def("Scatter", 9, 10, convert::scatter_elements),
    def("ScatterElements", 11, MAX_OPSET, convert::scatter_elements),
    def("ScatterND", 11, MAX_OPSET, convert::scatter_nd),
    def("OneHot", 9, MAX_OPSET, convert::one_hot),
    def("Trilu", 14, MAX_OPSET, convert::trilu),
    def(
        "DepthToSpace",
        MIN_OPSET,
        MAX_OPSET,
        convert::depth_to_space,
    ),
    def(
        "SpaceToDepth",
        MIN_OPSET,
        MAX_OPSET,
        convert::space_to_depth,
    ),
    def("ReverseSequence", 10, MAX_OPSET, convert::reverse_sequence),
    def("CenterCropPad", 18, MAX_OPSET, convert::center_crop_pad),
    def("Compress", 9, MAX_OPSET, convert::compress),
    def("EyeLike", 9, MAX_OPSET, convert::eye_like),
    def("Col2Im", 18, MAX_OPSET, convert::col2im),
    def("NonZero", 9, MAX_OPSET, folded::non_zero),
    def("Unique", 11, MAX_OPSET, folded::unique),
    def(
        "NonMaxSuppression",
        10,
        MAX_OPSET,
        folded::non_max_suppression,
    ),
];

const fn def(
    op_type: &'static str,
    since: i64,
    until: i64,
    convert: fn(&mut NodeCtx<'_>) -> Result<Op, OpError>,
) -> OpDef {
    OpDef {
        op_type,
        since,
        until,
        convert,
    }
}

impl MoveOp {
    /// The printed op name.
    pub fn name(&self) -> &'static str {
        match self {
            MoveOp::GatherElements { .. } => "GatherElements",
            MoveOp::GatherNd { .. } => "GatherND",
            MoveOp::ScatterElements { legacy: true, .. } => "Scatter",
            MoveOp::ScatterElements { .. } => "ScatterElements",
            MoveOp::ScatterNd { .. } => "ScatterND",
            MoveOp::OneHot { .. } => "OneHot",
            MoveOp::Trilu { .. } => "Trilu",
            MoveOp::DepthToSpace { .. } => "DepthToSpace",
            MoveOp::SpaceToDepth { .. } => "SpaceToDepth",
            MoveOp::ReverseSequence { .. } => "ReverseSequence",
            MoveOp::Compress { .. } => "Compress",
            MoveOp::EyeLike { .. } => "EyeLike",
            MoveOp::Col2Im(_) => "Col2Im",
            MoveOp::Folded { op, .. } => op,
        }
    }

    /// Attributes for the printer.
    pub fn attrs(&self) -> Vec<(&'static str, String)> {
        match self {
            MoveOp::GatherElements { axis } => vec![("axis", axis.to_string())],
            MoveOp::GatherNd { batch_dims } => vec![("batch_dims", batch_dims.to_string())],
            MoveOp::ScatterElements {
                axis, reduction, ..
            } => vec![
                ("axis", axis.to_string()),
                ("reduction", reduction.name().into()),
            ],
            MoveOp::ScatterNd { reduction } => vec![("reduction", reduction.name().into())],
            MoveOp::OneHot { axis, depth } => {
                vec![("axis", axis.to_string()), ("depth", depth.to_string())]
            }
            MoveOp::Trilu { upper, k } => {
                vec![("upper", u8::from(*upper).to_string()), ("k", k.fmt_arg())]
            }
            MoveOp::DepthToSpace { block, crd } | MoveOp::SpaceToDepth { block, crd } => vec![
                ("blocksize", block.to_string()),
                ("mode", if *crd { "CRD" } else { "DCR" }.into()),
            ],
            MoveOp::ReverseSequence {
                batch_axis,
                time_axis,
            } => vec![
                ("batch_axis", batch_axis.to_string()),
                ("time_axis", time_axis.to_string()),
            ],
            MoveOp::Compress { axis, keep } => vec![
                ("axis", axis.map_or("none".into(), |a| a.to_string())),
                ("keep", fmt_list(keep)),
            ],
            MoveOp::EyeLike { dtype, k } => vec![
                ("dtype", dtype.map_or("input", DType::name).into()),
                ("k", k.to_string()),
            ],
            MoveOp::Col2Im(a) => vec![
                ("image_shape", fmt_list(&a.image)),
                ("block_shape", fmt_list(&a.block)),
                ("strides", fmt_list(&a.strides)),
                ("dilations", fmt_list(&a.dilations)),
                ("pads", fmt_list(&a.pads)),
            ],
            MoveOp::Folded { outputs, .. } => vec![(
                "outputs",
                outputs
                    .iter()
                    .map(|t| t.ty().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            )],
        }
    }

    /// For DepthToSpace and SpaceToDepth on NCHW `shape`: the 6-d view of the input and the
    /// permutation whose transpose, read back as 4-d, is the output.
    pub fn space_depth_view(&self, shape: &[usize]) -> Option<([usize; 6], [usize; 6])> {
        let &[n, c, h, w] = shape else {
            return None;
        };
        match *self {
            MoveOp::DepthToSpace { block: b, crd } => {
                let cb = c / (b * b).max(1);
                Some(if crd {
                    ([n, cb, b, b, h, w], [0, 1, 4, 2, 5, 3])
                } else {
                    ([n, b, b, cb, h, w], [0, 3, 4, 1, 5, 2])
                })
            }
            MoveOp::SpaceToDepth { block: b, crd } => {
                let (hb, wb) = (h / b.max(1), w / b.max(1));
                Some(if crd {
                    ([n, c, hb, b, wb, b], [0, 1, 3, 5, 2, 4])
                } else {
                    ([n, c, hb, b, wb, b], [0, 3, 5, 1, 2, 4])
                })
            }
            _ => None,
        }
    }
}

/// EyeLike's output for an input of type `input` (it never reads the input's values): used
/// by the reference evaluation, and by the lowering as the constant it copies out.
pub fn eye_like(op: &MoveOp, input: &TensorType) -> Option<Tensor> {
    let MoveOp::EyeLike { k, .. } = op else {
        return None;
    };
    let out = infer(op, std::slice::from_ref(input)).ok()?.pop()?;
    let (r, c) = (out.shape[0], out.shape[1]);
    let mut v = vec![0i64; r.checked_mul(c)?];
    for i in 0..r {
        let j = i as i64 + k;
        if (0..c as i64).contains(&j) {
            v[i * c + j as usize] = 1;
        }
    }
    Some(Tensor::from_i64(out.dtype, out.shape, &v))
}
