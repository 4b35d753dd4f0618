//! Benchmark of the offset planner: random interval sets of 1,000 and 10,000 buffers (fixed
//! seed), time per placement, and arena / lower bound against plain greedy-by-size.
//!
//! Run with `cargo run --release -p arenac-compiler --example plan_speed [N]`, or with
//! `--models FILE.onnx...` to place the layer-wise liveness intervals of real models, or with
//! `--intervals FILE...` to place interval sets written one buffer a line as `start end size`
//! (lines starting with `#` skipped), e.g. the intervals of a patched plan.

use std::time::Instant;

use arenac_compiler::plan::offsets::place;
use arenac_compiler::plan::verify::verify_placement;
use arenac_compiler::plan::{ALIGN, Interval, lower_bound, place_sequential};

/// xorshift64, so the sets are the same on every machine.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x % n.max(1)
    }
}

/// A network-like set: `n` buffers over about `n / 2` steps, most living 1–4 steps, one in
/// eight living long (skip connections), sizes from 64 B to 4 MiB with odd ones mixed in.
fn intervals(n: usize, seed: u64) -> Vec<Interval> {
    let mut rng = XorShift(seed);
    let steps = (n / 2).max(1) as u64;
    (0..n)
        .map(|_| {
            let start = rng.below(steps) as usize;
            let len = if rng.below(8) == 0 {
                1 + rng.below(steps / 4 + 1)
            } else {
                1 + rng.below(4)
            } as usize;
            let size = if rng.below(3) == 0 {
                1 + rng.below(200_000) as usize
            } else {
                64usize << rng.below(17)
            };
            Interval::new(start, start + len, size)
        })
        .collect()
}

/// Places each model's layer-wise intervals (file order) and prints arena / lower bound.
fn models(paths: &[String]) {
    use arenac_compiler::analysis::liveness::{LivenessOptions, liveness};
    use arenac_compiler::import::{ImportOptions, import_file};
    for path in paths {
        let g = match import_file(std::path::Path::new(path), &ImportOptions::default()) {
            Ok(m) => m.graph,
            Err(e) => {
                println!("{path}: import failed: {e}");
                continue;
            }
        };
        let iv = liveness(&g, g.order(), LivenessOptions::layer_wise()).intervals();
        let start = Instant::now();
        let p = place(&iv, ALIGN);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let (lb, _) = lower_bound(&iv, ALIGN);
        let ok = verify_placement(&iv, &p, ALIGN).is_ok();
        println!(
            "{path}: {} buffers, {ms:.3} ms, arena {} B, LB {} B, arena/LB {:.4}, strategy {}, verified {ok}",
            iv.len(),
            p.arena_bytes,
            lb,
            p.arena_bytes as f64 / lb.max(1) as f64,
            p.strategy.name(),
        );
    }
}

/// Reads `start end size` lines (`#` lines skipped).
fn read_intervals(path: &str) -> Result<Vec<Interval>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut out = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let v: Vec<usize> = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{path}:{}: {e}", k + 1))?;
        match v[..] {
            [start, end, size] if start < end => out.push(Interval::new(start, end, size)),
            _ => return Err(format!("{path}:{}: want `start end size`", k + 1)),
        }
    }
    Ok(out)
}

/// Places each file's intervals and prints arena / lower bound and the time taken.
fn interval_files(paths: &[String]) {
    for path in paths {
        let iv = match read_intervals(path) {
            Ok(iv) => iv,
            Err(e) => {
                println!("{e}");
                continue;
            }
        };
        let start = Instant::now();
        let p = place(&iv, ALIGN);
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let (lb, _) = lower_bound(&iv, ALIGN);
        let ok = verify_placement(&iv, &p, ALIGN).is_ok();
        println!(
            "{path}: {} buffers, {ms:.3} ms, arena {} B, LB {} B, LB/arena {:.4}, strategy {}, verified {ok}",
            iv.len(),
            p.arena_bytes,
            lb,
            lb as f64 / p.arena_bytes.max(1) as f64,
            p.strategy.name(),
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--models") => return models(&args[1..]),
        Some("--intervals") => return interval_files(&args[1..]),
        _ => {}
    }
    // An optional argument picks one size, e.g. `plan_speed 1000`.
    let sizes: Vec<usize> = match std::env::args().nth(1).and_then(|a| a.parse().ok()) {
        Some(n) => vec![n],
        None => vec![1_000, 10_000],
    };
    for &n in &sizes {
        for seed in [0x5EED_0001u64, 0x5EED_0002] {
            let iv = intervals(n, seed);
            let reps = if n <= 1_000 { 50 } else { 3 };
            let start = Instant::now();
            let mut p = place(&iv, ALIGN);
            for _ in 1..reps {
                p = place(&iv, ALIGN);
            }
            let per = start.elapsed().as_secs_f64() * 1e3 / reps as f64;
            if let Err(e) = verify_placement(&iv, &p, ALIGN) {
                eprintln!("invalid plan: {e}");
                std::process::exit(1);
            }
            let (lb, _) = lower_bound(&iv, ALIGN);
            let naive = place_sequential(&iv, ALIGN).arena_bytes;
            println!(
                "n={n:>6} seed={seed:#x}: {per:8.3} ms/placement, arena {} B, LB {} B, arena/LB {:.4}, naive/arena {:.2}, strategy {}",
                p.arena_bytes,
                lb,
                p.arena_bytes as f64 / lb as f64,
                naive as f64 / p.arena_bytes as f64,
                p.strategy.name(),
            );
        }
    }
}
