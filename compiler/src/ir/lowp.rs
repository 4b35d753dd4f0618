//! Values of the storage types: the 8-bit floats (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0),
//! the 4-bit float E2M1 and the 4- and 2-bit integers, as onnx's reference computes them
//! (`onnx.reference.ops.op_cast`, `onnx.numpy_helper`, ml_dtypes). `compiler/tests/lowp.rs`
//! checks every function here against vectors written by `scripts/gen_lowp_vectors.py`.
//!
//! **One element per byte in memory.** In the arena, the weights, constants and `Session`
//! tensors every element of these types takes one byte: a float's code (E2M1's in the low
//! nibble), a 4-/2-bit integer sign- or zero-extended to the byte. Readers look only at the
//! type's low bits ([`decode_float`], [`decode_int`]), so any byte is a valid element.
//! Only ONNX `TensorProto`s pack them — two 4-bit or four 2-bit elements per byte, low bits
//! first ([`pack`], [`unpack`]) — so byte sizes stay `numel * DType::size()` everywhere else.
//!
//! Conversions into these types:
//! - float → 8-/4-bit float: the value is first rounded to f32 (as ml_dtypes does from f64),
//!   then to nearest even at the type's precision (subnormals included). What does not fit:
//!   with `saturate` the largest finite value of that sign (infinities too); without it, E5M2
//!   gives ±inf, E4M3FN NaN (with the sign), the FNUZ types their one NaN `0x80`. E2M1 has no
//!   NaN or inf: it always saturates, and NaN becomes `0x8` for +NaN (`0x0` for -NaN), which
//!   is what ml_dtypes does. The FNUZ types have no -0: a negative result of zero is `0x00`.
//! - f32 → E8M0: `onnx.numpy_helper.to_float8e8m0`: the f32 exponent field, the sign ignored,
//!   rounded up (any mantissa bit), down (truncated) or to nearest (its own tie rule), NaN
//!   and inf to `0xff`; `saturate` keeps 2^127 from rounding up into NaN.
//! - float → 4-/2-bit integer: truncated toward zero to i64 (saturating, NaN → 0), then
//!   wrapped to the width (ml_dtypes' `astype` wraps: 100 → int4 4); integer → integer wraps.

use super::types::DType;

/// Rounding of a conversion to E8M0 (ONNX Cast's `round_mode`, opset 24).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum E8m0Round {
    /// Any nonzero mantissa rounds up (the default).
    Up,
    /// Truncate.
    Down,
    /// To nearest, onnx's tie rule.
    Nearest,
}

/// How a conversion into a storage float treats what it cannot represent: ONNX Cast's
/// `saturate` (float8 and E8M0 targets) and `round_mode` (E8M0 targets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CastMode {
    /// Out-of-range values become the largest finite value instead of inf/NaN.
    pub saturate: bool,
    /// Rounding to E8M0.
    pub round: E8m0Round,
}

impl CastMode {
    /// ONNX's defaults: `saturate=1`, `round_mode="up"`.
    pub const DEFAULT: CastMode = CastMode {
        saturate: true,
        round: E8m0Round::Up,
    };

    /// The mode with the parts that do not affect a cast to `to` reset to the defaults, so
    /// that two casts computing the same thing compare (and print) equal.
    pub fn normalized(self, to: DType) -> CastMode {
        match to {
            DType::F8E8M0 => self,
            DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ => CastMode {
                saturate: self.saturate,
                round: E8m0Round::Up,
            },
            _ => CastMode::DEFAULT,
        }
    }
}

/// What a minifloat does with the codes of its largest exponent.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Special {
    /// IEEE-like: exponent all ones is inf (mantissa 0) or NaN (E5M2).
    Ieee,
    /// Finite: only all ones is NaN (E4M3FN).
    Fn,
    /// Finite, unsigned zero: `0x80` is the one NaN (E4M3FNUZ, E5M2FNUZ).
    Fnuz,
    /// Finite, no NaN (E2M1).
    Finite,
}

/// A sign/exponent/mantissa format.
#[derive(Clone, Copy, Debug)]
struct Minifloat {
    mbits: u32,
    ebits: u32,
    bias: i32,
    /// The code of the largest finite magnitude.
    max: u32,
    special: Special,
}

fn minifloat(dt: DType) -> Option<Minifloat> {
    let (ebits, mbits, bias, max, special) = match dt {
        DType::F8E4M3FN => (4, 3, 7, 0x7e, Special::Fn),
        DType::F8E4M3FNUZ => (4, 3, 8, 0x7f, Special::Fnuz),
        DType::F8E5M2 => (5, 2, 15, 0x7b, Special::Ieee),
        DType::F8E5M2FNUZ => (5, 2, 16, 0x7f, Special::Fnuz),
        DType::F4E2M1 => (2, 1, 1, 0x7, Special::Finite),
        _ => return None,
    };
    Some(Minifloat {
        mbits,
        ebits,
        bias,
        max,
        special,
    })
}

