//! `arenac run --batch N|auto`: the demo model's rows streamed in batches give the whole-array
//! run's outputs and accuracy; bad inputs are one-line errors that leave no output file.

mod common;

use std::path::Path;

use arenac::DType;
use arenac::io::{TensorBuf, npy, pb};
use common::arenac;

fn assert_one_line_error(code: i32, stderr: &str, needle: &str) {
    assert_eq!(code, 1, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(lines[0].contains(needle), "{needle:?} not in {stderr}");
}

fn repo(rel: &str) -> String {
    common::repo(rel).display().to_string()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// No file in `dir` (or no `dir`).
fn assert_no_output(dir: &Path) {
    let files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(files.is_empty(), "{files:?}");
}

#[test]
fn streamed_outputs_equal_the_whole_array_run() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, streamed) = (dir.path().join("whole"), dir.path().join("streamed"));
    let (model, samples, labels) = (
        repo("models/digits/digits.onnx"),
        repo("models/digits/samples.npy"),
        repo("models/digits/labels.npy"),
    );
    let (code, out, err) = arenac(&[
        "run",
        &model,
        "--input",
        &samples,
        "--output-dir",
        s(&whole),
        "--labels",
        &labels,
    ]);
    assert_eq!(code, 0, "{err}");
    let accuracy = out
        .lines()
        .find(|l| l.starts_with("accuracy:"))
        .unwrap()
        .to_string();
    let expected = npy::read_npy(&whole.join("output_0.npy")).unwrap();
    // Not a multiple of the rows, N = 1, more rows than N, N above the rows, and auto.
    for batch in ["32", "1", "99", "1000", "auto"] {
        let (code, out, err) = arenac(&[
            "run",
            &model,
            "--input",
            &format!("pixels={samples}"),
            "--batch",
            batch,
            "--memory-limit",
            "1MiB",
            "--output-dir",
            s(&streamed),
            "--labels",
            &labels,
        ]);
        assert_eq!(code, 0, "--batch {batch}: {err}");
        let got = npy::read_npy(&streamed.join("output_0.npy")).unwrap();
        assert_eq!(got.shape(), &[100, 10]);
        assert_eq!(got, expected, "--batch {batch}");
        assert!(out.contains(&accuracy), "--batch {batch}: {out}");
        assert!(out.contains("rows:    100 in "), "{out}");
        assert!(
            out.contains("rows/s") && out.contains("peak RSS: "),
            "{out}"
        );
        assert!(out.contains("wrote 1 output(s)"), "{out}");
        if batch == "auto" {
            // 100 rows of the demo model fit 1 MiB: auto takes them all.
            assert!(
                out.contains("batch:   100 rows (auto: arena + weights"),
                "{out}"
            );
            assert!(out.contains("fit --memory-limit 1MiB"), "{out}");
        }
        let files: Vec<_> = std::fs::read_dir(&streamed).unwrap().collect();
        assert_eq!(files.len(), 1, "no partial file left: {files:?}");
    }
    // 100 rows at batch 32: 4 batches, the last run by a program for its 4 rows.
    let (_, out, _) = arenac(&["run", &model, "--input", &samples, "--batch", "32"]);
    assert!(
        out.contains(
            "rows:    100 in 4 batches; the last has 4 rows, run by a program compiled for 4"
        ),
        "{out}"
    );
    assert!(
        out.contains("staging: ") && out.contains("tail:    arena + weights"),
        "{out}"
    );
}

