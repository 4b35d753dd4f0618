//! ConvInteger, QLinearConv and QLinearMatMul, expanded at import, against integer arithmetic
//! written out here (i64 sums, then the reference's requantization), not against the
//! expansion's own reference evaluation: long reductions at the largest products the 8-bit
//! types allow check that the f32 products are exact (chunked, or split into nibbles).

use crate::common::*;

fn pick(rng: &mut Rng, n: usize) -> usize {
    (rng.next() % n as u64) as usize
}

fn val(dt: DType, rng: &mut Rng) -> i64 {
    match dt {
        DType::U8 => pick(rng, 256) as i64,
        _ => pick(rng, 256) as i64 - 128,
    }
}

/// One 2-d integer convolution: shapes, group, pads `[t, l, b, r]`, strides.
#[derive(Clone, Copy, Debug)]
struct Geo {
    x: [usize; 4],
    m: usize,
    k: [usize; 2],
    group: usize,
    pads: [usize; 4],
    strides: [usize; 2],
}

impl Geo {
    fn w(&self) -> [usize; 4] {
        [self.m, self.x[1] / self.group, self.k[0], self.k[1]]
    }

    fn y(&self) -> [usize; 4] {
        let o = |i: usize| {
            (self.x[2 + i] + self.pads[i] + self.pads[2 + i] - self.k[i]) / self.strides[i] + 1
        };
        [self.x[0], self.m, o(0), o(1)]
    }

    fn attrs(&self) -> Vec<(&'static str, Attr)> {
        vec![
            ("group", Attr::Int(self.group as i64)),
            (
                "pads",
                Attr::Ints(self.pads.iter().map(|&p| p as i64).collect()),
            ),
            (
                "strides",
                Attr::Ints(self.strides.iter().map(|&s| s as i64).collect()),
            ),
        ]
    }

    /// `sum (x - xz) (w - wz[m])` with zero padding after the shift.
    fn conv(&self, x: &[i64], xz: i64, w: &[i64], wz: &[i64]) -> Vec<i64> {
        let [n, c, h, wd] = self.x;
        let [m, cg, kh, kw] = self.w();
        let [_, _, oh, ow] = self.y();
        let mg = m / self.group;
        let mut y = vec![0i64; n * m * oh * ow];
        for b in 0..n {
            for mo in 0..m {
                let g = mo / mg;
                let z = wz[if wz.len() == 1 { 0 } else { mo }];
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut s = 0i64;
                        for ci in 0..cg {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy =
                                        (oy * self.strides[0] + ky) as i64 - self.pads[0] as i64;
                                    let ix =
                                        (ox * self.strides[1] + kx) as i64 - self.pads[1] as i64;
                                    if iy < 0 || ix < 0 || iy >= h as i64 || ix >= wd as i64 {
                                        continue;
                                    }
                                    let xi = ((b * c + g * cg + ci) * h + iy as usize) * wd
                                        + ix as usize;
                                    let wi = ((mo * cg + ci) * kh + ky) * kw + kx;
                                    s += (x[xi] - xz) * (w[wi] - z);
                                }
                            }
                        }
                        y[((b * m + mo) * oh + oy) * ow + ox] = s;
                    }
                }
            }
        }
        y
    }
}

/// A ConvInteger model; the weights and their zero points are initializers when `constant`.
fn conv_integer_model(
    g: &Geo,
    xt: DType,
    wt: DType,
    w: &Tensor,
    wz: &Tensor,
    constant: bool,
) -> ModelProto {
    let mut b = ModelBuilder::new("ci", 10)
        .input("x", xt, &dims(&g.x))
        .input("xz", xt, &[])
        .output("y", DType::I32, &dims(&g.y()));
    if constant {
        b = b.initializer("w", w).initializer("wz", wz);
    } else {
        b = b
            .input("w", wt, &dims(&g.w()))
            .input("wz", wt, &dims(wz.shape()));
    }
    b.node(
        "c",
        "ConvInteger",
        &["x", "w", "xz", "wz"],
        &["y"],
        g.attrs(),
    )
    .build()
}

