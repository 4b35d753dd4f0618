//! Soak: many runs of one session, and many compile → session → run → drop cycles, with the
//! process's resident memory (`VmRSS` of `/proc/self/status`) at start, after warm-up and at
//! the end. A steady state must stay flat: the arena is allocated once per session and JIT
//! code memory is released when an `Executable` drops.
//!
//! ```text
//! cargo run --release -p arenac --example soak -- [RUNS_MODEL] [RUNS] [CYCLES_MODEL] [CYCLES]
//! ```
//! Defaults: 10,000 runs of ONNX's light SqueezeNet (`ARENAC_ONNX_LIGHT_DIR`, else the
//! installed onnx package's `backend/test/data/light`), 1,000 cycles of the shipped digits
//! model. Prints one line per phase; exits 1 when a phase's RSS grew by more than 1 MiB
//! between warm-up and end (the figures are in `docs/ROBUSTNESS.md`).

use std::path::PathBuf;
use std::time::Instant;

use arenac::{CompileOptions, Session, TensorRef, compile_file};

/// Resident set size in KiB, from `/proc/self/status`.
fn rss_kib() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn light_model(name: &str) -> PathBuf {
    let dir = std::env::var_os("ARENAC_ONNX_LIGHT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../.venv/lib/python3.11/site-packages/onnx/backend/test/data/light")
        });
    dir.join(format!("{name}.onnx"))
}

/// Inputs for a session: every input filled with a ramp in [-1, 1).
fn inputs(session: &Session) -> Vec<Vec<f32>> {
    session
        .inputs()
        .iter()
        .map(|s| {
            let n = s.ty.numel().unwrap_or(0);
            (0..n).map(|i| (i % 200) as f32 / 100.0 - 1.0).collect()
        })
        .collect()
}

fn run_once(session: &mut Session, data: &[Vec<f32>]) -> f32 {
    let shapes: Vec<Vec<usize>> = session
        .inputs()
        .iter()
        .map(|s| s.ty.shape.to_vec())
        .collect();
    let refs: Vec<TensorRef<'_>> = data
        .iter()
        .zip(&shapes)
        .map(|(d, s)| TensorRef::from_slice(s, d).expect("input matches its slot"))
        .collect();
    let out = session.run_positional(&refs).expect("runs");
    out.get(0).and_then(|t| t.get_f32(0)).unwrap_or(0.0)
}

/// `y = Neg(Cast<f16>(Relu(x)))`: the Relu kernel compiles, the f16 Neg has none (no f16 arithmetic).
fn failing_model() -> (arenac_compiler::ir::graph::Graph, arenac::ArenaPlan) {
    use arenac_compiler::arena::{PlanOptions, plan_arena};
    use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
    use arenac_compiler::import::{ImportOptions, import_model};
    let m = ModelBuilder::new("fail", 13)
        .input("x", arenac::DType::F32, &[Dim::N(64), Dim::N(64)])
        .node("r", "Relu", &["x"], &["a"], vec![])
        .node("c", "Cast", &["a"], &["b"], vec![("to", Attr::Int(10))])
        .node("n", "Neg", &["b"], &["y"], vec![])
        .output("y", arenac::DType::F16, &[])
        .build();
    let g = import_model(&m, None, &ImportOptions::default())
        .expect("imports")
        .graph;
    let plan = plan_arena(&g, &PlanOptions::default()).expect("plans");
    (g, plan)
}

struct Phase {
    start: usize,
    warm: usize,
    end: usize,
}

impl Phase {
    fn report(&self, what: &str, secs: f64) -> bool {
        let mib = |k: usize| k as f64 / 1024.0;
        let growth = self.end as i64 - self.warm as i64;
        println!(
            "{what}: RSS start {:.1} MiB, after warm-up {:.1} MiB, end {:.1} MiB \
             (end - warm-up {:+} KiB), {secs:.1} s",
            mib(self.start),
            mib(self.warm),
            mib(self.end),
            growth
        );
        growth <= 1024
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned();
    let runs_model = arg(0)
        .map(PathBuf::from)
        .unwrap_or_else(|| light_model("light_squeezenet"));
    let runs: usize = arg(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let cycles_model = arg(2).map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/digits/digits.onnx")
    });
    let cycles: usize = arg(3).and_then(|s| s.parse().ok()).unwrap_or(1_000);
    let opts = CompileOptions::default();

    // Phase 1: one session, many runs.
    let start = rss_kib();
    let model = compile_file(&runs_model, &opts)
        .unwrap_or_else(|e| panic!("{}: {e}", runs_model.display()));
    let mut session = Session::new(&model).expect("session");
    let data = inputs(&session);
    let warm_runs = (runs / 100).max(1);
    let mut acc = 0.0f32;
    for _ in 0..warm_runs {
        acc += run_once(&mut session, &data);
    }
    let warm = rss_kib();
    let t = Instant::now();
    for _ in warm_runs..runs {
        acc += run_once(&mut session, &data);
    }
    let runs_phase = Phase {
        start,
        warm,
        end: rss_kib(),
    };
    let ok_runs = runs_phase.report(
        &format!("{runs} runs of {}", runs_model.display()),
        t.elapsed().as_secs_f64(),
    );
    drop(session);
    drop(model);

    // Phase 2: compile → session → run → drop.
    let start = rss_kib();
    let cycle = |acc: &mut f32| {
        let model = compile_file(&cycles_model, &opts)
            .unwrap_or_else(|e| panic!("{}: {e}", cycles_model.display()));
        let mut session = Session::new(&model).expect("session");
        let data = inputs(&session);
        *acc += run_once(&mut session, &data);
    };
    let warm_cycles = (cycles / 20).max(1);
    for _ in 0..warm_cycles {
        cycle(&mut acc);
    }
    let warm = rss_kib();
    let t = Instant::now();
    for _ in warm_cycles..cycles {
        cycle(&mut acc);
    }
    let cycles_phase = Phase {
        start,
        warm,
        end: rss_kib(),
    };
    let ok_cycles = cycles_phase.report(
        &format!(
            "{cycles} compile/run/drop cycles of {}",
            cycles_model.display()
        ),
        t.elapsed().as_secs_f64(),
    );

    // Phase 3: compilations that fail in code generation after a kernel was compiled (the
    // half-built JIT module must be freed too).
    let failing = failing_model();
    let start = rss_kib();
    let fail_once = || {
        let err = arenac_compiler::codegen::compile(&failing.0, &failing.1);
        assert!(err.is_err(), "f16 arithmetic (Neg) has no kernel");
    };
    for _ in 0..warm_cycles {
        fail_once();
    }
    let warm = rss_kib();
    let t = Instant::now();
    for _ in warm_cycles..cycles {
        fail_once();
    }
    let failed_phase = Phase {
        start,
        warm,
        end: rss_kib(),
    };
    let ok_failed = failed_phase.report(
        &format!("{cycles} failed compilations (Relu f32, then Neg f16 without a kernel)"),
        t.elapsed().as_secs_f64(),
    );
    println!("(checksum {acc})");
    if !(ok_runs && ok_cycles && ok_failed) {
        eprintln!("error: resident memory grew by more than 1 MiB after warm-up");
        std::process::exit(1);
    }
}
