//! The gathers against the gather this module replaced (each lane's patch origin, one
//! value at a time), bit for bit, on planes with edges, pads and tile rows of every width.

use super::*;

/// The gather before [`segments`]: each lane's patch from its tile's origin, zeros outside
/// the plane and past the block's tiles.
fn reference(b: &Block, plane: &[f32], gi: usize) -> [[Lanes; 6]; 6] {
    let mut d = [[[0.0f32; L]; 6]; 6];
    for l in 0..L {
        if gi * L + l >= b.nt {
            continue;
        }
        let ti = b.first + gi * L + l;
        let (ty, tx) = (ti / b.tw, ti % b.tw);
        let (iy, ix) = (4 * ty as isize - b.pt, 4 * tx as isize - b.pl);
        for (r, dr) in d.iter_mut().enumerate() {
            for (k, dk) in dr.iter_mut().enumerate() {
                let (yy, xx) = (iy + r as isize, ix + k as isize);
                if yy >= 0 && xx >= 0 && yy < b.h as isize && xx < b.w as isize {
                    dk[l] = plane[yy as usize * b.w + xx as usize];
                }
            }
        }
    }
    d
}

fn bits(d: &[[Lanes; 6]; 6]) -> Vec<u32> {
    d.as_flattened()
        .as_flattened()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// Every panel of every tile block of planes `h` x `w` with pads (top, left, bottom,
/// right) and blocks of `t` tiles, through both gathers.
fn check(h: usize, w: usize, pads: [usize; 4], t: usize) -> usize {
    let (oh, ow) = (h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2);
    let tw = ow.div_ceil(4);
    let tiles = oh.div_ceil(4) * tw;
    // Distinct values, -0.0 and a NaN payload among them: copied, never computed.
    let mut plane: Vec<f32> = (0..h * w).map(|i| i as f32 * 0.5 - 7.0).collect();
    plane[0] = -0.0;
    if h * w > 3 {
        plane[3] = f32::from_bits(0x7fc0_1234);
    }
    let mut panels = 0;
    for first in (0..tiles).step_by(t) {
        let nt = t.min(tiles - first);
        let b = Block {
            xi: plane.as_ptr(),
            x16: None,
            c: 1,
            h,
            w,
            pt: pads[0] as isize,
            pl: pads[1] as isize,
            tw,
            first,
            nt,
            n_cols: nt.next_multiple_of(NR),
            t,
            v: std::ptr::null_mut(),
        };
        for gi in 0..b.n_cols / L {
            let want = bits(&reference(&b, &plane, gi));
            let (segs, n) = segments(&b, gi);
            let mut d = [[[f32::NAN; L]; 6]; 6];
            // SAFETY: the plane is h x w; segments made for b.
            unsafe { gather_scalar(&b, plane.as_ptr(), &segs[..n], &mut d) };
            assert_eq!(
                bits(&d),
                want,
                "scalar {h}x{w} {pads:?} t {t} first {first}"
            );
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx512f") {
                let mut d = [[[f32::NAN; L]; 6]; 6];
                // SAFETY: as above; the CPU has AVX-512F.
                unsafe { gather_avx512(&b, plane.as_ptr(), &segs[..n], &mut d) };
                assert_eq!(
                    bits(&d),
                    want,
                    "avx512 {h}x{w} {pads:?} t {t} first {first}"
                );
            }
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut d = [[[f32::NAN; L]; 6]; 6];
                // SAFETY: as above; the CPU has AVX2.
                unsafe { gather_avx2(&b, plane.as_ptr(), &segs[..n], &mut d) };
                assert_eq!(bits(&d), want, "avx2 {h}x{w} {pads:?} t {t} first {first}");
            }
            panels += 1;
        }
    }
    panels
}

#[test]
fn gathers_match_the_per_lane_reference_bit_for_bit() {
    let mut panels = 0;
    // Plane widths giving tile rows of 1..=18 tiles (runs of every length, several per
    // panel, a panel's end mid-row), heights with short last tile rows, pads 0..=2 per side.
    for w in [3, 4, 5, 6, 7, 9, 13, 14, 15, 17, 28, 29, 30, 56, 57, 70] {
        for h in [3, 5, 8, 13, 14] {
            for pads in [
                [0, 0, 0, 0],
                [1, 1, 1, 1],
                [2, 1, 0, 2],
                [0, 2, 2, 0],
                [1, 0, 2, 1],
            ] {
                for t in [16, 32, 48] {
                    panels += check(h, w, pads, t);
                }
            }
        }
    }
    assert!(panels > 1000, "{panels} panels");
}