/// `2^e` for `e` in f64's normal range.
fn pow2(e: i32) -> f64 {
    f64::from_bits(((1023 + i64::from(e)) as u64) << 52)
}

impl Minifloat {
    fn sign_bit(self) -> u32 {
        1 << (self.ebits + self.mbits)
    }

    fn decode(self, code: u8) -> f32 {
        let c = u32::from(code) & ((self.sign_bit() << 1) - 1);
        let neg = c & self.sign_bit() != 0;
        let e = (c >> self.mbits) & ((1 << self.ebits) - 1);
        let m = c & ((1 << self.mbits) - 1);
        let emax = (1 << self.ebits) - 1;
        let nan = match self.special {
            Special::Fnuz => c == self.sign_bit(),
            Special::Fn => e == emax && m == (1 << self.mbits) - 1,
            Special::Ieee => e == emax && m != 0,
            Special::Finite => false,
        };
        if nan {
            // A quiet NaN with the code's sign bit (ml_dtypes'; FNUZ's 0x80 is -NaN).
            return f32::from_bits(0x7fc0_0000 | (u32::from(neg) << 31));
        }
        let mag = if self.special == Special::Ieee && e == emax {
            f64::INFINITY
        } else if e == 0 {
            f64::from(m) * pow2(1 - self.bias - self.mbits as i32)
        } else {
            f64::from(m + (1 << self.mbits)) * pow2(e as i32 - self.bias - self.mbits as i32)
        };
        (if neg { -mag } else { mag }) as f32
    }

    /// The magnitude code of the finite f32 magnitude with bits `a` (sign cleared), rounded
    /// to nearest even in integer arithmetic, possibly beyond [`Minifloat::max`].
    fn round(self, a: u32) -> u32 {
        if a < 0x0080_0000 {
            // Zero or an f32 subnormal: below half the smallest subnormal of every format.
            return 0;
        }
        let e = (a >> 23) as i32 - 127;
        // The 24-bit significand: the value is `full * 2^(e - 23)`.
        let full = (a & 0x7f_ffff) | 0x80_0000;
        let emin = 1 - self.bias;
        let m = self.mbits as i32;
        // Quanta of 2^(max(e, emin) - m): `full` shifted right by `s` (at least 23 - m > 0).
        let s = 23 + e.max(emin) - m - e;
        if s > 25 {
            return 0;
        }
        let r = full >> s;
        let rem = full & ((1 << s) - 1);
        let half = 1 << (s - 1);
        // Non-short-circuit: the rounding direction is data-dependent, a branch would miss.
        let n = r + u32::from((rem > half) | ((rem == half) & (r & 1 == 1)));
        if e < emin {
            // Subnormal: the mantissa alone (2^mbits is the smallest normal's code).
            n
        } else {
            (((e + self.bias) as u32) << self.mbits) + n - (1 << self.mbits)
        }
    }

    fn encode(self, x: f32, saturate: bool) -> u8 {
        let sign = (x.to_bits() >> 31) << (self.ebits + self.mbits);
        let emax = (1u32 << self.ebits) - 1;
        if x.is_nan() {
            return match self.special {
                Special::Fn => self.max + 1 + sign,
                Special::Ieee => (emax << self.mbits) + (1 << (self.mbits - 1)) + sign,
                Special::Fnuz => self.sign_bit(),
                Special::Finite => self.sign_bit() ^ sign,
            } as u8;
        }
        let mag = if x.is_infinite() {
            u32::MAX
        } else {
            self.round(x.to_bits() & 0x7fff_ffff)
        };
        let code = if mag <= self.max {
            mag
        } else if saturate {
            self.max
        } else {
            match self.special {
                Special::Ieee => emax << self.mbits,
                Special::Fn => self.max + 1,
                Special::Fnuz => return self.sign_bit() as u8,
                Special::Finite => self.max,
            }
        };
        if self.special == Special::Fnuz && code == 0 {
            return 0;
        }
        (code | sign) as u8
    }
}

/// One storage float's conversions with the per-type choices made once (for loops over
/// many elements): [`FloatCodec::decode`] is [`decode_float`], [`FloatCodec::encode`] is
/// [`encode_float`] under the codec's mode.
#[derive(Clone, Copy, Debug)]
pub struct FloatCodec {
    /// The minifloat format, `None` for E8M0.
    format: Option<Minifloat>,
    mode: CastMode,
}