#[test]
fn auto_is_bounded_by_the_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.npy");
    let rows = 5000;
    let data: Vec<u8> = (0..rows * 64)
        .flat_map(|i| ((i % 17) as f32 / 16.0).to_le_bytes())
        .collect();
    npy::write_npy(
        &x,
        TensorBuf::new(DType::F32, vec![rows, 64], data)
            .unwrap()
            .view(),
    )
    .unwrap();
    let model = repo("models/digits/digits.onnx");
    let (code, out, err) = arenac(&[
        "run",
        &model,
        "--input",
        s(&x),
        "--batch",
        "auto",
        "--memory-limit",
        "200KiB",
    ]);
    assert_eq!(code, 0, "{err}");
    let line = out.lines().find(|l| l.starts_with("batch:")).unwrap();
    let n: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(n > 1 && n < rows, "{line}");
    // The chosen batch's arena + weights + staging, as printed, is within the limit.
    let total = line
        .split(" = ")
        .nth(1)
        .unwrap()
        .split(" bytes")
        .next()
        .unwrap();
    assert!(
        total.replace(',', "").parse::<usize>().unwrap() <= 200 * 1024,
        "{line}"
    );
    assert!(line.contains("fit --memory-limit 200KiB"), "{line}");
    let (code, _, err) = arenac(&[
        "run",
        &model,
        "--input",
        s(&x),
        "--batch",
        "auto",
        "--memory-limit",
        "20KiB",
    ]);
    assert_one_line_error(
        code,
        &err,
        "no batch fits --memory-limit 20KiB: 1 row(s) need",
    );
}

/// `sum = x + y`, `prod = x * y` over rows of 3, batch dim `N` or fixed at 2.
fn two_input_model(dir: &Path, fixed: bool) -> std::path::PathBuf {
    use arenac_compiler::import::builder::{Dim, ModelBuilder};
    use prost::Message;
    let n = if fixed { Dim::N(2) } else { Dim::Sym("N") };
    let m = ModelBuilder::new("two", 17)
        .input("x", DType::F32, &[n.clone(), Dim::N(3)])
        .input("y", DType::F32, &[n, Dim::N(3)])
        .node("add", "Add", &["x", "y"], &["sum"], vec![])
        .node("mul", "Mul", &["x", "y"], &["prod"], vec![])
        .output("prod", DType::F32, &[])
        .output("sum", DType::F32, &[])
        .build();
    let path = dir.join(if fixed { "fixed.onnx" } else { "two.onnx" });
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    path
}

fn write_rows(path: &Path, rows: usize, cols: usize, k: f32) {
    let data: Vec<u8> = (0..rows * cols)
        .flat_map(|i| (i as f32 * k).to_le_bytes())
        .collect();
    npy::write_npy(
        path,
        TensorBuf::new(DType::F32, vec![rows, cols], data)
            .unwrap()
            .view(),
    )
    .unwrap();
}

#[test]
fn several_inputs_and_a_fixed_batch_model() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    write_rows(&x, 7, 3, 1.0);
    write_rows(&y, 7, 3, 0.5);
    for fixed in [false, true] {
        let model = two_input_model(dir.path(), fixed);
        let out_dir = dir.path().join(format!("out{fixed}"));
        let (code, out, err) = arenac(&[
            "run",
            s(&model),
            "--input",
            &format!("y={}", s(&y)),
            "--input",
            &format!("x={}", s(&x)),
            "--batch",
            "3",
            "--output-dir",
            s(&out_dir),
        ]);
        assert_eq!(code, 0, "{err}");
        if fixed {
            assert!(
                out.contains("batch:   2 rows (the model fixes its batch; --batch 3 not used)"),
                "{out}"
            );
            assert!(
                out.contains("rows:    7 in 4 batches; the last has 1 rows, padded to 2"),
                "{out}"
            );
        } else {
            assert!(out.contains("rows:    7 in 3 batches"), "{out}");
        }
        let prod = npy::read_npy(&out_dir.join("output_0.npy"))
            .unwrap()
            .view()
            .to_f32_vec();
        let sum = npy::read_npy(&out_dir.join("output_1.npy"))
            .unwrap()
            .view()
            .to_f32_vec();
        let want_prod: Vec<f32> = (0..21).map(|i| i as f32 * (i as f32 * 0.5)).collect();
        let want_sum: Vec<f32> = (0..21).map(|i| i as f32 * 1.5).collect();
        assert_eq!((prod, sum), (want_prod, want_sum));
    }
}

