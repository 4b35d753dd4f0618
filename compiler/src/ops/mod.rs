//! The closed set of ops arenac understands, each carrying its attributes.
//!
//! Ops live in family files; each family file owns its attribute types, its converters from
//! ONNX nodes (listed in its `DEFS`), its shape and type inference, its reference evaluation
//! and its attribute printing. Adding an op touches its family file (variant payload, one
//! `DEFS` line, infer/eval arms), the variant here, and one fixture.
//!
//! Shape-deciding operands that ONNX passes as inputs in newer opsets (Reshape's shape, Slice's
//! bounds, Pad's pads, Resize's scales...) are attributes here: the converter takes them from
//! constant inputs (see [`ctx::NodeCtx::take_const`]), so inference needs only input types.

pub mod constant;
pub mod control;
pub mod conv;
pub mod cost;
pub mod ctx;
pub mod elementwise;
pub mod fused;
pub mod matmul;
pub mod memory;
pub mod movement;
pub mod norm;
pub mod pool;
pub mod reduce;
pub mod resize;
pub mod sample;
pub mod spectral;
pub mod stage16;
#[cfg(test)]
pub(crate) mod test_util;
pub mod util;
pub mod view;

use crate::error::OpError;
use crate::ir::lowp::CastMode;
use crate::ir::tensor::{Scalar, Tensor};
use crate::ir::types::{DType, TensorType};
use ctx::NodeCtx;

pub use conv::{ConvAttrs, ConvTransposeAttrs};
pub use elementwise::{BinaryOp, MathOp, UnaryOp, VariadicOp};
pub use fused::{FusedArg, FusedAttrs, FusedStep};
pub use matmul::GemmAttrs;
pub use movement::index::{MoveOp, Reduction};
pub use movement::{PadMode, SliceAxis};
pub use norm::LrnAttrs;
pub use pool::PoolAttrs;
pub use reduce::arg::ArgAttrs;
pub use reduce::lppool::LpPoolAttrs;
pub use reduce::scan::CumAttrs;
pub use reduce::topk::TopKAttrs;
pub use reduce::{ReduceAttrs, ReduceKind};
pub use resize::ResizeAttrs;
pub use sample::SampleOp;
pub use spectral::{DftAttrs, MelAttrs, StftAttrs};

