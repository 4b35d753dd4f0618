//! Reduced-type weights: every widener against the portable one, and the products of every
//! kernel on widened B (and the selected kernel on widened A) against the f32 product of the
//! same (rounded) weights, bit for bit, on sizes that are not multiples of the tiles.

use super::super::*;
use super::*;

/// Small deterministic generator (xorshift), values in [-1, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

const REDUCED: [WeightType; 3] = [WeightType::F16, WeightType::Bf16, WeightType::I8];

#[test]
fn every_widener_matches_the_portable_one() {
    let mut rng = Rng(7);
    for t in WeightType::ALL {
        for n in [0usize, 1, 7, 8, 15, 16, 17, 33, 100] {
            let src: Vec<u8> = (0..n * t.bytes())
                .map(|_| (rng.next() * 255.0) as u8)
                .collect();
            let scales: Vec<f32> = (0..NR).map(|_| rng.next()).collect();
            for sc in [None, Some(scales.as_ptr())] {
                let mut want = vec![0.0f32; n];
                // SAFETY: sizes as the contract asks; the portable widener runs anywhere.
                unsafe { Widener::Portable.widen(t, src.as_ptr(), n, want.as_mut_ptr(), sc) };
                for wd in Widener::available() {
                    let mut got = vec![f32::NAN; n];
                    // SAFETY: as above; `wd` is available on this CPU.
                    unsafe { wd.widen(t, src.as_ptr(), n, got.as_mut_ptr(), sc) };
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "{wd:?} {t:?} n={n} scaled={}",
                        sc.is_some()
                    );
                }
            }
        }
    }
}

#[test]
fn rounding_is_to_nearest_and_int8_is_symmetric_per_channel() {
    let mut out = [0u8; 4];
    store(WeightType::F16, &mut out, 0, 1.0 + 1.0 / 4096.0, 0.0);
    assert_eq!(u16::from_le_bytes([out[0], out[1]]), 0x3c00, "ties to even");
    store(WeightType::F16, &mut out, 0, 1e9, 0.0);
    assert_eq!(
        u16::from_le_bytes([out[0], out[1]]),
        0x7bff,
        "saturates at 65504"
    );
    store(WeightType::Bf16, &mut out, 0, 1.0 + 3.0 / 256.0, 0.0);
    assert_eq!(u16::from_le_bytes([out[0], out[1]]), 0x3f82);
    // Columns of max |x| 2 and 0.5: q = round(x / (max / 127)).
    let b = [2.0f32, -0.25, -1.0, 0.5];
    let mut packed = vec![0u8; lowp_b_bytes(WeightType::I8, 2, 2)];
    pack_b_lowp(
        WeightType::I8,
        2,
        2,
        |i| b[i],
        2,
        1,
        &mut packed,
        &mut |_| {},
    );
    let q = |i: usize| packed[i] as i8;
    assert_eq!([q(0), q(1), q(NR), q(NR + 1)], [127, -64, -64, 127]);
    let at = packed_b_len(2, 2).next_multiple_of(64);
    let s0 = f32::from_le_bytes(packed[at..at + 4].try_into().expect("4 bytes"));
    assert_eq!(s0, 2.0 / 127.0);
}

/// The f32 values a reduced packed B stands for, in [`pack_b`]'s layout.
fn dequantized_b(t: WeightType, k: usize, n: usize, packed: &[u8]) -> Vec<f32> {
    let len = packed_b_len(k, n);
    let mut out = vec![0.0f32; len];
    let scales = (t == WeightType::I8).then(|| {
        let at = (len * t.bytes()).next_multiple_of(64);
        // SAFETY: the scales follow the elements (the layout's contract).
        unsafe { packed.as_ptr().add(at).cast::<f32>() }
    });
    for (i, x) in out.iter_mut().enumerate() {
        // SAFETY: i < len elements of `packed`; scales hold a multiple of NR floats.
        *x = unsafe { load1(t, packed.as_ptr(), i) };
        if let Some(s) = scales {
            let col = (i / (k * NR)) * NR + i % NR;
            // SAFETY: col < n rounded up to NR.
            *x *= unsafe { s.add(col).read_unaligned() };
        }
    }
    out
}

