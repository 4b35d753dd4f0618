//! Single-thread GEMM benchmark of the dense core (`arenac_sgemm` on pre-packed B).
//!
//! Run with `cargo run --release -p arenac-compiler --example gemm_bench [REPS]`. Prints GFLOP/s
//! (best of REPS runs, default 7) for square 256, 512, 1024 and a conv-like 64 x 12544 x 576
//! (a 3x3x64 convolution on 112x112 as im2col), plus the time of run-time B packing, and the
//! GFLOP/s by the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`, best of REPS: what the core does
//! when it runs, without preemption by other processes on a shared machine). Other shapes:
//! `GEMM_SHAPES="m,n,k;m,n,k"`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use arenac_compiler::gemm::{
    A_SCRATCH_FLOATS, arenac_pack_b, arenac_sgemm, kernel_name, packed_b_len,
};

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; the clock id is a constant Linux knows.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Best wall time and best thread CPU time of `reps` calls (after one warm-up call).
fn best_of(reps: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    f();
    (0..reps)
        .map(|_| {
            let (t, c) = (Instant::now(), thread_cpu());
            f();
            (t.elapsed(), thread_cpu().saturating_sub(c))
        })
        .fold((Duration::MAX, Duration::MAX), |(w, c), (tw, tc)| {
            (w.min(tw), c.min(tc))
        })
}

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    println!("kernel: {}", kernel_name());
    println!(
        "{:>22} {:>10} {:>10} {:>12} {:>14}",
        "m x n x k", "GFLOP/s", "ms", "pack_b ms", "cpu GFLOP/s"
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
        let (pack, _) = best_of(reps, || {
            // SAFETY: `b` is k x n row-major; `packed` holds packed_b_len(k, n) floats.
            unsafe { arenac_pack_b(k, n, b.as_ptr(), n, 1, packed.as_mut_ptr()) };
        });
        let (t, cpu) = best_of(reps, || {
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
        let flops = 2.0 * (m * n * k) as f64;
        println!(
            "{:>22} {:>10.1} {:>10.3} {:>12.3} {:>14.1}",
            format!("{m} x {n} x {k}"),
            flops / t.as_secs_f64() / 1e9,
            t.as_secs_f64() * 1e3,
            pack.as_secs_f64() * 1e3,
            flops / cpu.as_secs_f64().max(1e-9) / 1e9
        );
    }
}