/// An op with its attributes. Closed: every pass and backend matches exhaustively.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    // --- elementwise.rs
    /// One-input elementwise math (Relu, Sigmoid, Clip, Exp...).
    Unary(UnaryOp),
    /// Clip whose bounds are run-time tensors: inputs `x`, then `min` when `min`, then `max`
    /// when `max` (each one element of x's dtype); `min(max(x, lo), hi)`. When every given
    /// bound is known at compile time the converter makes [`UnaryOp::Clip`] instead.
    ClipDynamic {
        /// The node has a `min` input.
        min: bool,
        /// The node has a `max` input.
        max: bool,
    },
    /// Two-input elementwise op with numpy broadcasting (Add, Pow, Equal, PRelu...).
    Binary(BinaryOp),
    /// N-input elementwise op with broadcasting (Sum, Mean, Max, Min).
    Variadic(VariadicOp),
    /// `Where(cond, x, y)` with broadcasting.
    Where,
    /// Element type conversion.
    Cast {
        /// Target dtype.
        to: DType,
        /// Saturation and E8M0 rounding, normalized for `to` ([`CastMode::normalized`]).
        mode: CastMode,
    },
    // --- conv.rs
    /// N-d convolution (NCHW), bias optional (2 or 3 inputs).
    Conv(ConvAttrs),
    /// N-d transposed convolution, bias optional.
    ConvTranspose(ConvTransposeAttrs),
    // --- pool.rs
    /// Max pooling.
    MaxPool(PoolAttrs),
    /// Average pooling.
    AveragePool(PoolAttrs),
    /// Mean over all spatial dims, kept as size 1.
    GlobalAveragePool,
    /// Max over all spatial dims, kept as size 1.
    GlobalMaxPool,
    // --- matmul.rs
    /// `alpha * A' * B' + beta * C`, C optional and unidirectionally broadcast.
    Gemm(GemmAttrs),
    /// numpy `matmul` semantics (batched, broadcast, 1-d promotion).
    MatMul,
    // --- norm.rs
    /// BatchNormalization: inputs X, scale, B, mean, var.
    BatchNormalization {
        /// Added to the variance.
        epsilon: f32,
        /// `Some(momentum)` for `training_mode=1`: the batch's own per-channel mean and
        /// (population) variance normalize X, and two more outputs give the running mean and
        /// variance, `input * momentum + batch * (1 - momentum)`.
        training: Option<f32>,
    },
    /// LayerNormalization over dims `axis..`: inputs X, scale, bias (optional).
    LayerNormalization {
        /// First normalized dim (non-negative).
        axis: usize,
        /// Added to the variance.
        epsilon: f32,
        /// When the node has the Mean and InvStdDev outputs: their dtype (`stash_type`).
        stats: Option<DType>,
    },
    /// InstanceNormalization: inputs X `[N, C, ...]`, scale `[C]`, B `[C]`; statistics per
    /// image and channel.
    InstanceNormalization {
        /// Added to the variance.
        epsilon: f32,
    },
    /// GroupNormalization: inputs X `[N, C, ...]`, scale, bias; statistics per image and group
    /// of `C / groups` channels.
    GroupNormalization {
        /// Number of groups (divides C).
        groups: usize,
        /// Added to the variance.
        epsilon: f32,
        /// Opset >= 21: scale and bias per channel (`[C]`); before, per group (`[groups]`).
        per_channel: bool,
    },
    /// MeanVarianceNormalization: `(X - E[X]) / (sqrt(Var[X]) + 1e-9)` over `axes`.
    MeanVarianceNormalization {
        /// Normalized axes (sorted, distinct).
        axes: Vec<usize>,
    },
    /// RMSNormalization over dims `axis..`: `X / sqrt(mean(X^2) + epsilon) * scale`.
    RmsNormalization {
        /// First normalized dim (non-negative).
        axis: usize,
        /// Added to the mean square.
        epsilon: f32,
    },
    /// Local response normalization across channels.
    Lrn(LrnAttrs),
    /// Softmax or LogSoftmax.
    Softmax {
        /// Normalized axis (non-negative).
        axis: usize,
        /// LogSoftmax when true.
        log: bool,
        /// Opset < 13 semantics: the input is flattened to 2-d at `axis` and normalized over
        /// everything from `axis` on.
        coerce_2d: bool,
    },
    // --- reduce.rs
    /// ReduceMean/Sum/Max/Min... over constant axes.
    Reduce(ReduceAttrs),
    /// ArgMax or ArgMin along one axis (i64 indices out).
    ArgReduce(ArgAttrs),
    /// One-hot of the first largest element along `axis`.
    Hardmax {
        /// Normalized axis.
        axis: usize,
        /// Opset < 13 semantics: over everything from `axis` on (flattened to 2-d).
        coerce_2d: bool,
    },
    /// CumSum or CumProd along a constant axis.
    CumScan(CumAttrs),
    /// The k largest or smallest elements along an axis, and their indices.
    TopK(TopKAttrs),
    /// `x / ||x||_p` along an axis (p = 1 or 2).
    LpNormalization {
        /// Normalized axis.
        axis: usize,
        /// 1 or 2.
        p: u8,
    },
    /// `(sum |x|^p)^(1/p)` over pooling windows.
    LpPool(LpPoolAttrs),
    // --- view.rs: ops that only reinterpret the shape (zero-copy views)
    /// Reshape to a target given as ONNX writes it (0 copies a dim unless `allowzero`, -1 infers).
    Reshape {
        /// Target as given.
        shape: Vec<i64>,
        /// ONNX `allowzero`.
        allowzero: bool,
    },
    /// Flatten to 2-d at `axis`.
    Flatten {
        /// Split point (non-negative, 0..=rank).
        axis: usize,
    },
    /// Remove size-1 dims.
    Squeeze {
        /// Normalized axes (sorted); empty removes every size-1 dim.
        axes: Vec<usize>,
    },
    /// Insert size-1 dims.
    Unsqueeze {
        /// Positions in the output (normalized, sorted).
        axes: Vec<usize>,
    },
    /// Identity; also Dropout at inference.
    Identity,
    /// The bytes reinterpreted as another element type of the same size (BitCast).
    BitCast {
        /// The output element type.
        to: DType,
    },
    // --- movement.rs
    /// Permute dims.
    Transpose {
        /// Output dim i is input dim `perm[i]`.
        perm: Vec<usize>,
    },
    /// Concatenate along an axis.
    Concat {
        /// Normalized axis.
        axis: usize,
    },
    /// Split into parts along an axis.
    Split {
        /// Normalized axis.
        axis: usize,
        /// Size of each output along `axis`.
        sizes: Vec<usize>,
    },
    /// Strided slice, one entry per sliced axis, clamped and normalized.
    Slice {
        /// The sliced axes.
        axes: Vec<SliceAxis>,
    },
    /// One patch of a patch-executed stage (`analysis::patches`) written into its window of
    /// the stage output: inputs `[patch]` (the first patch: the output's other elements are
    /// left as they were — zero in the reference) or `[acc, patch]` (the output is `acc` with
    /// the window overwritten; the kernel writes over `acc` when the planner puts both in one
    /// buffer). Not an ONNX op: made by the patch rewrite only.
    PatchWrite {
        /// Row and column of the window's first element in the output plane.
        at: [usize; 2],
        /// The output plane's height and width.
        full: [usize; 2],
    },
    /// Gather along an axis with runtime indices.
    Gather {
        /// Normalized axis.
        axis: usize,
    },
    /// Broadcast to a shape (the broadcast of the input shape and the given one).
    Expand {
        /// The shape operand as given.
        shape: Vec<usize>,
    },
    /// Repeat along each dim.
    Tile {
        /// Repeats per dim.
        repeats: Vec<usize>,
    },
    /// Pad (pads may be negative: cropping); inputs x, then the fill value when it is
    /// [`ScalarArg::Input`] (one element of x's dtype).
    Pad {
        /// Mode.
        mode: PadMode,
        /// `[begin_0.., end_0..]` over every dim.
        pads: Vec<i64>,
        /// Fill value for constant mode (other modes: `Const(0.0)`, unused).
        value: ScalarArg<f64>,
    },
    /// Index-driven and rearranging movement (GatherElements, GatherND, Scatter*, OneHot,
    /// Trilu, DepthToSpace, SpaceToDepth, ReverseSequence, Compress, EyeLike, and the
    /// data-dependent ops folded at import): `movement/index/`.
    Move(MoveOp),
    // --- constant.rs: ops that are always folded at import
    /// The input's shape (or a slice of it), as i64.
    Shape {
        /// First dim (normalized, clamped).
        start: usize,
        /// One past the last dim (normalized, clamped).
        end: usize,
    },
    /// The number of elements of the input (an i64 scalar; folds from the input's type).
    Size,
    /// A tensor of the given shape filled with one value.
    ConstantOfShape {
        /// Output shape.
        shape: Vec<usize>,
        /// The fill value, a one-element tensor carrying the dtype.
        value: Tensor,
    },
    /// `Range(start, limit, delta)`; its output length depends on values, so the converter
    /// takes all three inputs as constants and the op always folds.
    Range {
        /// Element type (that of the inputs).
        dtype: DType,
        /// First element.
        start: Scalar,
        /// Step between elements (non-zero).
        delta: Scalar,
        /// Number of elements, `max(ceil((limit - start) / delta), 0)`.
        len: usize,
    },
    /// A window function (HannWindow, HammingWindow, BlackmanWindow) of a constant length.
    Window {
        /// Which window.
        kind: constant::WindowKind,
        /// Number of elements.
        len: usize,
        /// Periodic (denominator `len`) or symmetric (`len - 1`).
        periodic: bool,
        /// Output element type.
        dtype: DType,
    },
    // --- resize.rs
    /// Resize (nearest, linear) to a static output shape.
    Resize(ResizeAttrs),
    // --- spectral/: the signal ops
    /// DFT along one axis (real or complex input, forward or inverse, one-sided or not).
    Dft(DftAttrs),
    /// Short-time Fourier transform of a real or complex signal, with an optional window.
    Stft(StftAttrs),
    /// Mel filter bank matrix (inputs: sample rate, lower and upper edge frequency).
    MelWeightMatrix(MelAttrs),
    // --- sample/: precompiled Rust kernels (GridSample, AffineGrid)
    /// A sampling or geometry op (`sample::SampleOp`).
    Sample(SampleOp),
    // --- fused.rs: made by `analysis::fuse`, never read from a file
    /// Element-wise ops computed in one pass (a straight-line program over the inputs).
    FusedElementwise(FusedAttrs),
    // --- control/: ops holding graphs, imported by `import::control`
    /// One of two branches, chosen at run time by a bool (inputs: the condition, then the
    /// captured outer values).
    If(Box<control::IfAttrs>),
    /// A body graph run a static number of times with carried state and scan inputs/outputs
    /// (ONNX Loop and Scan; LSTM/GRU/RNN recurrences).
    Loop(Box<control::LoopAttrs>),
}

