//! `--threads` and `CompileOptions::threads`: the plan is made for the thread count (per-thread
//! scratch), the session runs on it, and the outputs are the same at every count.

use arenac::{CompileOptions, RunError, Session, TensorRef, compile_file};
use serde_json::Value;

mod common;

fn plan_json(model: &str, threads: &str) -> Value {
    let (code, out, err) = common::arenac(&["plan", model, "--json", "--threads", threads]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).expect("valid JSON")
}

#[test]
fn plan_reports_the_thread_count_and_grows_with_it() {
    let file = common::parallel_model();
    let path = file.path().to_str().unwrap();
    let one = plan_json(path, "1");
    let three = plan_json(path, "3");
    assert_eq!(one["threads"], 1);
    assert_eq!(three["threads"], 3);
    let arena = |v: &Value| v["arena_bytes"].as_u64().unwrap();
    assert!(
        arena(&three) >= arena(&one),
        "{} < {}",
        arena(&three),
        arena(&one)
    );
    // The library plan agrees with the CLI, and the session allocates what was printed.
    let model = compile_file(file.path(), &CompileOptions::default().with_threads(3)).unwrap();
    assert_eq!(model.summary().arena_bytes as u64, arena(&three));
    assert_eq!(model.session().unwrap().arena_bytes() as u64, arena(&three));
    let (code, out, _) = common::arenac(&["plan", path, "--threads", "2"]);
    assert_eq!(code, 0);
    assert!(out.contains(", 2 threads"), "{out}");
    let (code, _, err) = common::arenac(&["plan", path, "--threads", "0"]);
    assert_ne!(code, 0);
    assert!(err.contains("threads"), "{err}");
}

#[test]
fn run_says_how_many_threads() {
    let file = common::parallel_model();
    let path = file.path().to_str().unwrap();
    for t in ["1", "2"] {
        let (code, out, err) = common::arenac(&["run", path, "--threads", t, "--repeat", "3"]);
        assert_eq!(code, 0, "{err}");
        let want = if t == "1" { "1 thread)" } else { "2 threads)" };
        assert!(out.contains(want), "{out}");
    }
}

#[test]
fn same_outputs_at_every_thread_count_and_session_limits() {
    let file = common::parallel_model();
    let x: Vec<f32> = (0..16 * 32 * 32)
        .map(|i| (i % 31) as f32 / 31.0 - 0.5)
        .collect();
    let input = TensorRef::from_slice(&[1, 16, 32, 32], &x).unwrap();
    let mut outs = Vec::new();
    for threads in [1, 2, 3] {
        let model = compile_file(
            file.path(),
            &CompileOptions::default().with_threads(threads),
        )
        .unwrap();
        let mut s = model.session().unwrap();
        outs.push(
            s.run(&[("x", input)])
                .unwrap()
                .get(0)
                .unwrap()
                .bytes()
                .to_vec(),
        );
        // Fewer threads than planned is fine; more is refused with what to do.
        let exe = model.executable().unwrap().clone();
        let mut fewer = Session::with_threads(exe.clone(), 1).unwrap();
        let bytes = fewer
            .run(&[("x", input)])
            .unwrap()
            .get(0)
            .unwrap()
            .bytes()
            .to_vec();
        assert!(
            bytes == outs[0],
            "a {threads}-thread plan on one thread differs"
        );
        match Session::with_threads(exe, threads + 1) {
            Err(e @ RunError::TooManyThreads { .. }) => {
                assert!(e.to_string().contains("--threads"), "{e}")
            }
            other => panic!("expected TooManyThreads, got {other:?}"),
        }
    }
    assert!(
        outs[1] == outs[0] && outs[2] == outs[0],
        "outputs differ across thread counts"
    );
}