#[test]
fn conv_integer_is_exact() {
    let mut rng = Rng(0xC0_1A7E);
    let geos = [
        Geo {
            x: [1, 3, 7, 6],
            m: 4,
            k: [3, 3],
            group: 1,
            pads: [1, 1, 1, 1],
            strides: [1, 1],
        },
        Geo {
            x: [2, 4, 5, 9],
            m: 6,
            k: [2, 3],
            group: 2,
            pads: [0, 1, 1, 0],
            strides: [2, 1],
        },
        Geo {
            x: [1, 8, 6, 6],
            m: 8,
            k: [3, 3],
            group: 8,
            pads: [1, 1, 1, 1],
            strides: [2, 2],
        },
        // Long reductions: 64 * 9 = 576 and 6 groups of 40 * 5 = 200 products per output.
        Geo {
            x: [1, 64, 5, 5],
            m: 3,
            k: [3, 3],
            group: 1,
            pads: [1, 1, 1, 1],
            strides: [1, 1],
        },
        Geo {
            x: [1, 240, 4, 4],
            m: 12,
            k: [1, 5],
            group: 6,
            pads: [0, 2, 0, 2],
            strides: [1, 1],
        },
    ];
    for (case, g) in geos.iter().enumerate() {
        for constant in [false, true] {
            let (xt, wt) = if case % 2 == 0 {
                (DType::U8, DType::I8)
            } else {
                (DType::I8, DType::U8)
            };
            let xv: Vec<i64> = (0..g.x.iter().product())
                .map(|_| val(xt, &mut rng))
                .collect();
            let wv: Vec<i64> = (0..g.w().iter().product())
                .map(|_| val(wt, &mut rng))
                .collect();
            let per_channel = case % 3 != 1;
            let wz: Vec<i64> = (0..if per_channel { g.m } else { 1 })
                .map(|_| val(wt, &mut rng))
                .collect();
            let xz = val(xt, &mut rng);
            let w = Tensor::from_i64(wt, g.w().to_vec(), &wv);
            let wzt = Tensor::from_i64(wt, vec![wz.len()], &wz);
            let model = conv_integer_model(g, xt, wt, &w, &wzt, constant);
            let mut inputs = vec![
                Tensor::from_i64(xt, g.x.to_vec(), &xv),
                Tensor::from_i64(xt, vec![], &[xz]),
            ];
            if !constant {
                inputs.push(w.clone());
                inputs.push(wzt.clone());
            }
            let exe = check(model, &inputs, 0.0, 0.0);
            let got = run(&exe, &inputs).remove(0);
            assert_eq!(got.dtype(), DType::I32);
            assert_eq!(
                got.to_i64_vec(),
                g.conv(&xv, xz, &wv, &wz),
                "case {case} constant {constant}"
            );
        }
    }
}

#[test]
fn conv_integer_worst_case_products_stay_exact() {
    // Every product is 255 * 255 = 65025 (uint8 x = 255, zero point 0; w = 0, zero point 255:
    // -255): 512 channels (per group) * 9 taps = 4608 products, 2^24 * 17.9; the f32 sum would
    // be off without the split (nibbles and two chunks of channels, per group when grouped).
    // Run-time weights (bounds from the types) and constant ones (measured).
    for group in [1, 2] {
        let g = Geo {
            x: [1, 512 * group, 3, 3],
            m: 2,
            k: [3, 3],
            group,
            pads: [1, 1, 1, 1],
            strides: [1, 1],
        };
        let xv = vec![255i64; g.x.iter().product()];
        let wv = vec![0i64; g.w().iter().product()];
        let w = Tensor::from_i64(DType::U8, g.w().to_vec(), &wv);
        let wz = Tensor::from_i64(DType::U8, vec![], &[255]);
        for constant in [false, true] {
            let model = conv_integer_model(&g, DType::U8, DType::U8, &w, &wz, constant);
            let mut inputs = vec![
                Tensor::from_i64(DType::U8, g.x.to_vec(), &xv),
                Tensor::from_i64(DType::U8, vec![], &[0]),
            ];
            if !constant {
                inputs.push(w.clone());
                inputs.push(wz.clone());
            }
            let exe = check(model, &inputs, 0.0, 0.0);
            let got = run(&exe, &inputs).remove(0).to_i64_vec();
            let want = g.conv(&xv, 0, &wv, &[255]);
            assert_eq!(want[4], -65025 * 4608);
            assert_eq!(got, want, "group {group} constant {constant}");
        }
    }
}