/// A scalar operand of an op that decides no shape: known at compile time (kept in the op),
/// or read at run time from one of the node's data inputs (a one-element tensor; which one
/// the op's doc says). Such an operand is never frozen: the kernel reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalarArg<T> {
    /// Known at compile time.
    Const(T),
    /// Read at run time from a data input.
    Input,
}

impl<T: std::fmt::Debug> ScalarArg<T> {
    /// The printed form: the value, or `input`.
    pub fn fmt_arg(&self) -> String {
        match self {
            ScalarArg::Const(v) => format!("{v:?}"),
            ScalarArg::Input => "input".to_string(),
        }
    }
}

/// How one ONNX op type converts into an [`Op`].
#[derive(Clone, Copy, Debug)]
pub struct OpDef {
    /// ONNX op type in the default domain.
    pub op_type: &'static str,
    /// Lowest default-domain opset this converter handles.
    pub since: i64,
    /// Highest opset handled.
    pub until: i64,
    /// The converter.
    pub convert: fn(&mut NodeCtx<'_>) -> Result<Op, OpError>,
}

/// Highest default-domain opset arenac reads.
pub const MAX_OPSET: i64 = 28;
/// Lowest default-domain opset of most converters (a model may import a lower one: each
/// op's [`OpDef::since`] decides, see `import::LOWEST_MODEL_OPSET`).
pub const MIN_OPSET: i64 = 7;

/// Every family's converters, in the order `arenac ops` lists them.
pub fn registry() -> impl Iterator<Item = &'static OpDef> {
    [
        elementwise::DEFS,
        elementwise::MATH_DEFS,
        conv::DEFS,
        pool::DEFS,
        matmul::DEFS,
        norm::DEFS,
        reduce::DEFS,
        view::DEFS,
        movement::DEFS,
        movement::index::DEFS,
        constant::DEFS,
        resize::DEFS,
        spectral::DEFS,
        sample::DEFS,
    ]
    .into_iter()
    .flatten()
}

