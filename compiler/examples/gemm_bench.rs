//! Single-thread GEMM benchmark of the dense core (`arenac_sgemm` on pre-packed B).
//!
//! Run with `cargo run --release -p arenac-compiler --example gemm_bench [REPS]`. Prints GFLOP/s
//! (best of REPS runs, default 7) for square 256, 512, 1024 and a conv-like 64 x 12544 x 576
//! (a 3x3x64 convolution on 112x112 as im2col), plus the time of run-time B packing. Other
//! shapes: `GEMM_SHAPES="m,n,k;m,n,k"`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use arenac_compiler::gemm::{
    A_SCRATCH_FLOATS, arenac_pack_b, arenac_sgemm, kernel_name, packed_b_len,
};

fn best_of(reps: usize, mut f: impl FnMut()) -> Duration {
    f();
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    println!("kernel: {}", kernel_name());
    println!(
        "{:>22} {:>10} {:>10} {:>12}",
        "m x n x k", "GFLOP/s", "ms", "pack_b ms"
    );
    let mut shapes = vec![
        (256usize, 256usize, 256usize),
        (512, 512, 512),
        (1024, 1024, 1024),
        (64, 12544, 576),
    ];
    if let Ok(s) = std::env::var("GEMM_SHAPES") {
        shapes = s
            .split(';')
            .filter_map(|t| {
                let v: Vec<usize> = t.split(',').filter_map(|x| x.trim().parse().ok()).collect();
                (v.len() == 3).then(|| (v[0], v[1], v[2]))
            })
            .collect();
    }
    for (m, n, k) in shapes {
        let a: Vec<f32> = (0..m * k).map(|i| ((i % 17) as f32 - 8.0) * 0.01).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i % 13) as f32 - 6.0) * 0.01).collect();
        let mut packed = vec![0.0f32; packed_b_len(k, n)];
        let mut c = vec![0.0f32; m * n];
        let mut scratch = vec![0.0f32; A_SCRATCH_FLOATS];
        let pack = best_of(reps, || {
            // SAFETY: `b` is k x n row-major; `packed` holds packed_b_len(k, n) floats.
            unsafe { arenac_pack_b(k, n, b.as_ptr(), n, 1, packed.as_mut_ptr()) };
        });
        let t = best_of(reps, || {
            // SAFETY: every buffer is sized per the contract; none overlaps another.
            unsafe {
                arenac_sgemm(
                    m,
                    n,
                    k,
                    black_box(a.as_ptr()),
                    k,
                    packed.as_ptr(),
                    c.as_mut_ptr(),
                    n,
                    0,
                    scratch.as_mut_ptr(),
                    1,
                )
            };
            black_box(&c);
        });
        let gflops = 2.0 * (m * n * k) as f64 / t.as_secs_f64() / 1e9;
        println!(
            "{:>22} {:>10.1} {:>10.3} {:>12.3}",
            format!("{m} x {n} x {k}"),
            gflops,
            t.as_secs_f64() * 1e3,
            pack.as_secs_f64() * 1e3
        );
    }
}