impl FloatCodec {
    /// The codec of `dt` under `mode`; `None` unless `dt` is a storage float.
    pub fn new(dt: DType, mode: CastMode) -> Option<FloatCodec> {
        let format = match dt {
            DType::F8E8M0 => None,
            _ => Some(minifloat(dt)?),
        };
        Some(FloatCodec { format, mode })
    }

    /// The value of `code` (exact in f32; a NaN code gives the quiet NaN of its sign, as
    /// ml_dtypes does).
    #[inline]
    pub fn decode(&self, code: u8) -> f32 {
        match self.format {
            Some(f) => f.decode(code),
            None => match code {
                0xff => f32::NAN,
                // 2^-127, an f32 subnormal.
                0 => f32::from_bits(0x0040_0000),
                c => f32::from_bits(u32::from(c) << 23),
            },
        }
    }

    /// The code of `x` (see the module doc).
    #[inline]
    pub fn encode(&self, x: f32) -> u8 {
        match self.format {
            Some(f) => f.encode(x, self.mode.saturate),
            None => encode_e8m0(x, self.mode),
        }
    }
}

/// The value of `code` in the storage float `dt` (exact in f32; a NaN code gives the quiet
/// NaN of its sign, as ml_dtypes does); NaN when `dt` is not one.
pub fn decode_float(dt: DType, code: u8) -> f32 {
    FloatCodec::new(dt, CastMode::DEFAULT).map_or(f32::NAN, |c| c.decode(code))
}

/// The code of `x` in the storage float `dt` under `mode` (see the module doc); 0 when `dt`
/// is not one.
pub fn encode_float(dt: DType, x: f32, mode: CastMode) -> u8 {
    FloatCodec::new(dt, mode).map_or(0, |c| c.encode(x))
}

/// `onnx.numpy_helper.to_float8e8m0` on one f32.
fn encode_e8m0(x: f32, mode: CastMode) -> u8 {
    let b = x.to_bits();
    let exp = (b >> 23) & 0xff;
    if exp == 0xff {
        return 0xff;
    }
    let up = match mode.round {
        E8m0Round::Up => b & 0x7f_ffff != 0,
        E8m0Round::Down => false,
        E8m0Round::Nearest => {
            let g = b & 0x40_0000 != 0;
            let r = b & 0x20_0000 != 0;
            let s = b & 0x1f_ffff != 0;
            g && (r || s || exp > 0)
        }
    };
    let up = up && !(mode.saturate && exp == 0xfe);
    (exp + u32::from(up)) as u8
}

/// The value of `code` in the 4-/2-bit integer `dt` (its low bits, sign-extended for the
/// signed ones); the byte as `i64` for any other dtype.
pub fn decode_int(dt: DType, code: u8) -> i64 {
    match dt {
        DType::I4 => i64::from(((code << 4) as i8) >> 4),
        DType::U4 => i64::from(code & 0xf),
        DType::I2 => i64::from(((code << 6) as i8) >> 6),
        DType::U2 => i64::from(code & 0x3),
        _ => i64::from(code),
    }
}

/// `v` wrapped to the 4-/2-bit integer `dt`, as its in-memory byte (sign- or zero-extended);
/// the low byte of `v` for any other dtype.
pub fn encode_int(dt: DType, v: i64) -> u8 {
    let b = v as u8;
    match dt {
        DType::I4 => (((b << 4) as i8) >> 4) as u8,
        DType::U4 => b & 0xf,
        DType::I2 => (((b << 6) as i8) >> 6) as u8,
        DType::U2 => b & 0x3,
        _ => b,
    }
}

/// `x` (a float) as the storage type `dt`: [`encode_float`] for the floats (through f32),
/// truncated and wrapped by [`encode_int`] for the integers.
pub fn encode_f64(dt: DType, x: f64, mode: CastMode) -> u8 {
    if dt.is_float() {
        encode_float(dt, x as f32, mode)
    } else {
        encode_int(dt, x as i64)
    }
}

/// `v` (an integer) as the storage type `dt`: through f64 then f32 for the floats (like
/// every integer-to-float conversion of arenac's kernels), wrapped for the integers.
pub fn encode_i64(dt: DType, v: i64, mode: CastMode) -> u8 {
    if dt.is_float() {
        encode_float(dt, v as f64 as f32, mode)
    } else {
        encode_int(dt, v)
    }
}

/// Bytes of `numel` elements of `dt` in a `TensorProto`: packed for 4- and 2-bit types,
/// `numel * size` otherwise; `None` on overflow.
pub fn packed_len(dt: DType, numel: usize) -> Option<usize> {
    match dt.packed_bits() {
        Some(bits) => Some(numel.checked_mul(bits)?.div_ceil(8)),
        None => numel.checked_mul(dt.size()),
    }
}

