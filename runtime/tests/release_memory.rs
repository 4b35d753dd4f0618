//! Memory given back after compiling (`arenac::release`): `arenac run` of the demo with
//! `ARENAC_MEMTRACE=1` shows the process's resident file pages (mostly arenac's own code)
//! falling once the program is generated, the run still giving the same outputs.

#![cfg(target_os = "linux")]

/// (phase, rss KiB, file KiB) from the `memtrace` lines of stderr.
fn marks(stderr: &str) -> Vec<(String, u64, u64)> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("memtrace ")?;
            let (phase, nums) = rest.split_once(": ")?;
            let w: Vec<&str> = nums.split_whitespace().collect();
            let num = |k: &str| {
                let i = w.iter().position(|x| *x == k)?;
                w.get(i + 1)?.parse::<u64>().ok()
            };
            Some((phase.to_string(), num("rss")?, num("file")?))
        })
        .collect()
}

fn run_digits(release: bool) -> (Vec<(String, u64, u64)>, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_arenac"));
    cmd.args(["run", "--threads", "1", "--output-dir"])
        .arg(dir.path())
        .arg(env!("CARGO_MANIFEST_DIR").to_string() + "/../models/digits/digits.onnx")
        .args(["--input"])
        .arg(env!("CARGO_MANIFEST_DIR").to_string() + "/../models/digits/samples.npy")
        .env("ARENAC_MEMTRACE", "1");
    if !release {
        cmd.env("ARENAC_KEEP_MEMORY", "1");
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let y = std::fs::read(dir.path().join("output_0.npy")).unwrap();
    (marks(&stderr), y)
}

#[test]
fn code_pages_are_dropped_after_compiling_and_outputs_are_unchanged() {
    let (m, y) = run_digits(true);
    let at = |p: &str| m.iter().find(|x| x.0 == p).cloned();
    let generated = at("generated").expect("a 'generated' mark");
    let released = at("released").expect("a 'released' mark");
    let ran = at("ran").expect("a 'ran' mark");
    // The compiler's code pages go: at least 2 MiB of file pages fewer (about 8 MiB on
    // x86-64 Linux), and the run brings back far less than that.
    assert!(
        released.2 + 2048 <= generated.2,
        "file pages {} KiB after release, {} KiB before",
        released.2,
        generated.2
    );
    assert!(ran.1 < generated.1, "{m:?}");
    // Without the release, the same outputs.
    let (m2, y2) = run_digits(false);
    assert!(m2.iter().all(|x| x.0 != "released"), "{m2:?}");
    assert_eq!(y, y2);
}
