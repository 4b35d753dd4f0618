//! Pow on the types the JIT's f32 kernels do not cover — an integer base, or a run-time
//! exponent of another type than f32 (`f32 ^ int32`, `int64 ^ int64`, `int32 ^ float`...):
//! a [`HostKernel`] over the raw bytes with numpy's broadcasting and semantics (the result
//! has the base's type): integer ^ integer by wrapping repeated squaring (a negative exponent
//! truncates `1 / base^|e|`; 0 to a negative power gives 0, where numpy raises), anything
//! with a float by `powf` in f64, converted to the base's type (toward zero for integers).

use super::Ctx;
use crate::codegen::host::{HostKernel, input, output};
use crate::codegen::program::Program;
use crate::codegen::weights::WeightsBuilder;
use crate::error::Error;
use crate::ir::tensor::{read_f64, read_i64, write_f64};
use crate::ir::types::DType;
use crate::ops::elementwise::int_pow;

/// The most output dims the kernel's index arithmetic takes.
const MAX_RANK: usize = 8;

/// Strides (in elements) of an input of shape `s` broadcast to `out` (right-aligned; 0 on
/// broadcast dims), padded to `MAX_RANK` entries.
fn broadcast_strides(s: &[usize], out: &[usize]) -> [usize; MAX_RANK] {
    let mut st = [0; MAX_RANK];
    let lead = out.len() - s.len();
    let mut acc = 1;
    for i in (0..s.len()).rev() {
        if s[i] != 1 {
            st[lead + i] = acc;
        }
        acc *= s[i];
    }
    st
}

pub(super) fn pow_any(
    cx: &Ctx<'_>,
    prog: &mut Program,
    w: &mut WeightsBuilder,
) -> Result<(), Error> {
    let (x, e, y) = (cx.input(0)?, cx.input(1)?, cx.output()?);
    let (xt, et, yt) = (cx.ty(x).clone(), cx.ty(e).clone(), cx.ty(y).clone());
    let out = yt.shape.clone();
    if out.len() > MAX_RANK || xt.shape.len() > out.len() || et.shape.len() > out.len() {
        return Err(cx.err(format!(
            "no kernel for Pow of {} ^ {} over more than {MAX_RANK} dims yet",
            xt.dtype.name(),
            et.dtype.name()
        )));
    }
    let (xs, es) = (
        broadcast_strides(&xt.shape, &out),
        broadcast_strides(&et.shape, &out),
    );
    let (bx, be, by) = (xt.dtype, et.dtype, yt.dtype);
    let (nx, ne, ny) = (
        xt.bytes().unwrap_or(0),
        et.bytes().unwrap_or(0),
        yt.bytes().unwrap_or(0),
    );
    let n = yt.numel().unwrap_or(0);
    let ints = bx.is_int() && be.is_int();
    let kernel = HostKernel::new(move |p| {
        // SAFETY: `arenac_host`'s contract: base, exponent and output planned for these
        // byte counts.
        let (xb, eb, yb) = unsafe {
            (
                input::<u8>(p[0], nx),
                input::<u8>(p[1], ne),
                output::<u8>(p[2], ny),
            )
        };
        let (sx, se, sy) = (bx.size(), be.size(), by.size());
        for i in 0..n {
            // The inputs' element offsets of output element i.
            let (mut rem, mut ox, mut oe) = (i, 0, 0);
            for d in (0..out.len()).rev() {
                let k = rem % out[d];
                rem /= out[d];
                ox += k * xs[d];
                oe += k * es[d];
            }
            let (Some(xv), Some(ev), Some(dst)) = (
                xb.get(ox * sx..(ox + 1) * sx),
                eb.get(oe * se..(oe + 1) * se),
                yb.get_mut(i * sy..(i + 1) * sy),
            ) else {
                continue;
            };
            if ints {
                let v = int_pow(read_i64(bx, xv), read_i64(be, ev), be).unwrap_or(0);
                // Little-endian low bytes: the wrapping conversion to the output's width.
                dst.copy_from_slice(&v.to_le_bytes()[..sy]);
            } else {
                let v = read_f64(bx, xv).powf(read_f64(be, ev));
                write_f64(dst, by, if by.is_int() { v.trunc() } else { v });
            }
        }
    });
    if bx == DType::Bool || be == DType::Bool {
        return Err(cx.err("Pow takes no bool operands"));
    }
    let args = vec![cx.operand(x, w)?, cx.operand(e, w)?, cx.arena(y)?];
    super::act16::host_call(cx, prog, kernel, args)
}
