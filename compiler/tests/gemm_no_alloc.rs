//! `arenac_sgemm` and `arenac_pack_b` never allocate: a counting global allocator (only possible
//! in a test binary of its own) sees no allocation across calls. The count is per thread, so
//! the tests of this binary, which the harness runs in parallel, don't see each other's
//! allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use arenac_compiler::gemm::{A_SCRATCH_FLOATS, arenac_pack_b, arenac_sgemm, packed_b_len};

struct Counting;

thread_local! {
    /// Allocations made by this thread (const-initialized: reading it never allocates).
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: during thread teardown the slot may be gone; those allocations don't matter.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn sgemm_and_pack_b_do_not_allocate() {
    // Edge shapes (m % MR, n % NR, several K and M blocks) and both accumulate modes.
    let (m, n, k) = (203, 45, 601);
    let a = vec![0.5f32; m * k];
    let b = vec![0.25f32; k * n];
    let mut packed = vec![0.0f32; packed_b_len(k, n)];
    let mut c = vec![1.0f32; m * n];
    let mut scratch = vec![0.0f32; A_SCRATCH_FLOATS];

    // The first call also picks the kernel (a `OnceLock`, no allocation) and is counted too,
    // unless ARENAC_GEMM_KERNEL is set: reading that variable allocates once.
    if std::env::var_os("ARENAC_GEMM_KERNEL").is_some() {
        // SAFETY: every buffer is sized per the contract, and none overlaps another.
        unsafe {
            arenac_sgemm(
                1,
                1,
                1,
                a.as_ptr(),
                k,
                packed.as_ptr(),
                c.as_mut_ptr(),
                n,
                0,
                scratch.as_mut_ptr(),
                1,
            )
        };
    }
    let before = allocations();
    for accumulate in [0, 1] {
        // SAFETY: `b` holds k x n floats at (rs, cs) = (n, 1); `packed` holds packed_b_len.
        unsafe { arenac_pack_b(k, n, b.as_ptr(), n, 1, packed.as_mut_ptr()) };
        // SAFETY: every buffer is sized per the contract, and none overlaps another.
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
                accumulate,
                scratch.as_mut_ptr(),
                1,
            )
        };
    }
    let after = allocations();
    assert_eq!(
        after - before,
        0,
        "allocations inside arenac_sgemm/arenac_pack_b"
    );
    // The product really ran: C = 2 * k * 0.5 * 0.25 after a plain then an accumulating call.
    let want = 2.0 * (k as f32 * 0.125);
    assert!(
        c.iter().all(|&x| (x - want).abs() < 1e-3 * want),
        "{}",
        c[0]
    );
}

#[test]
fn conv2d_paths_do_not_allocate() {
    use arenac_compiler::gemm::conv::{
        Activation, ConvParams, arenac_conv2d, conv2d_scratch_bytes, prepare_weights, prepared_len,
    };
    // im2col (3x3, stride 2, padding), pointwise (1x1) and depthwise (multiplier 2), with a
    // fused activation; weights prepared before counting (that is compile-time work).
    let base = ConvParams {
        n: 1,
        c: 8,
        h: 19,
        w: 23,
        m: 16,
        group: 1,
        kh: 3,
        kw: 3,
        stride_h: 2,
        stride_w: 2,
        pad_t: 1,
        pad_l: 1,
        dil_h: 1,
        dil_w: 1,
        oh: 10,
        ow: 12,
        has_bias: 1,
        ..ConvParams::default()
    };
    let [act, act_a, act_b] = Activation::Clip(0.0, 6.0).encode();
    let mut cases = [
        base,
        ConvParams {
            kh: 1,
            kw: 1,
            stride_h: 1,
            stride_w: 1,
            pad_t: 0,
            pad_l: 0,
            oh: 19,
            ow: 23,
            ..base
        },
        ConvParams { group: 8, ..base },
    ];
    let mut prepared = Vec::new();
    for p in &mut cases {
        p.act = act;
        p.act_a = act_a;
        p.act_b = act_b;
        let k = p.k();
        let w = vec![0.5f32; p.m as usize * k];
        let mut out = vec![0.0f32; prepared_len(p)];
        prepare_weights(p, &w, &mut out);
        prepared.push(out);
    }
    let x = vec![1.0f32; 8 * 19 * 23];
    let bias = [0.25f32; 16];
    let mut y = vec![0.0f32; 16 * 19 * 23];
    let mut scratch: Vec<Vec<f32>> = cases
        .iter()
        .map(|p| vec![0.0f32; conv2d_scratch_bytes(p).div_ceil(4)])
        .collect();
    let before = allocations();
    for ((p, w), s) in cases.iter().zip(&prepared).zip(&mut scratch) {
        // SAFETY: x, w (prepared for p), bias, y and the scratch are sized for p and disjoint.
        unsafe {
            arenac_conv2d(
                p,
                x.as_ptr(),
                w.as_ptr(),
                bias.as_ptr(),
                y.as_mut_ptr(),
                s.as_mut_ptr(),
            )
        };
    }
    let after = allocations();
    assert_eq!(after - before, 0, "allocations inside arenac_conv2d");
    // The depthwise case ran last: an interior pixel is 9 taps of 0.5 plus the bias, clipped.
    assert_eq!(y[12 + 1], 4.75);
}

