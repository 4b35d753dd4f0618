//! The arenac side of `scripts/bench.py`: compiles one model, then times runs on request.
//!
//! `cargo run --release -p arenac --example bench_server -- [--threads N] MODEL [INPUT.npy ...]`
//!
//! Inputs are `.npy` files in the order of the model's inputs; without them every input is
//! seeded random data (floats in [-1, 1), integers 0). Prints one JSON line when ready:
//! `{"compile_ms", "arena_bytes", "weights_bytes", "threads", "inputs": [[name, shape]...]}`
//! (`threads`: the threads the runs use, see [`apply_threads`]), then reads lines from stdin:
//! a number `N` runs the model N times and prints `{"times_ms": [...], "thread_cpu_ms": [...],
//! "cpu_ms": x}` (wall time per run; CPU time of the calling thread per run, which leaves out
//! the time the thread was preempted; CPU time of all the process's threads over the N runs); `rss` prints `{"peak_rss_bytes":
//! ...}` (VmHWM of this process); end of input exits. Errors are printed as
//! `{"error": "..."}` with exit code 1.

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Instant;

use arenac::io::TensorBuf;
use arenac::io::npy::read_npy;
use arenac::{CompileOptions, DType, TensorRef, compile_file};

fn main() {
    if let Err(e) = serve() {
        println!("{{\"error\": {}}}", json_string(&e));
        std::process::exit(1);
    }
}

fn serve() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut threads = 1usize;
    if args.first().map(String::as_str) == Some("--threads") {
        threads = args
            .get(1)
            .and_then(|n| n.parse().ok())
            .filter(|&n| n >= 1)
            .ok_or("--threads needs a count >= 1")?;
        args.drain(..2);
    }
    let [model, inputs @ ..] = args.as_slice() else {
        return Err("usage: bench_server [--threads N] MODEL [INPUT.npy ...]".into());
    };
    let mut opts = CompileOptions::default();
    let threads = apply_threads(&mut opts, threads);
    let start = Instant::now();
    let compiled = compile_file(Path::new(model), &opts).map_err(|e| e.to_string())?;
    let compile_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut session = compiled.session().map_err(|e| e.to_string())?;
    let slots = session.inputs().to_vec();
    let data: Vec<TensorBuf> = if inputs.is_empty() {
        slots
            .iter()
            .enumerate()
            .map(|(k, s)| random(s.ty.dtype, &s.ty.shape, k as u64))
            .collect::<Result<_, _>>()?
    } else {
        inputs
            .iter()
            .map(|p| read_npy(Path::new(p)).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?
    };
    let views: Vec<TensorRef<'_>> = data.iter().map(TensorBuf::view).collect();
    let described: Vec<String> = slots
        .iter()
        .map(|s| format!("[{}, {:?}]", json_string(&s.name), s.ty.shape))
        .collect();
    let summary = compiled.summary();
    println!(
        "{{\"compile_ms\": {compile_ms:.3}, \"arena_bytes\": {}, \"weights_bytes\": {}, \"threads\": {threads}, \"inputs\": [{}]}}",
        summary.arena_bytes,
        summary.weights_bytes,
        described.join(", ")
    );
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let mut times = Vec::new();
    let mut thread_times = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        let line = line.trim();
        if line == "rss" {
            println!("{{\"peak_rss_bytes\": {}}}", peak_rss().unwrap_or(0));
        } else {
            let n: usize = line.parse().map_err(|_| format!("bad request '{line}'"))?;
            times.clear();
            thread_times.clear();
            let cpu0 = cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID);
            for _ in 0..n {
                let c = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID);
                let t = Instant::now();
                session.run_positional(&views).map_err(|e| e.to_string())?;
                times.push(t.elapsed().as_secs_f64() * 1e3);
                let c = cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(c);
                thread_times.push(c as f64 / 1e6);
            }
            let cpu_ms = cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID).saturating_sub(cpu0) as f64 / 1e6;
            let fmt = |v: &[f64]| -> String {
                v.iter()
                    .map(|x| format!("{x:.4}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            println!(
                "{{\"times_ms\": [{}], \"thread_cpu_ms\": [{}], \"cpu_ms\": {cpu_ms:.4}}}",
                fmt(&times),
                fmt(&thread_times)
            );
        }
        std::io::stdout().flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Asks for `threads` threads in the compile options; returns the threads the runs will use.
fn apply_threads(opts: &mut CompileOptions, threads: usize) -> usize {
    opts.threads = threads.max(1);
    opts.threads
}

/// CPU time of `clock` (`CLOCK_PROCESS_CPUTIME_ID`: every thread of this process;
/// `CLOCK_THREAD_CPUTIME_ID`: the calling thread) so far, nanoseconds (0 where it cannot be
/// read).
fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; the clock ids are constants Linux knows.
    if unsafe { libc::clock_gettime(clock, &mut t) } != 0 {
        return 0;
    }
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

/// Seeded data: floats in [-1, 1), everything else zeros (valid indices).
fn random(dtype: DType, shape: &[usize], stream: u64) -> Result<TensorBuf, String> {
    let n: usize = shape.iter().product();
    let mut state = 0x5EED_u64 ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let data: Vec<u8> = match dtype {
        DType::F32 => (0..n)
            .flat_map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((state >> 40) as f32 / (1u64 << 23) as f32 - 1.0).to_le_bytes()
            })
            .collect(),
        d => vec![0; n * d.size()],
    };
    TensorBuf::new(dtype, shape.to_vec(), data).map_err(|e| e.to_string())
}

/// Peak resident set size of this process (Linux `VmHWM`).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
