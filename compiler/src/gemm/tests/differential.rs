//! Differential tests: every available kernel against a plain triple loop.

use super::super::*;

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

const SIZES: [usize; 14] = [1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 33, 64, 100, 257];

/// One product: checks every kernel (and the exported entry point) on the same inputs.
fn check(m: usize, n: usize, k: usize, transposed_b: bool, accumulate: bool, rng: &mut Rng) {
    let lda = k + 3;
    let ldc = n + 5;
    let a: Vec<f32> = (0..m * lda).map(|_| rng.next()).collect();
    // B as k x n, stored row-major (rs = n, cs = 1) or as its transpose (rs = 1, cs = k).
    let b: Vec<f32> = (0..k * n).map(|_| rng.next()).collect();
    let (rs, cs) = if transposed_b { (1, k) } else { (n, 1) };
    let bat = |i: usize, j: usize| b[i * rs + j * cs];
    let c0: Vec<f32> = (0..m * ldc).map(|_| rng.next()).collect();

    let mut packed = vec![f32::NAN; packed_b_len(k, n)];
    pack_b(k, n, &b, rs, cs, &mut packed);
    let mut packed_rt = vec![f32::NAN; packed_b_len(k, n)];
    // SAFETY: `b` holds every b[i * rs + j * cs]; `packed_rt` holds packed_b_len floats.
    unsafe { arenac_pack_b(k, n, b.as_ptr(), rs, cs, packed_rt.as_mut_ptr()) };
    assert_eq!(
        packed.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        packed_rt.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        "pack_b and arenac_pack_b disagree"
    );

    let mut runs: Vec<(&str, Vec<f32>)> = Vec::new();
    for kernel in available_kernels() {
        let mut c = c0.clone();
        let mut scratch = vec![f32::NAN; A_SCRATCH_FLOATS];
        // SAFETY: all buffers sized per the contract; the kernel is available on this CPU.
        unsafe {
            sgemm_with(
                kernel,
                m,
                n,
                k,
                a.as_ptr(),
                lda,
                packed.as_ptr(),
                c.as_mut_ptr(),
                ldc,
                accumulate,
                scratch.as_mut_ptr(),
            )
        };
        runs.push((kernel.name, c));
        if !accumulate {
            // B row-major at a stride wider than n, read in place (the 1x1 conv path).
            let ldb = n + 3;
            let mut brow = vec![f32::NAN; k * ldb];
            for i in 0..k {
                for j in 0..n {
                    brow[i * ldb + j] = bat(i, j);
                }
            }
            let mut c = c0.clone();
            let mut tail = vec![f32::NAN; k * NR];
            // SAFETY: all buffers sized per the contract; the kernel is available here.
            unsafe {
                sgemm_rowmajor_b(
                    kernel,
                    m,
                    n,
                    k,
                    AView::Rows(a.as_ptr(), lda),
                    brow.as_ptr(),
                    ldb,
                    c.as_mut_ptr(),
                    ldc,
                    tail.as_mut_ptr(),
                    scratch.as_mut_ptr(),
                )
            };
            runs.push(("row-major B", c));
        }
    }
    if !accumulate {
        // A packed once (the conv weights' form) for the selected kernel.
        let mut pa = vec![f32::NAN; packed_a_len(m, k)];
        pack_a_all(m, k, &a, lda, &mut pa);
        let mut c = c0.clone();
        // SAFETY: all buffers sized per the contract; `pa` is packed for the selected kernel.
        unsafe {
            sgemm_packed_b(
                selected_kernel(),
                m,
                n,
                k,
                AView::packed(pa.as_ptr(), m),
                packed.as_ptr(),
                c.as_mut_ptr(),
                ldc,
                std::ptr::null_mut(),
            )
        };
        runs.push(("packed A", c));
    }
    let mut c = c0.clone();
    let mut scratch = vec![f32::NAN; A_SCRATCH_FLOATS];
    // SAFETY: all buffers sized per the contract.
    unsafe {
        arenac_sgemm(
            m,
            n,
            k,
            a.as_ptr(),
            lda,
            packed_rt.as_ptr(),
            c.as_mut_ptr(),
            ldc,
            u32::from(accumulate),
            scratch.as_mut_ptr(),
            1,
        )
    };
    runs.push(("arenac_sgemm", c));

    for i in 0..m {
        for j in 0..ldc {
            let (want, mag) = if j < n {
                let mut s = if accumulate {
                    c0[i * ldc + j] as f64
                } else {
                    0.0
                };
                let mut mag = s.abs();
                for p in 0..k {
                    let t = a[i * lda + p] as f64 * bat(p, j) as f64;
                    s += t;
                    mag += t.abs();
                }
                (s, mag)
            } else {
                // Padding columns of C must be left alone.
                (c0[i * ldc + j] as f64, 0.0)
            };
            let tol = 1e-5 * (k.max(1) as f64) * mag.max(1e-30);
            for (name, c) in &runs {
                let got = c[i * ldc + j] as f64;
                assert!(
                    (got - want).abs() <= tol,
                    "{name}: m={m} n={n} k={k} transposed_b={transposed_b} \
                     accumulate={accumulate}: C[{i}][{j}] = {got}, want {want}"
                );
            }
        }
    }
}

