//! This CPU's measured f32 FMA peak: the denominator of "GEMM GFLOP/s as a fraction of peak".
//!
//! `cargo run --release -p arenac-compiler --example fma_peak [THREADS] [REPS]` (default 1
//! thread, best of 200). Each thread runs 12 independent accumulator chains of fused
//! multiply-adds (enough to cover the FMA latency times the FMA ports of current x86 cores)
//! for 2^16 iterations (a fraction of a millisecond), with AVX-512 (16 lanes) and with AVX2 (8
//! lanes) where the CPU has them; 2 FLOPs per lane per FMA. Each burst is timed by the CPU
//! time of its thread (`CLOCK_THREAD_CPUTIME_ID`), so preemption by other processes on a
//! shared machine does not count; the best burst per thread is kept and the threads' rates are
//! summed. Prints one line per instruction set: `avx512f <threads> <GFLOP/s>` /
//! `avx2 <threads> <GFLOP/s>`.

use std::hint::black_box;

const CHAINS: usize = 12;
const ITERS: u64 = 1 << 16;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{CHAINS, ITERS};
    use std::arch::x86_64::{
        __m256, __m512, _mm256_add_ps, _mm256_fmadd_ps, _mm256_set1_ps, _mm256_storeu_ps,
        _mm512_add_ps, _mm512_fmadd_ps, _mm512_reduce_add_ps, _mm512_set1_ps,
    };

    /// FLOPs done; the sum keeps the work observable.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn avx512(a: f32, b: f32) -> (u64, f32) {
        let (va, vb) = (_mm512_set1_ps(a), _mm512_set1_ps(b));
        let mut acc: [__m512; CHAINS] = [_mm512_set1_ps(0.0); CHAINS];
        for _ in 0..ITERS {
            for c in acc.iter_mut() {
                *c = _mm512_fmadd_ps(*c, va, vb);
            }
        }
        let mut s = acc[0];
        for c in &acc[1..] {
            s = _mm512_add_ps(s, *c);
        }
        (ITERS * CHAINS as u64 * 16 * 2, _mm512_reduce_add_ps(s))
    }

    /// FLOPs done; the sum keeps the work observable.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn avx2(a: f32, b: f32) -> (u64, f32) {
        let (va, vb) = (_mm256_set1_ps(a), _mm256_set1_ps(b));
        let mut acc: [__m256; CHAINS] = [_mm256_set1_ps(0.0); CHAINS];
        for _ in 0..ITERS {
            for c in acc.iter_mut() {
                *c = _mm256_fmadd_ps(*c, va, vb);
            }
        }
        let mut s = acc[0];
        for c in &acc[1..] {
            s = _mm256_add_ps(s, *c);
        }
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 floats; storeu needs no alignment.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), s) };
        (ITERS * CHAINS as u64 * 8 * 2, lanes.iter().sum())
    }
}

/// CPU time of the calling thread, nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; the clock id is a constant Linux knows.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0;
    }
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

/// GFLOP/s of the best of `reps` bursts of `kernel` on each of `threads` threads at once,
/// summed over the threads.
fn measure(threads: usize, reps: usize, kernel: fn(f32, f32) -> (u64, f32)) -> f64 {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(move || {
                    let mut best = 0.0f64;
                    for _ in 0..=reps {
                        let t = thread_cpu_ns();
                        let (flops, sum) = kernel(black_box(0.999_999), black_box(1e-7));
                        let ns = thread_cpu_ns().saturating_sub(t).max(1);
                        black_box(sum);
                        best = best.max(flops as f64 / ns as f64);
                    }
                    best
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1).max(1);
    let reps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected on this CPU.
            let k: fn(f32, f32) -> (u64, f32) = |a, b| unsafe { x86::avx512(a, b) };
            println!("avx512f {threads} {:.1}", measure(threads, reps, k));
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: AVX2 and FMA were detected on this CPU.
            let k: fn(f32, f32) -> (u64, f32) = |a, b| unsafe { x86::avx2(a, b) };
            println!("avx2 {threads} {:.1}", measure(threads, reps, k));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (threads, reps, CHAINS, ITERS);
        println!("no x86-64 FMA measurement on this architecture");
    }
}
