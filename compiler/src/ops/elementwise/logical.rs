//! The logical, bitwise and shift ops' own pieces: BitShift's and CastLike's converters and
//! which binary ops compare. Inference and evaluation are with the other binary ops.

use super::{BinaryOp, binary};
use crate::error::OpError;
use crate::ops::Op;
use crate::ops::ctx::NodeCtx;

impl BinaryOp {
    /// Whether the op compares (bool output from any input dtype).
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Equal
                | BinaryOp::Less
                | BinaryOp::Greater
                | BinaryOp::GreaterOrEqual
                | BinaryOp::LessOrEqual
        )
    }
}

/// BitShift: `direction` is required, "LEFT" or "RIGHT".
pub(super) fn convert_bit_shift(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    let left = match ctx.attr_string("direction", "")?.as_str() {
        "LEFT" => true,
        "RIGHT" => false,
        other => {
            return Err(OpError::attr(
                "direction",
                format!("'{other}' is neither \"LEFT\" nor \"RIGHT\""),
            ));
        }
    };
    binary(ctx, BinaryOp::BitShift { left })
}

/// CastLike is rewritten to a Cast to the dtype of input 1, whose values are not read.
pub(super) fn convert_cast_like(ctx: &mut NodeCtx<'_>) -> Result<Op, OpError> {
    ctx.expect_inputs(2, 2)?;
    let to = ctx.input_type(1)?.dtype;
    ctx.ignore_input(1);
    let mode = super::cast_mode(ctx, to)?;
    Ok(Op::Cast { to, mode })
}
