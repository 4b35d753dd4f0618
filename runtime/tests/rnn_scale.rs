//! Recurrent ops at scale (issue 12, item 5): an LSTM is one loop body per direction, so its
//! compile time and compile-time memory do not grow with the sequence length. Each size is
//! compiled (import, planning, code generation) in a child process of its own — this test
//! binary run again with `ARENAC_RNN_SCALE_WORKER` — which reports its peak resident set
//! (`VmHWM`) and the compile's wall time.

use std::process::Command;

use arenac::{CompileOptions, DType, Tensor, compile_file};
use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
use arenac_proto::Message;

const WORKER_ENV: &str = "ARENAC_RNN_SCALE_WORKER";

/// A bidirectional LSTM like an OCR recognizer's: input 256, hidden 256, batch 1, `seq` steps.
fn lstm_model(seq: usize) -> Vec<u8> {
    let (inp, hid, dirs) = (256usize, 256usize, 2usize);
    let mut state = 0x1234_5678_u64;
    let mut tensor = |shape: &[usize]| {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1
            })
            .collect();
        Tensor::f32(shape.to_vec(), &v)
    };
    ModelBuilder::new("lstm", 14)
        .input("x", DType::F32, &[Dim::N(seq), Dim::N(1), Dim::N(inp)])
        .initializer("W", &tensor(&[dirs, 4 * hid, inp]))
        .initializer("R", &tensor(&[dirs, 4 * hid, hid]))
        .initializer("B", &tensor(&[dirs, 8 * hid]))
        .output(
            "y",
            DType::F32,
            &[Dim::N(seq), Dim::N(dirs), Dim::N(1), Dim::N(hid)],
        )
        .node(
            "lstm",
            "LSTM",
            &["x", "W", "R", "B"],
            &["y"],
            vec![
                ("hidden_size", Attr::Int(hid as i64)),
                ("direction", Attr::Str("bidirectional".into())),
            ],
        )
        .build()
        .encode_to_vec()
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// In a worker: compiles the model file named by the environment and prints
/// `peak_kib compile_ms`.
#[test]
fn worker() {
    let Some(path) = std::env::var_os(WORKER_ENV) else {
        return;
    };
    let started = std::time::Instant::now();
    let model = compile_file(path.as_ref(), &CompileOptions::default()).expect("compiles");
    let ms = started.elapsed().as_secs_f64() * 1e3;
    assert!(model.executable().is_some());
    println!("@@scale {} {ms:.1}", peak_rss_kib().unwrap_or(0));
}

/// (peak KiB, compile ms) of compiling a `seq`-step LSTM in a fresh process.
fn measure(seq: usize, dir: &std::path::Path) -> (u64, f64) {
    let path = dir.join(format!("lstm{seq}.onnx"));
    std::fs::write(&path, lstm_model(seq)).expect("writes the model");
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "worker", "--nocapture", "--test-threads=1"])
        .env(WORKER_ENV, &path)
        .output()
        .expect("runs the worker");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split("@@scale ").nth(1))
        .unwrap_or_else(|| {
            panic!(
                "worker said: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let mut parts = line.split_whitespace();
    let kib = parts.next().and_then(|s| s.parse().ok()).expect("peak");
    let ms = parts.next().and_then(|s| s.parse().ok()).expect("ms");
    (kib, ms)
}

#[test]
fn a_thousand_step_lstm_compiles_like_a_ten_step_one() {
    if std::env::var_os(WORKER_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (short_kib, short_ms) = measure(10, dir.path());
    let (long_kib, long_ms) = measure(1000, dir.path());
    println!(
        "10 steps: {short_kib} KiB peak, {short_ms:.0} ms; 1000 steps: {long_kib} KiB peak, \
         {long_ms:.0} ms"
    );
    assert!(short_kib > 0 && long_kib > 0, "VmHWM unreadable");
    assert!(
        long_kib < 2 * short_kib,
        "1000 steps peak at {long_kib} KiB, 10 steps at {short_kib} KiB"
    );
    assert!(long_ms < 1000.0, "1000 steps compile in {long_ms:.0} ms");
}
