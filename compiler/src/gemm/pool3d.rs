//! MaxPool and AveragePool over 3-d windows (`[N, C, D, H, W]`), f32: a precompiled kernel
//! run through `crate::codegen::host` (the 1-d and 2-d windows take `super::pool`).
//!
//! Semantics are the reference's (`crate::ops::pool`): output point `o` reads input
//! `o * stride - pad_begin + k * dilation` for every window tap `k`; taps outside the input are
//! skipped. Max keeps the first NaN it meets and gives `f32::MIN` for a window entirely in
//! the padding; Average divides by the taps inside the input, or with `count_include_pad` by
//! the taps inside the input plus its declared padding (both products of per-dim counts).
//! No allocation: the geometry is fixed when compiling.

/// One pooling geometry over 3 spatial dims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool3d {
    /// `N * C`.
    pub planes: usize,
    /// Input spatial dims.
    pub input: [usize; 3],
    /// Output spatial dims.
    pub output: [usize; 3],
    /// Window.
    pub kernel: [usize; 3],
    /// Strides.
    pub strides: [usize; 3],
    /// Dilations.
    pub dilations: [usize; 3],
    /// Pads at the beginning of each dim.
    pub pad_begin: [usize; 3],
    /// Pads at the end of each dim.
    pub pad_end: [usize; 3],
    /// Max (else average).
    pub max: bool,
    /// Average: padding taps count in the divisor.
    pub include_pad: bool,
}

impl Pool3d {
    /// Input elements.
    pub fn input_len(&self) -> usize {
        self.planes * self.input.iter().product::<usize>()
    }

    /// Output elements.
    pub fn output_len(&self) -> usize {
        self.planes * self.output.iter().product::<usize>()
    }

    /// Along dim `d`, for output index `o`: the first tap's input coordinate, and the
    /// number of taps in the declared padding + input (for `count_include_pad`).
    fn along(&self, d: usize, o: usize) -> (i64, usize) {
        let start = (o * self.strides[d]) as i64 - self.pad_begin[d] as i64;
        let lo = -(self.pad_begin[d] as i64);
        let hi = (self.input[d] + self.pad_end[d]) as i64;
        let padded = (0..self.kernel[d])
            .filter(|&k| {
                let q = start + (k * self.dilations[d]) as i64;
                q >= lo && q < hi
            })
            .count();
        (start, padded)
    }

    /// Pools `x` into `y` (each at least its length; shorter slices leave outputs unwritten).
    pub fn run(&self, x: &[f32], y: &mut [f32]) {
        let [id, ih, iw] = self.input;
        let [od, oh, ow] = self.output;
        let in_plane = id * ih * iw;
        let out_plane = od * oh * ow;
        for p in 0..self.planes {
            let xp = x.get(p * in_plane..(p + 1) * in_plane).unwrap_or_default();
            for a in 0..od {
                let (sa, pa) = self.along(0, a);
                for b in 0..oh {
                    let (sb, pb) = self.along(1, b);
                    for c in 0..ow {
                        let (sc, pc) = self.along(2, c);
                        let (mut max, mut sum, mut inside) = (None::<f32>, 0.0f32, 0usize);
                        for ka in 0..self.kernel[0] {
                            let qa = sa + (ka * self.dilations[0]) as i64;
                            if qa < 0 || qa >= id as i64 {
                                continue;
                            }
                            for kb in 0..self.kernel[1] {
                                let qb = sb + (kb * self.dilations[1]) as i64;
                                if qb < 0 || qb >= ih as i64 {
                                    continue;
                                }
                                let row = (qa as usize * ih + qb as usize) * iw;
                                for kc in 0..self.kernel[2] {
                                    let qc = sc + (kc * self.dilations[2]) as i64;
                                    if qc < 0 || qc >= iw as i64 {
                                        continue;
                                    }
                                    let v = xp.get(row + qc as usize).copied().unwrap_or(0.0);
                                    max = Some(match max {
                                        Some(m) if !(v > m || v.is_nan()) => m,
                                        _ => v,
                                    });
                                    sum += v;
                                    inside += 1;
                                }
                            }
                        }
                        let v = if self.max {
                            max.unwrap_or(f32::MIN)
                        } else {
                            let count = if self.include_pad {
                                pa * pb * pc
                            } else {
                                inside
                            };
                            if count == 0 {
                                f32::NAN
                            } else {
                                sum / count as f32
                            }
                        };
                        if let Some(out) = y.get_mut(p * out_plane + (a * oh + b) * ow + c) {
                            *out = v;
                        }
                    }
                }
            }
        }
    }
}
