//! Compile time, phase by phase: the arenac side of `scripts/bench_compile.py`.
//!
//! `cargo run --release -p arenac --example compile_bench -- [--threads N] [--repeat R] MODEL`
//!
//! Compiles MODEL `R` times (default 1) in this process, as `compile_file` does for a user
//! (import, plan, code generation), and prints one JSON line per compile:
//! `{"total_ms", "cpu_ms", "import_ms", "plan_ms", "codegen_ms", "jit_ms", "kernels",
//! "session_ms", "first_run_ms", "second_run_ms", "peak_rss_bytes"}`
//! (`cpu_ms`: CPU time of all the process's threads during the compile, which leaves out
//! time the process waited for a CPU; `jit_ms` is the part of `codegen_ms` spent in Cranelift; `peak_rss_bytes` the process's
//! VmHWM so far). After each compile it makes a session and times its first two runs on zero
//! inputs: the first pays what a fresh session pays once (arena pages first touched, the code
//! pages `compile_file` gave back faulted in again: see `CompileOptions::release_memory`),
//! the second is a warm run. The first compile of a fresh process is what a user waits for; later ones
//! run with warm allocator and page caches (useful under `perf record`).

use std::path::Path;
use std::time::Instant;

use arenac::{CompileOptions, DType, TensorRef, compile_file};

fn main() {
    if let Err(e) = bench() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn bench() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut threads = 1usize;
    let mut repeat = 1usize;
    while let Some(flag) = args.first().filter(|a| a.starts_with("--")).cloned() {
        let value = args
            .get(1)
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n >= 1)
            .ok_or_else(|| format!("{flag} needs a count >= 1"))?;
        match flag.as_str() {
            "--threads" => threads = value,
            "--repeat" => repeat = value,
            _ => return Err(format!("unknown option {flag}")),
        }
        args.drain(..2);
    }
    let [model] = args.as_slice() else {
        return Err("usage: compile_bench [--threads N] [--repeat R] MODEL".into());
    };
    let opts = CompileOptions {
        threads,
        // As the CLI: `ARENAC_KEEP_MEMORY=1` keeps what compiling touched resident.
        release_memory: std::env::var_os("ARENAC_KEEP_MEMORY").is_none_or(|v| v == "0"),
        ..CompileOptions::default()
    };
    for _ in 0..repeat {
        let cpu = cpu_ns();
        let start = Instant::now();
        let compiled = compile_file(Path::new(model), &opts).map_err(|e| e.to_string())?;
        let total = start.elapsed();
        let cpu_ms = cpu_ns().saturating_sub(cpu) as f64 / 1e6;
        let t = compiled.compile_timings();
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let kernels = compiled.executable().map_or(0, |e| e.kernel_count());
        let made = Instant::now();
        let mut session = compiled.session().map_err(|e| e.to_string())?;
        let session_ms = ms(made.elapsed());
        let zeros: Vec<(String, DType, Vec<usize>, Vec<u8>)> = session
            .inputs()
            .iter()
            .map(|s| {
                let bytes = s.ty.shape.iter().product::<usize>() * s.ty.dtype.size();
                (
                    s.name.clone(),
                    s.ty.dtype,
                    s.ty.shape.clone(),
                    vec![0u8; bytes],
                )
            })
            .collect();
        let mut runs = [0.0f64; 2];
        for r in &mut runs {
            let views = zeros
                .iter()
                .map(|(n, d, shape, data)| {
                    Ok((n.as_str(), TensorRef::from_bytes(*d, shape, data)?))
                })
                .collect::<Result<Vec<_>, arenac::RunError>>()
                .map_err(|e| e.to_string())?;
            let t = Instant::now();
            session.run(&views).map_err(|e| e.to_string())?;
            *r = ms(t.elapsed());
        }
        println!(
            "{{\"total_ms\": {:.3}, \"cpu_ms\": {cpu_ms:.3}, \"import_ms\": {:.3}, \"plan_ms\": {:.3}, \"codegen_ms\": {:.3}, \"jit_ms\": {:.3}, \"kernels\": {kernels}, \"session_ms\": {session_ms:.3}, \"first_run_ms\": {:.3}, \"second_run_ms\": {:.3}, \"peak_rss_bytes\": {}}}",
            ms(total),
            ms(t.import),
            ms(t.plan),
            ms(t.codegen),
            ms(t.jit),
            runs[0],
            runs[1],
            peak_rss().unwrap_or(0)
        );
    }
    Ok(())
}

/// CPU time of every thread of this process so far, nanoseconds (0 where it cannot be read).
fn cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; the clock id is a constant Linux knows.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) } != 0 {
        return 0;
    }
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

/// Peak resident set size of this process (Linux `VmHWM`).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