/// The converter for `op_type` at `opset`, if arenac supports it.
pub fn lookup(op_type: &str, opset: i64) -> Option<&'static OpDef> {
    registry().find(|d| d.op_type == op_type && (d.since..=d.until).contains(&opset))
}

/// The family an op belongs to (which file implements it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Elementwise,
    Conv,
    Pool,
    MatMul,
    Norm,
    Reduce,
    View,
    Movement,
    Constant,
    Resize,
    Spectral,
    Sample,
    Fused,
    Control,
}

impl Op {
    /// A Cast to `to` with ONNX's default saturation and rounding.
    pub fn cast(to: DType) -> Op {
        Op::Cast {
            to,
            mode: CastMode::DEFAULT,
        }
    }

    fn family(&self) -> Family {
        match self {
            Op::Unary(_)
            | Op::ClipDynamic { .. }
            | Op::Binary(_)
            | Op::Variadic(_)
            | Op::Where
            | Op::Cast { .. } => Family::Elementwise,
            Op::Conv(_) | Op::ConvTranspose(_) => Family::Conv,
            Op::MaxPool(_) | Op::AveragePool(_) | Op::GlobalAveragePool | Op::GlobalMaxPool => {
                Family::Pool
            }
            Op::Gemm(_) | Op::MatMul => Family::MatMul,
            Op::BatchNormalization { .. }
            | Op::LayerNormalization { .. }
            | Op::InstanceNormalization { .. }
            | Op::GroupNormalization { .. }
            | Op::MeanVarianceNormalization { .. }
            | Op::RmsNormalization { .. }
            | Op::Lrn(_)
            | Op::Softmax { .. } => Family::Norm,
            Op::Reduce(_)
            | Op::ArgReduce(_)
            | Op::Hardmax { .. }
            | Op::CumScan(_)
            | Op::TopK(_)
            | Op::LpNormalization { .. }
            | Op::LpPool(_) => Family::Reduce,
            Op::Reshape { .. }
            | Op::Flatten { .. }
            | Op::Squeeze { .. }
            | Op::Unsqueeze { .. }
            | Op::Identity
            | Op::BitCast { .. } => Family::View,
            Op::Transpose { .. }
            | Op::Concat { .. }
            | Op::Split { .. }
            | Op::Slice { .. }
            | Op::PatchWrite { .. }
            | Op::Gather { .. }
            | Op::Expand { .. }
            | Op::Tile { .. }
            | Op::Pad { .. }
            | Op::Move(_) => Family::Movement,
            Op::Shape { .. }
            | Op::Size
            | Op::ConstantOfShape { .. }
            | Op::Range { .. }
            | Op::Window { .. } => Family::Constant,
            Op::Resize(_) => Family::Resize,
            Op::Dft(_) | Op::Stft(_) | Op::MelWeightMatrix(_) => Family::Spectral,
            Op::Sample(_) => Family::Sample,
            Op::FusedElementwise(_) => Family::Fused,
            Op::If(_) | Op::Loop(_) => Family::Control,
        }
    }