/// The reference's requantization: the combined scale in f32, then f64.
fn requant(acc: i64, scale: f32, yz: i64, out: DType) -> i64 {
    let (lo, hi) = if out == DType::U8 {
        (0.0, 255.0)
    } else {
        (-128.0, 127.0)
    };
    ((acc as f64) * f64::from(scale) + yz as f64)
        .round_ties_even()
        .clamp(lo, hi) as i64
}

#[test]
fn qlinear_conv_matches_integer_arithmetic() {
    let mut rng = Rng(0x51_C0);
    let geos = [
        Geo {
            x: [1, 3, 6, 6],
            m: 4,
            k: [3, 3],
            group: 1,
            pads: [1, 1, 1, 1],
            strides: [1, 1],
        },
        Geo {
            x: [2, 6, 5, 5],
            m: 6,
            k: [3, 3],
            group: 3,
            pads: [0, 0, 0, 0],
            strides: [2, 2],
        },
        Geo {
            x: [1, 64, 4, 4],
            m: 5,
            k: [3, 3],
            group: 1,
            pads: [1, 1, 1, 1],
            strides: [1, 1],
        },
    ];
    for (case, g) in geos.iter().enumerate() {
        let (xt, wt, yt) = if case % 2 == 0 {
            (DType::U8, DType::I8, DType::U8)
        } else {
            (DType::I8, DType::U8, DType::I8)
        };
        let xv: Vec<i64> = (0..g.x.iter().product())
            .map(|_| val(xt, &mut rng))
            .collect();
        let wv: Vec<i64> = (0..g.w().iter().product())
            .map(|_| val(wt, &mut rng))
            .collect();
        let wz: Vec<i64> = (0..g.m).map(|_| val(wt, &mut rng)).collect();
        let ws: Vec<f32> = (0..g.m).map(|_| rng.f32(0.001, 0.01)).collect();
        let bias: Vec<i64> = (0..g.m)
            .map(|_| pick(&mut rng, 20000) as i64 - 10000)
            .collect();
        let (xz, yz) = (val(xt, &mut rng), val(yt, &mut rng));
        let (xs, ys) = (rng.f32(0.001, 0.02), rng.f32(0.05, 0.5));
        let model = ModelBuilder::new("qc", 10)
            .input("x", xt, &dims(&g.x))
            .initializer("xs", &Tensor::f32(vec![], &[xs]))
            .initializer("xz", &Tensor::from_i64(xt, vec![], &[xz]))
            .initializer("w", &Tensor::from_i64(wt, g.w().to_vec(), &wv))
            .initializer("ws", &Tensor::f32(vec![g.m], &ws))
            .initializer("wz", &Tensor::from_i64(wt, vec![g.m], &wz))
            .initializer("ys", &Tensor::f32(vec![], &[ys]))
            .initializer("yz", &Tensor::from_i64(yt, vec![], &[yz]))
            .initializer("b", &Tensor::from_i64(DType::I32, vec![g.m], &bias))
            .output("y", yt, &dims(&g.y()))
            .node(
                "q",
                "QLinearConv",
                &["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                &["y"],
                g.attrs(),
            )
            .build();
        let inputs = [Tensor::from_i64(xt, g.x.to_vec(), &xv)];
        let exe = check(model, &inputs, 0.0, 0.0);
        let got = run(&exe, &inputs).remove(0);
        assert_eq!(got.dtype(), yt);
        let acc = g.conv(&xv, xz, &wv, &wz);
        let [_, m, oh, ow] = g.y();
        let want: Vec<i64> = acc
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let mo = (i / (oh * ow)) % m;
                requant(a + bias[mo], xs * ws[mo] / ys, yz, yt)
            })
            .collect();
        assert_eq!(got.to_i64_vec(), want, "case {case}");
    }
}