#[test]
fn bad_inputs_are_one_line_errors_without_output() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let model = two_input_model(dir.path(), false);
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    write_rows(&x, 5, 3, 1.0);
    write_rows(&y, 4, 3, 1.0);
    let run = |args: &[&str]| {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--output-dir", s(&out_dir)]);
        arenac(&all)
    };
    let xs = format!("x={}", s(&x));
    let (code, _, err) = run(&[
        s(&model),
        "--input",
        &xs,
        "--input",
        &format!("y={}", s(&y)),
        "--batch",
        "2",
    ]);
    assert_one_line_error(
        code,
        &err,
        "inputs have different row counts (first dims): 'x' 5 rows",
    );
    assert!(err.contains("'y' 4 rows"), "{err}");

    // A TensorProto .pb input cannot stream.
    let ypb = dir.path().join("y.pb");
    let t = TensorBuf::new(DType::F32, vec![5, 3], vec![0; 60]).unwrap();
    std::fs::write(&ypb, pb::encode_pb("y", &t)).unwrap();
    let (code, _, err) = run(&[
        s(&model),
        "--input",
        &xs,
        "--input",
        &format!("y={}", s(&ypb)),
        "--batch",
        "2",
    ]);
    assert_one_line_error(
        code,
        &err,
        "y.pb is not a .npy file; --batch streams rows of .npy files only",
    );

    // Truncated and Fortran-order files.
    let digits = repo("models/digits/digits.onnx");
    let good = std::fs::read(common::repo("models/digits/samples.npy")).unwrap();
    let short = dir.path().join("short.npy");
    std::fs::write(&short, &good[..good.len() - 100]).unwrap();
    let (code, _, err) = run(&[&digits, "--input", s(&short), "--batch", "8"]);
    assert_one_line_error(code, &err, "short.npy: truncated: data has");
    let at = good.windows(5).position(|w| w == b"False").unwrap();
    let fortran = dir.path().join("fortran.npy");
    std::fs::write(&fortran, [&good[..at], b"True ", &good[at + 5..]].concat()).unwrap();
    let (code, _, err) = run(&[&digits, "--input", s(&fortran), "--batch", "8"]);
    assert_one_line_error(
        code,
        &err,
        "fortran.npy: Fortran-order arrays cannot be streamed",
    );

    // Bad --batch values, and options that do not apply.
    let samples = repo("models/digits/samples.npy");
    for bad in ["0", "1.5", "many"] {
        let (code, _, err) = run(&[&digits, "--input", &samples, "--batch", bad]);
        assert_one_line_error(code, &err, "expected a row count of at least 1, or auto");
    }
    let (code, _, err) = run(&[
        &digits, "--input", &samples, "--batch", "8", "--repeat", "3",
    ]);
    assert_one_line_error(code, &err, "--repeat and --profile do not apply");
    let (code, _, err) = run(&[&digits, "--batch", "8"]);
    assert_one_line_error(code, &err, "give every input as --input NAME=FILE.npy");
    // Labels that do not match the rows.
    let (code, _, err) = run(&[
        &digits,
        "--input",
        &samples,
        "--batch",
        "8",
        "--labels",
        s(&y),
    ]);
    assert_one_line_error(code, &err, "labels must be integers");
    let few = dir.path().join("few.npy");
    let l = TensorBuf::new(DType::I64, vec![3], vec![0; 24]).unwrap();
    npy::write_npy(&few, l.view()).unwrap();
    let (code, _, err) = run(&[
        &digits,
        "--input",
        &samples,
        "--batch",
        "8",
        "--labels",
        s(&few),
    ]);
    assert_one_line_error(code, &err, "3 labels of shape [3] for 100 input rows");
    assert_no_output(&out_dir);

    // An output directory that cannot be created: a one-line error before any batch runs.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"not a folder").unwrap();
    let (code, _, err) = arenac(&[
        "run",
        &digits,
        "--input",
        &samples,
        "--batch",
        "8",
        "--output-dir",
        s(&blocker.join("out")),
    ]);
    assert_one_line_error(code, &err, "file/out");
}