    /// The op's name as printed (the ONNX op type it stands for).
    pub fn name(&self) -> &'static str {
        match self.family() {
            Family::Elementwise => elementwise::name(self),
            Family::Conv => conv::name(self),
            Family::Pool => pool::name(self),
            Family::MatMul => matmul::name(self),
            Family::Norm => norm::name(self),
            Family::Reduce => reduce::name(self),
            Family::View => view::name(self),
            Family::Movement => movement::name(self),
            Family::Constant => constant::name(self),
            Family::Resize => resize::name(self),
            Family::Spectral => spectral::name(self),
            Family::Sample => sample::name(self),
            Family::Fused => fused::name(self),
            Family::Control => control::name(self),
        }
    }

    /// Whether the op takes and gives the storage types ([`DType::is_storage`]: 8-/4-bit
    /// floats, 4-/2-bit integers): Cast converts them; views, Transpose, Expand and Pad copy
    /// their bytes (Pad's fill value converted like a Cast's); ConstantOfShape repeats its
    /// value's bytes; Shape and Size read only their type. (ONNX also allows them on the
    /// control-flow ops and IsNaN/IsInf; QuantizeLinear and DequantizeLinear are expanded
    /// into Casts.)
    pub fn takes_storage_types(&self) -> bool {
        matches!(
            self,
            Op::Cast { .. }
                | Op::Reshape { .. }
                | Op::Flatten { .. }
                | Op::Squeeze { .. }
                | Op::Unsqueeze { .. }
                | Op::Identity
                | Op::Transpose { .. }
                | Op::Expand { .. }
                | Op::Pad { .. }
                | Op::ConstantOfShape { .. }
                | Op::Shape { .. }
                | Op::Size
        )
    }

    /// Output types from input types. Errors name what disagreed; the caller adds the node.
    /// A storage type in or out of an op that does not take them
    /// ([`Op::takes_storage_types`]) is an error.
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
        let storage = |what: String, dt: DType| {
            OpError::Unsupported(format!(
                "{} on {dt} ({what}): arenac keeps 8- and 4-bit floats and 4- and 2-bit \
                 integers as storage types that only Cast, the views, Transpose, Expand, Pad \
                 and ConstantOfShape take; Cast to a wider type first",
                self.name()
            ))
        };
        let ok = self.takes_storage_types();
        if let Some((i, t)) = inputs
            .iter()
            .enumerate()
            .find(|(_, t)| !ok && t.dtype.is_storage())
        {
            return Err(storage(format!("input {i}"), t.dtype));
        }
        let outputs = self.infer_family(inputs)?;
        if let Some((i, t)) = outputs
            .iter()
            .enumerate()
            .find(|(_, t)| !ok && t.dtype.is_storage())
        {
            return Err(storage(format!("output {i}"), t.dtype));
        }
        Ok(outputs)
    }

    fn infer_family(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>, OpError> {
        match self.family() {
            Family::Elementwise => elementwise::infer(self, inputs),
            Family::Conv => conv::infer(self, inputs),
            Family::Pool => pool::infer(self, inputs),
            Family::MatMul => matmul::infer(self, inputs),
            Family::Norm => norm::infer(self, inputs),
            Family::Reduce => reduce::infer(self, inputs),
            Family::View => view::infer(self, inputs),
            Family::Movement => movement::infer(self, inputs),
            Family::Constant => constant::infer(self, inputs),
            Family::Resize => resize::infer(self, inputs),
            Family::Spectral => spectral::infer(self, inputs),
            Family::Sample => sample::infer(self, inputs),
            Family::Fused => fused::infer(self, inputs),
            Family::Control => control::infer(self, inputs),
        }
    }

    /// Reference evaluation: plain, obviously correct Rust. Used by constant folding and as
    /// the oracle for generated kernels. Inputs have the types `infer` accepted.
    pub fn eval(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>, OpError> {
        match self.family() {
            Family::Elementwise => elementwise::eval(self, inputs),
            Family::Conv => conv::eval(self, inputs),
            Family::Pool => pool::eval(self, inputs),
            Family::MatMul => matmul::eval(self, inputs),
            Family::Norm => norm::eval(self, inputs),
            Family::Reduce => reduce::eval(self, inputs),
            Family::View => view::eval(self, inputs),
            Family::Movement => movement::eval(self, inputs),
            Family::Constant => constant::eval(self, inputs),
            Family::Resize => resize::eval(self, inputs),
            Family::Spectral => spectral::eval(self, inputs),
            Family::Sample => sample::eval(self, inputs),
            Family::Fused => fused::eval(self, inputs),
            Family::Control => control::eval(self, inputs),
        }
    }

    /// Attributes as `(name, value)` pairs for the printer, in a fixed order.
    pub fn attrs(&self) -> Vec<(&'static str, String)> {
        match self.family() {
            Family::Elementwise => elementwise::attrs(self),
            Family::Conv => conv::attrs(self),
            Family::Pool => pool::attrs(self),
            Family::MatMul => matmul::attrs(self),
            Family::Norm => norm::attrs(self),
            Family::Reduce => reduce::attrs(self),
            Family::View => view::attrs(self),
            Family::Movement => movement::attrs(self),
            Family::Constant => constant::attrs(self),
            Family::Resize => resize::attrs(self),
            Family::Spectral => spectral::attrs(self),
            Family::Sample => sample::attrs(self),
            Family::Fused => fused::attrs(self),
            Family::Control => control::attrs(self),
        }
    }

    /// The graphs this op holds (an `If`'s branches, a `Loop`'s body), each with its role, in a
    /// fixed order; empty for every other op.
    pub fn subgraphs(&self) -> Vec<(&'static str, &crate::ir::graph::Graph)> {
        control::subgraphs(self)
    }

    /// True when the output is the input reinterpreted (same bytes, another shape).
    pub fn is_view(&self) -> bool {
        self.family() == Family::View
    }

    /// Outputs computable from input *types* alone (Shape, Size), for folding when the inputs are
    /// not constants.
    pub fn fold_from_types(&self, inputs: &[TensorType]) -> Option<Vec<Tensor>> {
        match self {
            Op::Shape { start, end } => {
                let shape = &inputs.first()?.shape;
                let dims: Vec<i64> = shape.get(*start..*end)?.iter().map(|&d| d as i64).collect();
                Some(vec![Tensor::i64(vec![dims.len()], &dims)])
            }
            Op::Size => {
                let n = i64::try_from(inputs.first()?.numel()?).ok()?;
                Some(vec![Tensor::i64(vec![], &[n])])
            }
            _ => None,
        }
    }
}