#[test]
fn reduced_b_products_match_f32_of_the_same_values_on_every_kernel() {
    let mut rng = Rng(99);
    for &(m, n, k) in &[
        (1, 1, 1),
        (1, 17, 33),
        (2, 40, 7),
        (5, 31, 385),
        (13, 47, 100),
        (37, 70, 777),
        (100, 33, 17),
    ] {
        for t in REDUCED {
            for transposed in [false, true] {
                let (rs, cs) = if transposed { (1, k) } else { (n, 1) };
                let b: Vec<f32> = (0..k * n).map(|_| rng.next() * 3.0).collect();
                let mut packed = vec![0u8; lowp_b_bytes(t, k, n)];
                let mut last = 0;
                pack_b_lowp(t, k, n, |i| b[i], rs, cs, &mut packed, &mut |e| {
                    // Monotone within a pass (int8 row by row reads the source twice).
                    assert!(e <= k * n, "progress {e} past the end");
                    last = e;
                });
                assert_eq!(last, k * n, "every source element reported read");
                let want_b = dequantized_b(t, k, n, &packed);
                // Against the original weights: the rounding is what the type allows.
                let tol = match t {
                    WeightType::I8 => 3.0 / 127.0 * 0.51,
                    WeightType::Bf16 => 3.0 / 256.0,
                    _ => 3.0 / 2048.0,
                };
                let mut f32_packed = vec![0.0f32; packed_b_len(k, n)];
                pack_b(k, n, &b, rs, cs, &mut f32_packed);
                for (x, y) in want_b.iter().zip(&f32_packed) {
                    assert!((x - y).abs() <= tol, "{t:?}: {x} for {y}");
                }
                let lda = k + 1;
                let a: Vec<f32> = (0..m * lda).map(|_| rng.next()).collect();
                let ldc = n + 3;
                let c0: Vec<f32> = (0..m * ldc).map(|_| rng.next()).collect();
                for kernel in available_kernels() {
                    for acc in [false, true] {
                        let mut scratch = vec![0.0f32; A_SCRATCH_FLOATS];
                        let (mut want, mut got) = (c0.clone(), c0.clone());
                        // SAFETY: buffers sized per the contract; the kernel runs here.
                        unsafe {
                            sgemm_core(
                                kernel,
                                m,
                                n,
                                k,
                                AView::Rows(a.as_ptr(), lda),
                                BView::packed(want_b.as_ptr(), k, n),
                                want.as_mut_ptr(),
                                ldc,
                                acc,
                                scratch.as_mut_ptr(),
                            );
                            sgemm_core(
                                kernel,
                                m,
                                n,
                                k,
                                AView::Rows(a.as_ptr(), lda),
                                BView::packed_lowp(packed.as_ptr(), t, k, n),
                                got.as_mut_ptr(),
                                ldc,
                                acc,
                                scratch.as_mut_ptr(),
                            );
                        }
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(
                            bits(&got),
                            bits(&want),
                            "{} {t:?} {m}x{n}x{k} transposed={transposed} acc={acc}",
                            kernel.name
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn reduced_b_entry_point_splits_like_one_thread() {
    let (m, n, k) = (50, 70, 300);
    let mut rng = Rng(3);
    let b: Vec<f32> = (0..k * n).map(|_| rng.next()).collect();
    let a: Vec<f32> = (0..m * k).map(|_| rng.next()).collect();
    for t in REDUCED {
        let mut packed = vec![0u8; lowp_b_bytes(t, k, n)];
        pack_b_lowp(t, k, n, |i| b[i], n, 1, &mut packed, &mut |_| {});
        let one = |threads: usize| {
            let pool = crate::par::Pool::new(threads).expect("pool");
            let mut c = vec![0.0f32; m * n];
            let mut scratch = vec![0.0f32; a_scratch_slot(m, k) * threads];
            crate::par::with_pool(Some(&pool), || {
                // SAFETY: buffers sized per the contract (threads scratch slots).
                unsafe {
                    arenac_sgemm_lowp(
                        m,
                        n,
                        k,
                        a.as_ptr(),
                        k,
                        packed.as_ptr(),
                        c.as_mut_ptr(),
                        n,
                        0,
                        scratch.as_mut_ptr(),
                        threads,
                        t.code(),
                    )
                }
            });
            c
        };
        assert_eq!(one(1), one(3), "{t:?}");
        // Against the f64 product of the original weights, within the type's rounding.
        let c = one(1);
        let rel = match t {
            WeightType::I8 => 2e-2,
            WeightType::Bf16 => 1e-2,
            _ => 1.5e-3,
        };
        let mut worst = 0.0f64;
        let mut norm = 0.0f64;
        for i in 0..m {
            for j in 0..n {
                let r: f64 = (0..k)
                    .map(|p| f64::from(a[i * k + p]) * f64::from(b[p * n + j]))
                    .sum();
                worst = worst.max((f64::from(c[i * n + j]) - r).abs());
                norm = norm.max(r.abs());
            }
        }
        assert!(worst <= rel * norm, "{t:?}: max error {worst} of {norm}");
    }
}

#[test]
fn reduced_a_blocks_match_f32_packed_a() {
    let mut rng = Rng(11);
    let kernel = selected_kernel();
    for &(m, n, k) in &[(1, 5, 3), (13, 40, 27), (100, 33, 500), (97, 17, 800)] {
        for t in REDUCED {
            let a: Vec<f32> = (0..m * k).map(|_| rng.next() * 2.0).collect();
            let mut packed = vec![0u8; lowp_a_bytes(t, m, k)];
            pack_a_lowp(t, m, k, |i| a[i], &mut packed, &mut |_| {});
            let view = LowpA::new(packed.as_ptr(), t, m, k);
            // The values it stands for, row-major, then packed as f32.
            let mut deq = vec![0.0f32; m * k];
            let kc_max = k.div_ceil(k.div_ceil(KC));
            let mr = kernel.mr;
            let mut pc = 0;
            while pc < k {
                let kc = kc_max.min(k - pc);
                for r in 0..m {
                    for p in 0..kc {
                        let e = pc * view.m_pad + (r / mr) * kc * mr + p * mr + r % mr;
                        // SAFETY: e is inside the packed elements; scales cover m_pad rows.
                        let mut x = unsafe { load1(t, packed.as_ptr(), e) };
                        if !view.scales.is_null() {
                            // SAFETY: the scales cover m_pad >= m rows.
                            x *= unsafe { view.scales.add(r).read_unaligned() };
                        }
                        deq[r * k + pc + p] = x;
                    }
                }
                pc += kc;
            }
            for (x, y) in deq.iter().zip(&a) {
                assert!((x - y).abs() <= 2.0 * 2.0 / 127.0, "{t:?}");
            }
            let mut f32_packed = vec![0.0f32; packed_a_len(m, k)];
            pack_a_all(m, k, &deq, k, &mut f32_packed);
            let b: Vec<f32> = (0..k * n).map(|_| rng.next()).collect();
            let mut pb = vec![0.0f32; packed_b_len(k, n)];
            pack_b(k, n, &b, n, 1, &mut pb);
            let (mut want, mut got) = (vec![0.0f32; m * n], vec![0.0f32; m * n]);
            let mut scratch = vec![0.0f32; A_SCRATCH_FLOATS];
            // Rows from 0 and a view from the second micro-panel on (as the split uses).
            for r0 in [0, mr] {
                if r0 >= m {
                    continue;
                }
                // SAFETY: buffers sized per the contract; A packed for this kernel.
                unsafe {
                    sgemm_core(
                        kernel,
                        m - r0,
                        n,
                        k,
                        AView::packed(f32_packed.as_ptr(), m).at_row(r0),
                        BView::packed(pb.as_ptr(), k, n),
                        want.as_mut_ptr(),
                        n,
                        false,
                        scratch.as_mut_ptr(),
                    );
                    sgemm_core(
                        kernel,
                        m - r0,
                        n,
                        k,
                        AView::Lowp(view).at_row(r0),
                        BView::packed(pb.as_ptr(), k, n),
                        got.as_mut_ptr(),
                        n,
                        false,
                        scratch.as_mut_ptr(),
                    );
                }
                assert_eq!(got, want, "{t:?} {m}x{n}x{k} from row {r0}");
            }
        }
    }
}