#[test]
fn differential_small_and_edges() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for &m in &SIZES {
        for &n in &SIZES {
            for &k in &[1usize, 3, 16, 33] {
                check(
                    m,
                    n,
                    k,
                    (m + n + k) % 2 == 0,
                    (m * n + k) % 2 == 1,
                    &mut rng,
                );
            }
        }
    }
}

#[test]
fn differential_k_blocking() {
    let mut rng = Rng(0xDEAD_BEEF_1234_5678);
    // k across KC boundaries (256, 512, 576 -> balanced blocks) with edge m and n.
    for &k in &[
        2usize, 5, 7, 8, 15, 17, 31, 64, 100, 255, 256, 257, 513, 576,
    ] {
        for &(m, n) in &[(7usize, 17usize), (6, 16), (13, 33), (1, 1)] {
            for transposed_b in [false, true] {
                for accumulate in [false, true] {
                    check(m, n, k, transposed_b, accumulate, &mut rng);
                }
            }
        }
    }
}

#[test]
fn differential_m_blocking() {
    let mut rng = Rng(0x0123_4567_89AB_CDEF);
    // m across MC boundaries (96) and n across many panels.
    for &(m, n, k) in &[
        (100usize, 100usize, 100usize),
        (257, 31, 17),
        (97, 64, 257),
        (192, 33, 8),
        (64, 257, 15),
        (31, 100, 300),
    ] {
        for transposed_b in [false, true] {
            for accumulate in [false, true] {
                check(m, n, k, transposed_b, accumulate, &mut rng);
            }
        }
    }
}

#[test]
fn k_zero_and_empty() {
    let mut rng = Rng(7);
    for &(m, n) in &[(3usize, 5usize), (0, 4), (4, 0)] {
        for accumulate in [false, true] {
            check(m, n, 0, false, accumulate, &mut rng);
        }
    }
}

#[test]
fn packed_layout() {
    // Column panels of NR, k rows each, zero-padded past n.
    let (k, n) = (3, NR + 2);
    let b: Vec<f32> = (0..k * n).map(|x| x as f32 + 1.0).collect();
    let mut out = vec![f32::NAN; packed_b_len(k, n)];
    pack_b(k, n, &b, n, 1, &mut out);
    assert_eq!(out.len(), k * 2 * NR);
    for i in 0..k {
        for j in 0..2 * NR {
            let (jp, jj) = (j / NR, j % NR);
            let want = if j < n { b[i * n + j] } else { 0.0 };
            assert_eq!(out[jp * k * NR + i * NR + jj], want);
        }
    }
}

/// `arenac_sgemm` on a pool of `threads` threads (scratch for `threads` slots).
fn sgemm_on(threads: usize, m: usize, n: usize, k: usize, acc: bool, seed: u64) -> Vec<u32> {
    let mut rng = Rng(seed);
    let a: Vec<f32> = (0..m * k).map(|_| rng.next()).collect();
    let b: Vec<f32> = (0..k * n).map(|_| rng.next()).collect();
    let mut c: Vec<f32> = (0..m * n).map(|_| rng.next()).collect();
    let mut packed = vec![0.0; packed_b_len(k, n)];
    pack_b(k, n, &b, n, 1, &mut packed);
    let mut scratch = vec![f32::NAN; a_scratch_slot(m, k) * threads];
    let pool = crate::par::Pool::new(threads).expect("threads");
    crate::par::with_pool(Some(&pool), || {
        // SAFETY: buffers sized per the contract (threads slots of scratch).
        unsafe {
            arenac_sgemm(
                m,
                n,
                k,
                a.as_ptr(),
                k,
                packed.as_ptr(),
                c.as_mut_ptr(),
                n,
                u32::from(acc),
                scratch.as_mut_ptr(),
                threads,
            )
        }
    });
    c.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn same_bits_at_every_thread_count() {
    // Shapes that split by rows, by columns and both, with edge tiles and several K blocks.
    for &(m, n, k) in &[
        (200usize, 300usize, 256usize),
        (1, 3000, 512),
        (1000, 40, 300),
        (37, 1000, 800),
        (513, 77, 129),
    ] {
        for acc in [false, true] {
            let one = sgemm_on(1, m, n, k, acc, 42);
            for threads in [2, 3, 4] {
                assert!(
                    one == sgemm_on(threads, m, n, k, acc, 42),
                    "{m}x{n}x{k} acc={acc}: {threads} threads differ from 1"
                );
            }
        }
    }
}