#[test]
fn qlinear_matmul_matches_integer_arithmetic() {
    let mut rng = Rng(0x9A7);
    // (a shape, b shape, per-row/column parameters); K = 700 with random bytes needs the split.
    for (case, (a_s, b_s, per_axis)) in [
        (vec![3, 5], vec![5, 4], false),
        (vec![2, 3, 6], vec![2, 6, 2], false),
        (vec![4, 700], vec![700, 3], true),
        (vec![2, 7], vec![7], false),
    ]
    .into_iter()
    .enumerate()
    {
        let (at, bt, yt) = if case % 2 == 0 {
            (DType::U8, DType::I8, DType::I8)
        } else {
            (DType::I8, DType::U8, DType::U8)
        };
        let (m, k) = (a_s[a_s.len() - 2], a_s[a_s.len() - 1]);
        let n = if b_s.len() == 1 {
            1
        } else {
            b_s[b_s.len() - 1]
        };
        let av: Vec<i64> = (0..a_s.iter().product())
            .map(|_| val(at, &mut rng))
            .collect();
        let bv: Vec<i64> = (0..b_s.iter().product())
            .map(|_| val(bt, &mut rng))
            .collect();
        let (ra, rb) = if per_axis { (m, n) } else { (1, 1) };
        let az: Vec<i64> = (0..ra).map(|_| val(at, &mut rng)).collect();
        let bz: Vec<i64> = (0..rb).map(|_| val(bt, &mut rng)).collect();
        let asc: Vec<f32> = (0..ra).map(|_| rng.f32(0.001, 0.01)).collect();
        let bsc: Vec<f32> = (0..rb).map(|_| rng.f32(0.001, 0.01)).collect();
        let (ys, yz) = (rng.f32(0.01, 0.1), val(yt, &mut rng));
        let p = |v: &[f32]| Tensor::f32(if v.len() == 1 { vec![] } else { vec![v.len()] }, v);
        let z = |dt: DType, v: &[i64]| {
            Tensor::from_i64(dt, if v.len() == 1 { vec![] } else { vec![v.len()] }, v)
        };
        let model = ModelBuilder::new("qm", 21)
            .input("a", at, &dims(&a_s))
            .input("b", bt, &dims(&b_s))
            .initializer("as", &p(&asc))
            .initializer("az", &z(at, &az))
            .initializer("bs", &p(&bsc))
            .initializer("bz", &z(bt, &bz))
            .initializer("ys", &Tensor::f32(vec![], &[ys]))
            .initializer("yz", &Tensor::from_i64(yt, vec![], &[yz]))
            .output("y", yt, &dims(&[1]))
            .node(
                "q",
                "QLinearMatMul",
                &["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                &["y"],
                vec![],
            )
            .build();
        let inputs = [
            Tensor::from_i64(at, a_s.clone(), &av),
            Tensor::from_i64(bt, b_s.clone(), &bv),
        ];
        let exe = check(model, &inputs, 0.0, 0.0);
        let got = run(&exe, &inputs).remove(0).to_i64_vec();
        let batches = av.len() / (m * k);
        let b_batched = b_s.len() > 2;
        let mut want = Vec::new();
        for bi in 0..batches {
            for i in 0..m {
                for j in 0..n {
                    let acc: i64 = (0..k)
                        .map(|q| {
                            let a = av[(bi * m + i) * k + q] - az[if per_axis { i } else { 0 }];
                            let bb = if b_batched { bi * k * n } else { 0 };
                            let b = bv[bb + q * n + j] - bz[if per_axis { j } else { 0 }];
                            a * b
                        })
                        .sum();
                    let sa = asc[if per_axis { i } else { 0 }];
                    let sb = bsc[if per_axis { j } else { 0 }];
                    want.push(requant(acc, sa * sb / ys, yz, yt));
                }
            }
        }
        assert_eq!(got, want, "case {case}");
    }
}