#[test]
fn pool2d_does_not_allocate() {
    use arenac_compiler::gemm::pool::{
        POOL_AVG, POOL_AVG_INCLUDE_PAD, POOL_MAX, PoolParams, arenac_pool2d,
    };
    // Max (finite and NaN planes: the exact path), both averages, strides 1 and 2, padding.
    let base = PoolParams {
        planes: 3,
        h: 21,
        w: 37,
        oh: 11,
        ow: 19,
        kh: 3,
        kw: 3,
        sh: 2,
        sw: 2,
        pt: 1,
        pl: 1,
        dh: 1,
        dw: 1,
        pb: 1,
        pr: 1,
        kind: POOL_MAX,
    };
    let cases = [
        base,
        PoolParams {
            sw: 1,
            ow: 37,
            kind: POOL_AVG,
            ..base
        },
        PoolParams {
            kind: POOL_AVG_INCLUDE_PAD,
            ..base
        },
    ];
    let mut x = vec![1.0f32; 3 * 21 * 37];
    x[5] = f32::NAN;
    let mut y = vec![0.0f32; 3 * 21 * 37];
    let before = allocations();
    for p in &cases {
        // SAFETY: x holds planes*h*w floats, y at least planes*oh*ow; disjoint.
        unsafe { arenac_pool2d(p, x.as_ptr(), y.as_mut_ptr()) };
    }
    let after = allocations();
    assert_eq!(after - before, 0, "allocations inside arenac_pool2d");
    // The include-pad average ran last: the top-left window holds 4 input taps of its 9, the
    // third one (columns 3..=5 of row 0) the NaN.
    assert!((y[0] - 4.0 / 9.0).abs() < 1e-6, "{}", y[0]);
    assert!(y[2].is_nan() && !y[1].is_nan());
}

#[test]
fn dft_and_mel_kernels_do_not_allocate() {
    use arenac_compiler::fft::mel::{MelKernel, MelShape, arenac_mel};
    use arenac_compiler::fft::{DftGeometry, DftKernel, arenac_dft};
    use arenac_compiler::ir::types::DType;
    // Complex, real-input and one-sided inverse transforms at a power of two, a smooth length
    // and primes (Rader, Bluestein), one windowed STFT; plans made before counting (compile
    // time), every run counted.
    let mut kernels = Vec::new();
    for n in [64usize, 60, 97, 1021] {
        for (in_c, out_c, inverse, out_len) in [
            (2, 2, false, n),
            (1, 2, false, n / 2 + 1),
            (1, 2, false, n),
            (2, 1, true, n),
            (2, 2, true, n),
        ] {
            let len_in = if out_c == 1 { n / 2 + 1 } else { n };
            kernels.push(DftKernel::new(DftGeometry {
                outer: 2,
                frames: 1,
                step: 0,
                len_in,
                inner: 3,
                in_c,
                n,
                out_len,
                out_c,
                inverse,
                windowed: false,
            }));
        }
    }
    kernels.push(DftKernel::new(DftGeometry {
        outer: 1,
        frames: 98,
        step: 160,
        len_in: 16000,
        inner: 1,
        in_c: 1,
        n: 400,
        out_len: 201,
        out_c: 2,
        inverse: false,
        windowed: true,
    }));
    let kernels: Vec<DftKernel> = kernels.into_iter().map(|k| k.expect("plans")).collect();
    let x = vec![0.5f32; 16000 * 2 * 3];
    let w = vec![1.0f32; 400];
    let mut y = vec![0.0f32; 1 << 16];
    let mut scratch: Vec<Vec<u64>> = kernels
        .iter()
        .map(|k| vec![0u64; k.scratch_bytes().div_ceil(8)])
        .collect();
    let mel = MelKernel {
        shape: MelShape {
            bands: 40,
            dft_length: 512,
        },
        rate: DType::I64,
        edges: DType::F32,
        out: DType::F32,
    };
    let (sr, lo, hi) = (16000i64, 20.0f32, 8000.0f32);
    let mut mel_out = vec![0.0f32; 257 * 40];
    let before = allocations();
    for (k, s) in kernels.iter().zip(&mut scratch) {
        let g = k.geometry();
        assert!(g.input_floats().unwrap() <= x.len() && g.output_floats().unwrap() <= y.len());
        let win = if g.windowed {
            w.as_ptr()
        } else {
            std::ptr::null()
        };
        // SAFETY: x, w, y and the scratch are at least as large as the geometry and the kernel
        // ask (checked above), 8-aligned (the scratch), and disjoint.
        unsafe { arenac_dft(k, x.as_ptr(), win, y.as_mut_ptr(), s.as_mut_ptr().cast()) };
    }
    // SAFETY: scalars of the kernel's types; the output holds 257 x 40 f32.
    unsafe {
        arenac_mel(
            &mel,
            (&raw const sr).cast(),
            (&raw const lo).cast(),
            (&raw const hi).cast(),
            mel_out.as_mut_ptr().cast(),
        )
    };
    let after = allocations();
    assert_eq!(
        after - before,
        0,
        "allocations inside arenac_dft/arenac_mel"
    );
    // The STFT ran last: bin 0 of its first frame is the sum of 400 samples of 0.5.
    assert_eq!(y[0], 200.0);
    assert_eq!(mel_out.iter().filter(|&&v| v == 1.0).count(), 40);
}