#[test]
fn runs_split_at_tile_row_ends() {
    // 7 tiles per row (28-wide plane, pad 1): panel 0 is 7 + 7 + 2 tiles.
    let b = Block {
        xi: std::ptr::null(),
        x16: None,
        c: 1,
        h: 28,
        w: 28,
        pt: 1,
        pl: 1,
        tw: 7,
        first: 0,
        nt: 49,
        n_cols: 64,
        t: 64,
        v: std::ptr::null_mut(),
    };
    let (segs, n) = segments(&b, 0);
    let runs: Vec<_> = segs[..n]
        .iter()
        .map(|s| (s.l0, s.end, s.iy, s.col))
        .collect();
    assert_eq!(runs, [(0, 6, -1, -1), (7, 13, 3, -29), (14, 15, 7, -57)]);
    // Lane 0 starts at column -1 (the pad): its column 0 is outside, 1..4 inside.
    assert_eq!(segs[0].cols & 0xf, 0b1110);
    // Lane 6 (columns 23..29 of a 28-wide plane): 4 inside, 5 outside.
    assert!(segs[0].end4 && !segs[0].end5);
    // Panel 3: tile 48 alone.
    let (segs, n) = segments(&b, 3);
    assert_eq!(n, 1);
    assert_eq!((segs[0].l0, segs[0].end), (0, 0));
}

/// The 16-bit gathers ([`In16`]: a band of rows of a 16-bit plane read in place, the rows
/// outside the plane zeros) against [`gather_scalar`] on the band widened by
/// `crate::gemm::stage16::widen` (the staged bands' former input), bit for bit: f16 and
/// bf16 values with -0.0, subnormals and NaNs (a bf16 signaling one, quieted by both), bands
/// above, inside and below the plane, every panel of blocks of 16 and 32 tiles.
#[test]
fn gathers16_equal_the_widened_band() {
    use crate::gemm::stage16::{N16, widen};
    let (h, w) = (13usize, 37usize);
    for t16 in [N16::F16, N16::Bf16] {
        let mut plane: Vec<u16> = (0..h * w)
            .map(|i| (i as u16).wrapping_mul(0x9e37) & 0xbfff)
            .collect();
        plane[1] = 0x8000;
        plane[2] = 0x0001;
        plane[4] = if t16 == N16::F16 { 0x7d01 } else { 0x7f81 };
        plane[w + 5] = 0xffc3;
        // (first plane row of the band, its rows): the top pad, the middle, the bottom pad.
        for (lo, hb) in [(-1isize, 6usize), (2, 10), (4, 6), (9, 6), (10, 5)] {
            let mut band = vec![0f32; hb * w];
            for r in 0..hb {
                let y = lo + r as isize;
                if (0..h as isize).contains(&y) {
                    let y = y as usize;
                    widen(
                        t16,
                        &plane[y * w..(y + 1) * w],
                        &mut band[r * w..(r + 1) * w],
                    );
                }
            }
            let (oh, ow) = (hb - 2, w);
            let tw = ow.div_ceil(4);
            let tiles = oh.div_ceil(4) * tw;
            let x16 = In16 {
                x: plane.as_ptr().wrapping_offset(lo * w as isize),
                t: t16,
                cs: h * w,
                rows: ((-lo).max(0), (h as isize - lo).min(hb as isize)),
            };
            for t in [16, 32] {
                for first in (0..tiles).step_by(t) {
                    let nt = t.min(tiles - first);
                    let mut b = Block {
                        xi: band.as_ptr(),
                        x16: None,
                        c: 1,
                        h: hb,
                        w,
                        pt: 0,
                        pl: 1,
                        tw,
                        first,
                        nt,
                        n_cols: nt.next_multiple_of(NR),
                        t,
                        v: std::ptr::null_mut(),
                    };
                    for gi in 0..b.n_cols / L {
                        let (segs, n) = segments(&b, gi);
                        b.x16 = None;
                        let mut want = [[[f32::NAN; L]; 6]; 6];
                        // SAFETY: the band is hb x w; segments made for b.
                        unsafe { gather_scalar(&b, band.as_ptr(), &segs[..n], &mut want) };
                        b.x16 = Some(x16);
                        for vector in [false, true] {
                            #[cfg(target_arch = "x86_64")]
                            if vector && !(std::arch::is_x86_feature_detected!("avx512f") && bw()) {
                                continue;
                            }
                            #[cfg(not(target_arch = "x86_64"))]
                            if vector {
                                continue;
                            }
                            let mut d = [[[f32::NAN; L]; 6]; 6];
                            // SAFETY: rows `x16.rows` of the plane read; the CPU has the
                            // features where `vector`.
                            unsafe { gather16(vector, t16, &b, x16.x, &segs[..n], &mut d) };
                            assert_eq!(
                                bits(&d),
                                bits(&want),
                                "{t16:?} vector {vector} lo {lo} hb {hb} t {t} first {first}"
                            );
                        }
                    }
                }
            }
        }
    }
}
