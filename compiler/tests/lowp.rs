//! The storage types' conversions (`arenac_compiler::ir::lowp`) against the values onnx's
//! reference gives, written by `scripts/gen_lowp_vectors.py` into `data/lowp_vectors.txt`:
//! every code decoded, about 1,000 f32 inputs per sign around every rounding boundary
//! encoded to every type with and without saturation, a few f64 inputs, and E8M0 in every
//! saturate / round_mode.

use arenac_compiler::ir::lowp::{
    CastMode, E8m0Round, canonical, decode_float, decode_int, encode_f64, encode_float, encode_int,
};
use arenac_compiler::ir::types::DType;

const VECTORS: &str = include_str!("data/lowp_vectors.txt");

const FLOATS: [DType; 5] = [
    DType::F8E4M3FN,
    DType::F8E4M3FNUZ,
    DType::F8E5M2,
    DType::F8E5M2FNUZ,
    DType::F4E2M1,
];
const INTS: [DType; 4] = [DType::I4, DType::U4, DType::I2, DType::U2];

fn rows(kind: &str) -> Vec<Vec<&'static str>> {
    let rows: Vec<Vec<&str>> = VECTORS
        .lines()
        .filter(|l| l.split(' ').next() == Some(kind))
        .map(|l| l.split(' ').skip(1).collect())
        .collect();
    assert!(!rows.is_empty(), "no '{kind}' rows");
    rows
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s, 16).unwrap_or_else(|e| panic!("'{s}': {e}"))
}

fn mode(saturate: bool) -> CastMode {
    CastMode {
        saturate,
        round: E8m0Round::Up,
    }
}

/// The (dtype, saturate) of each encode column: float8 with and without, then E2M1 and the
/// integers (where saturate has no effect: both are checked).
fn columns() -> Vec<(DType, Option<bool>)> {
    let mut c = Vec::new();
    for dt in &FLOATS[..4] {
        c.push((*dt, Some(true)));
        c.push((*dt, Some(false)));
    }
    c.push((DType::F4E2M1, None));
    c.extend(INTS.iter().map(|&d| (d, None)));
    c
}

fn check_code(dt: DType, got: u8, want: u64, what: &str) {
    if INTS.contains(&dt) {
        // ml_dtypes keeps the bare low bits; arenac's bytes are sign-extended.
        assert_eq!(got, canonical(dt, got), "{what}: {got:#x} is not canonical");
        assert_eq!(decode_int(dt, got), decode_int(dt, want as u8), "{what}");
    } else {
        assert_eq!(
            u64::from(got),
            want,
            "{what}: got {got:#04x}, want {want:#04x}"
        );
    }
}

#[test]
fn decodes_every_code() {
    let mut n = 0;
    for r in rows("decode") {
        let code = hex(r[0]) as u8;
        for (dt, want) in FLOATS.iter().zip(&r[1..]) {
            if *want == "-" {
                continue;
            }
            let want = f32::from_bits(hex(want) as u32);
            let got = decode_float(*dt, code);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{dt} {code:#04x}: {got:e} vs {want:e}"
            );
            n += 1;
        }
    }
    assert_eq!(n, 4 * 256 + 16);
    for r in rows("e8m0dec") {
        let (code, want) = (hex(r[0]) as u8, f32::from_bits(hex(r[1]) as u32));
        let got = decode_float(DType::F8E8M0, code);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "e8m0 {code:#04x}: {got:e} vs {want:e}"
        );
    }
}

#[test]
fn encodes_f32_like_onnx() {
    let cols = columns();
    let rows = rows("encode");
    assert!(rows.len() > 1500, "{} rows", rows.len());
    for r in rows {
        let x = f32::from_bits(hex(r[0]) as u32);
        assert_eq!(r.len(), cols.len() + 1);
        for (&(dt, sat), want) in cols.iter().zip(&r[1..]) {
            if *want == "-" {
                continue;
            }
            for s in sat.map_or(vec![true, false], |s| vec![s]) {
                let what = format!("{dt} saturate={s} of {x:e} ({})", r[0]);
                check_code(dt, encode_float_or_int(dt, x, s), hex(want), &what);
            }
        }
    }
}

fn encode_float_or_int(dt: DType, x: f32, saturate: bool) -> u8 {
    if dt.is_float() {
        encode_float(dt, x, mode(saturate))
    } else {
        encode_f64(dt, f64::from(x), mode(saturate))
    }
}

#[test]
fn encodes_f64_through_f32() {
    let cols = columns();
    for r in rows("encode64") {
        let x = f64::from_bits(hex(r[0]));
        for (&(dt, sat), want) in cols.iter().zip(&r[1..]) {
            let s = sat.unwrap_or(true);
            let what = format!("{dt} saturate={s} of f64 {x:e}");
            check_code(dt, encode_f64(dt, x, mode(s)), hex(want), &what);
        }
    }
}

#[test]
fn encodes_e8m0_in_every_mode() {
    let modes: Vec<CastMode> = [true, false]
        .into_iter()
        .flat_map(|saturate| {
            [E8m0Round::Up, E8m0Round::Down, E8m0Round::Nearest]
                .map(|round| CastMode { saturate, round })
        })
        .collect();
    let rows = rows("e8m0");
    assert!(rows.len() > 300, "{} rows", rows.len());
    for r in rows {
        let x = f32::from_bits(hex(r[0]) as u32);
        for (m, want) in modes.iter().zip(&r[1..]) {
            let got = encode_float(DType::F8E8M0, x, *m);
            assert_eq!(u64::from(got), hex(want), "e8m0 {m:?} of {x:e} ({})", r[0]);
        }
    }
}

#[test]
fn integers_wrap_from_i64() {
    for v in -40i64..40 {
        for dt in INTS {
            let bits = if matches!(dt, DType::I4 | DType::U4) {
                4
            } else {
                2
            };
            let m = 1i64 << bits;
            let want = if matches!(dt, DType::I4 | DType::I2) {
                (v + m / 2).rem_euclid(m) - m / 2
            } else {
                v.rem_euclid(m)
            };
            assert_eq!(decode_int(dt, encode_int(dt, v)), want, "{dt} {v}");
        }
    }
}