#[test]
fn progress_lines_when_asked() {
    let (model, samples) = (
        repo("models/digits/digits.onnx"),
        repo("models/digits/samples.npy"),
    );
    let run = |extra: &[&str]| {
        let mut args = vec!["run", &model, "--input", &samples, "--batch", "32"];
        args.extend_from_slice(extra);
        arenac(&args)
    };
    // stderr is a pipe here: no bar by default; --progress forces lines; the last flag wins.
    let (code, _, err) = run(&[]);
    assert_eq!((code, err.as_str()), (0, ""));
    let (code, _, err) = run(&["--progress"]);
    assert_eq!(code, 0, "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("progress: 100/100 rows (") && last.ends_with(" rows/s)"),
        "{err}"
    );
    let (code, _, err) = run(&["--progress", "--no-progress"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let (code, _, err) = run(&["--no-progress", "--progress"]);
    assert!(code == 0 && err.contains("progress: 100/100"), "{err}");
}

#[test]
fn shape_binds_the_other_dims_and_not_the_batch() {
    use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
    use prost::Message;
    // x: [N, T], both symbolic; y = Softmax(x, axis 1): each row on its own.
    let dir = tempfile::tempdir().unwrap();
    let m = ModelBuilder::new("nt", 17)
        .input("x", DType::F32, &[Dim::Sym("N"), Dim::Sym("T")])
        .node(
            "sm",
            "Softmax",
            &["x"],
            &["y"],
            vec![("axis", Attr::Int(1))],
        )
        .output("y", DType::F32, &[])
        .build();
    let model = dir.path().join("nt.onnx");
    std::fs::write(&model, m.encode_to_vec()).unwrap();
    let x = dir.path().join("x.npy");
    write_rows(&x, 10, 5, 0.25);
    let input = format!("x={}", s(&x));
    let out = dir.path().join("out");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", s(&model), "--input", &input, "--batch", "4"];
        args.extend_from_slice(extra);
        arenac(&args)
    };
    // T bound by --shape (by name or as x[1]), N by --batch: every row is exact.
    for t in ["T=5", "x[1]=5"] {
        let (code, stdout, err) = run(&["--shape", t, "--output-dir", s(&out)]);
        assert_eq!(code, 0, "{t}: {err}");
        assert!(stdout.contains("rows:    10 in 3 batches"), "{stdout}");
        let y = npy::read_npy(&out.join("output_0.npy")).unwrap();
        assert_eq!(y.view().shape(), &[10, 5]);
        let y = y.view().to_f32_vec();
        for r in 0..10 {
            let row: Vec<f64> = (0..5)
                .map(|c| f64::from((r * 5 + c) as f32 * 0.25))
                .collect();
            let total: f64 = row.iter().map(|v| v.exp()).sum();
            for c in 0..5 {
                let e = (row[c].exp() / total) as f32;
                assert!((y[r * 5 + c] - e).abs() < 1e-6, "{t}: row {r}: {y:?}");
            }
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
    // A --shape that binds the batch dim (even to the batch size): one line naming it.
    for spec in ["N=3", "N=4", "x=4x5", "x[0]=4"] {
        let (code, _, err) = run(&["--shape", spec, "--shape", "T=5", "--output-dir", s(&out)]);
        assert_one_line_error(
            code,
            &err,
            &format!(
                "--shape {}: binds the batch dim N, which --batch sets",
                spec
            ),
        );
        assert_no_output(&out);
    }
    // Also with --batch auto.
    let (code, _, err) = arenac(&[
        "run",
        s(&model),
        "--input",
        &input,
        "--batch",
        "auto",
        "--shape",
        "N=2",
    ]);
    assert_one_line_error(code, &err, "--shape N=2: binds the batch dim N");
}

#[cfg(target_os = "linux")]
#[test]
fn a_writer_failing_mid_run_leaves_no_output() {
    use std::os::unix::process::CommandExt;
    // 10,000 digit rows in batches of 1000: output_0 is 400 KB, written as batches finish.
    // The child may write files of at most 100 KB (RLIMIT_FSIZE, SIGXFSZ ignored so the
    // write fails with EFBIG): the writer thread fails after a few batches.
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.npy");
    write_rows(&x, 10_000, 64, 0.001);
    let out = dir.path().join("out");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_arenac"));
    cmd.args([
        "run",
        &repo("models/digits/digits.onnx"),
        "--input",
        &format!("pixels={}", s(&x)),
        "--batch",
        "1000",
        "--output-dir",
        s(&out),
    ]);
    // SAFETY: between fork and exec only async-signal-safe calls (signal, setrlimit).
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: 100_000,
                rlim_max: 100_000,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_one_line_error(o.status.code().unwrap_or(-1), &err, ".output_0.npy.partial");
    assert!(err.contains("File too large"), "{err}");
    // Neither a finished-looking output_0.npy nor the partial file is left.
    assert_no_output(&out);
}
