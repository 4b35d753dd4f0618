//! Dispatch overhead of arenac's fork-join pool against rayon's, on the job shape a parallel
//! kernel makes: `T` equal tasks (one per thread) of a fixed amount of arithmetic.
//!
//! `cargo run --release -p arenac-compiler --example pool_bench [TASK_US] [THREADS] [JOBS]`
//! (default 25 µs per task, 2 threads, 2000 jobs). Each job's wall time is measured; the table
//! gives the median and the 90th percentile, and the overhead: median minus one task's time
//! alone (what a perfect split of a `TASK_US * THREADS` kernel would take). Two regimes:
//! back-to-back jobs (workers hot, as inside a model run) and jobs spaced by 1 ms (workers
//! asleep: arenac's park after 100 µs, rayon's after its rounds of yielding).

use std::hint::black_box;
use std::time::{Duration, Instant};

use arenac_compiler::par::{Pool, for_each, with_pool};

/// A fixed amount of dependent float work (about `iters` multiply-adds).
fn work(iters: u64) -> f32 {
    let mut x = 1.0f32;
    for i in 0..iters {
        x = black_box(x * 0.999_999 + (i & 7) as f32 * 1e-9);
    }
    x
}

/// Iterations of [`work`] taking about `us` microseconds here.
fn calibrate(us: f64) -> u64 {
    let n = 1_000_000u64;
    let t = (0..5)
        .map(|_| {
            let s = Instant::now();
            black_box(work(n));
            s.elapsed()
        })
        .min()
        .unwrap_or(Duration::from_millis(1));
    (n as f64 * us / (t.as_secs_f64() * 1e6)) as u64
}

fn stats(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(v[v.len() / 2]), us(v[v.len() * 9 / 10]))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let task_us: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(25.0);
    let threads: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2);
    let jobs: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let iters = calibrate(task_us);
    let alone = stats(
        (0..200)
            .map(|_| {
                let s = Instant::now();
                black_box(work(iters));
                s.elapsed()
            })
            .collect(),
    )
    .0;
    println!(
        "one task alone: {alone:.1} µs; jobs of {threads} tasks on {threads} threads, {jobs} jobs"
    );
    println!("| pool | regime | median µs | p90 µs | overhead µs (median - one task) |");
    println!("|---|---|---:|---:|---:|");
    let pool = Pool::new(threads).expect("threads");
    let rayon = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool");
    for (regime, gap) in [("back to back", None), ("1 ms apart", Some(1000u64))] {
        let pause = || {
            if let Some(us) = gap {
                let s = Instant::now();
                while s.elapsed() < Duration::from_micros(us) {
                    std::hint::spin_loop();
                }
            }
        };
        let ours: Vec<Duration> = with_pool(Some(&pool), || {
            (0..jobs)
                .map(|_| {
                    pause();
                    let s = Instant::now();
                    for_each(threads, threads, |_, _| {
                        black_box(work(iters));
                    });
                    s.elapsed()
                })
                .collect()
        });
        let theirs: Vec<Duration> = (0..jobs)
            .map(|_| {
                pause();
                let s = Instant::now();
                rayon.install(|| {
                    rayon::scope(|sc| {
                        for _ in 1..threads {
                            sc.spawn(|_| {
                                black_box(work(iters));
                            });
                        }
                        black_box(work(iters));
                    })
                });
                s.elapsed()
            })
            .collect();
        for (name, v) in [("arenac", ours), ("rayon scope", theirs)] {
            let (med, p90) = stats(v);
            println!(
                "| {name} | {regime} | {med:.1} | {p90:.1} | {:.1} |",
                med - alone
            );
        }
    }
}