/// The in-memory bytes (one per element) of the packed `TensorProto` data of a 4-/2-bit
/// type: element `i` from bits `(i * bits) % 8` of byte `i * bits / 8`, each element
/// canonical (sign-extended for the signed integers). `None` when `packed` is not exactly
/// [`packed_len`] bytes. Other dtypes: the bytes unchanged.
pub fn unpack(dt: DType, packed: &[u8], numel: usize) -> Option<Vec<u8>> {
    if packed.len() != packed_len(dt, numel)? {
        return None;
    }
    let Some(bits) = dt.packed_bits() else {
        return Some(packed.to_vec());
    };
    let per = 8 / bits;
    let mask = (1u8 << bits) - 1;
    let out = packed
        .iter()
        .flat_map(|&b| (0..per).map(move |k| (b >> (k * bits)) & mask))
        .take(numel)
        .map(|c| canonical(dt, c))
        .collect();
    Some(out)
}

/// The packed `TensorProto` data of in-memory elements (one per byte) of a 4-/2-bit type,
/// low bits first, the last byte's unused bits zero. Other dtypes: the bytes unchanged.
pub fn pack(dt: DType, elems: &[u8]) -> Vec<u8> {
    let Some(bits) = dt.packed_bits() else {
        return elems.to_vec();
    };
    let per = 8 / bits;
    let mask = (1u8 << bits) - 1;
    elems
        .chunks(per)
        .map(|c| {
            c.iter()
                .enumerate()
                .fold(0u8, |acc, (k, &e)| acc | ((e & mask) << (k * bits)))
        })
        .collect()
}

/// The canonical in-memory byte of an element of `dt` whose code is in the low bits of `b`:
/// sign-extended for `I4`/`I2`, masked for `U4`/`U2`/`F4E2M1`, unchanged otherwise.
pub fn canonical(dt: DType, b: u8) -> u8 {
    match dt {
        DType::I4 | DType::U4 | DType::I2 | DType::U2 => encode_int(dt, decode_int(dt, b)),
        DType::F4E2M1 => b & 0xf,
        _ => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_finite_code() {
        for dt in [
            DType::F8E4M3FN,
            DType::F8E4M3FNUZ,
            DType::F8E5M2,
            DType::F8E5M2FNUZ,
            DType::F8E8M0,
            DType::F4E2M1,
        ] {
            let n = if dt == DType::F4E2M1 { 16 } else { 256 };
            for c in 0..n {
                let v = decode_float(dt, c as u8);
                if v.is_nan() || (dt == DType::F8E4M3FNUZ || dt == DType::F8E5M2FNUZ) && c == 0x80 {
                    continue;
                }
                let mode = CastMode {
                    saturate: false,
                    round: E8m0Round::Down,
                };
                assert_eq!(encode_float(dt, v, mode), c as u8, "{dt} {c:#x} = {v}");
            }
        }
    }

    #[test]
    fn packs_low_bits_first() {
        let elems = [encode_int(DType::I4, -1), 2, encode_int(DType::I4, -8)];
        assert_eq!(elems, [0xff, 2, 0xf8]);
        let packed = pack(DType::I4, &elems);
        assert_eq!(packed, [0x2f, 0x08]);
        assert_eq!(unpack(DType::I4, &packed, 3), Some(elems.to_vec()));
        assert_eq!(unpack(DType::I4, &packed, 4).map(|v| v.len()), Some(4));
        assert_eq!(unpack(DType::I4, &packed, 5), None);
        let u2 = [3, 0, 1, 2, 1];
        let packed = pack(DType::U2, &u2);
        assert_eq!(packed, [0b1001_0011, 0b01]);
        assert_eq!(unpack(DType::U2, &packed, 5), Some(u2.to_vec()));
        assert_eq!(packed_len(DType::U2, 5), Some(2));
        assert_eq!(packed_len(DType::F8E5M2, 5), Some(5));
    }

    #[test]
    fn integers_wrap_and_read_low_bits() {
        assert_eq!(decode_int(DType::I4, encode_int(DType::I4, 100)), 4);
        assert_eq!(decode_int(DType::I4, encode_int(DType::I4, -9)), 7);
        assert_eq!(decode_int(DType::U4, encode_int(DType::U4, -1)), 15);
        assert_eq!(decode_int(DType::I2, 0x0e), -2);
        assert_eq!(decode_int(DType::U2, 0xff), 3);
        assert_eq!(encode_f64(DType::I4, -7.9, CastMode::DEFAULT), 0xf9);
    }
}
