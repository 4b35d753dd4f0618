//! The streaming library (`arenac::stream`): batches of rows of mapped `.npy` inputs give
//! the outputs of one whole-array run, whatever the batch (a multiple of the rows or not,
//! more than the rows, 1), with several inputs and with a fixed-batch model; bad files are
//! one-line errors; output files appear only when complete.

mod common;

use std::path::Path;

use arenac::io::{TensorBuf, npy};
use arenac::stream::{BatchRunner, MappedNpy, NpyRowWriter, StreamError};
use arenac::{CompileOptions, DType, TensorRef};

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn to_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `rows` digit images: the 100 shipped samples, repeated.
fn digit_rows(rows: usize) -> Vec<f32> {
    let samples = npy::read_npy(&common::repo("models/digits/samples.npy")).unwrap();
    let s = samples.view().to_f32_vec();
    (0..rows * 64).map(|i| s[i % s.len()]).collect()
}

fn write_f32(path: &Path, shape: Vec<usize>, data: &[f32]) {
    npy::write_npy(
        path,
        TensorBuf::new(DType::F32, shape, f32s(data))
            .unwrap()
            .view(),
    )
    .unwrap();
}

/// The digits model's probabilities for `pixels` (rows x 64) in one run at N = rows.
fn whole_run(pixels: &[f32]) -> Vec<f32> {
    let rows = pixels.len() / 64;
    let model = common::digits(rows);
    let mut session = model.session().unwrap();
    let shape = [rows, 64];
    let out = session
        .run(&[("pixels", TensorRef::from_slice(&shape, pixels).unwrap())])
        .unwrap();
    out.by_name("probs").unwrap().to_f32_vec()
}

fn streamed(input: &MappedNpy, batch: usize) -> (Vec<f32>, arenac::stream::StreamStats) {
    let model = common::repo("models/digits/digits.onnx");
    let mut runner = BatchRunner::new(&model, &CompileOptions::default(), batch).unwrap();
    let mut probs = vec![0u8; input.rows() * 40];
    let stats = runner
        .run(&[("pixels", input)], &mut [probs.as_mut_slice()][..])
        .unwrap();
    (to_f32(&probs), stats)
}

#[test]
fn batches_equal_a_whole_array_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    let rows = 250;
    let pixels = digit_rows(rows);
    write_f32(&path, vec![rows, 64], &pixels);
    let input = MappedNpy::open(&path).unwrap();
    assert_eq!((input.rows(), input.row_bytes()), (rows, 256));
    let expected = whole_run(&pixels);
    // A multiple of the rows, not a multiple, N = 1, N = rows, more rows than N... and N
    // above the row count (one padded batch).
    for (batch, batches) in [(50, 5), (64, 4), (1, 250), (7, 36), (250, 1), (400, 1)] {
        let (got, stats) = streamed(&input, batch);
        assert_eq!(
            (stats.rows, stats.batch, stats.batches),
            (rows, batch, batches)
        );
        let worst = got
            .iter()
            .zip(&expected)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst <= 1e-6, "batch {batch}: max |diff| {worst}");
    }
}

#[test]
fn empty_input_runs_no_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.npy");
    write_f32(&path, vec![0, 64], &[]);
    let input = MappedNpy::open(&path).unwrap();
    let (got, stats) = streamed(&input, 8);
    assert_eq!((got.len(), stats.batches), (0, 0));
}

/// `sum = x + y`, `prod = x * y` over rows of 3; the batch dim `N` symbolic or fixed.
fn two_input_model(dir: &Path, batch: Option<usize>) -> std::path::PathBuf {
    use arenac_compiler::import::builder::{Dim, ModelBuilder};
    use prost::Message;
    let n = match batch {
        Some(b) => Dim::N(b),
        None => Dim::Sym("N"),
    };
    let m = ModelBuilder::new("two", 17)
        .input("x", DType::F32, &[n.clone(), Dim::N(3)])
        .input("y", DType::F32, &[n, Dim::N(3)])
        .node("add", "Add", &["x", "y"], &["sum"], vec![])
        .node("mul", "Mul", &["x", "y"], &["prod"], vec![])
        .output("prod", DType::F32, &[])
        .output("sum", DType::F32, &[])
        .build();
    let path = dir.join(format!("two_{batch:?}.onnx"));
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    path
}

#[test]
fn several_inputs_and_a_fixed_batch_model() {
    let dir = tempfile::tempdir().unwrap();
    let rows = 11;
    let x: Vec<f32> = (0..rows * 3).map(|i| i as f32).collect();
    let y: Vec<f32> = (0..rows * 3).map(|i| 0.5 + (i % 7) as f32).collect();
    let (xp, yp) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    write_f32(&xp, vec![rows, 3], &x);
    write_f32(&yp, vec![rows, 3], &y);
    let (xm, ym) = (MappedNpy::open(&xp).unwrap(), MappedNpy::open(&yp).unwrap());
    let prod: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a * b).collect();
    let sum: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    // Symbolic N bound to 4, and a model fixed at batch 2 that runs at 2 whatever is asked.
    for (fixed, asked, batch, batches) in [(None, 4, 4, 3), (Some(2), 5, 2, 6)] {
        let model = two_input_model(dir.path(), fixed);
        let mut runner = BatchRunner::new(&model, &CompileOptions::default(), asked).unwrap();
        assert_eq!(
            (runner.batch(), runner.fixed_batch()),
            (batch, fixed.is_some())
        );
        let mut p = vec![0u8; rows * 12];
        let mut s = vec![0u8; rows * 12];
        // Inputs by name, in any order.
        let stats = runner
            .run(
                &[("y", &ym), ("x", &xm)],
                &mut [p.as_mut_slice(), s.as_mut_slice()][..],
            )
            .unwrap();
        assert_eq!((stats.batch, stats.batches), (batch, batches));
        assert_eq!(to_f32(&p), prod);
        assert_eq!(to_f32(&s), sum);
    }
}

#[test]
fn mismatched_inputs_are_errors_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let model = two_input_model(dir.path(), None);
    let (xp, yp, zp) = (
        dir.path().join("x.npy"),
        dir.path().join("y.npy"),
        dir.path().join("z.npy"),
    );
    write_f32(&xp, vec![5, 3], &[1.0; 15]);
    write_f32(&yp, vec![4, 3], &[1.0; 12]);
    write_f32(&zp, vec![5, 4], &[1.0; 20]);
    let (x, y, z) = (
        MappedNpy::open(&xp).unwrap(),
        MappedNpy::open(&yp).unwrap(),
        MappedNpy::open(&zp).unwrap(),
    );
    let mut runner = BatchRunner::new(&model, &CompileOptions::default(), 2).unwrap();
    let mut bufs = [vec![0u8; 60], vec![0u8; 60]];
    let mut run = |inputs: &[(&str, &MappedNpy)]| -> String {
        let [a, b] = &mut bufs;
        let e = runner
            .run(inputs, &mut [a.as_mut_slice(), b.as_mut_slice()][..])
            .unwrap_err();
        let text = e.to_string();
        assert_eq!(text.lines().count(), 1, "{text}");
        text
    };
    let e = run(&[("x", &x), ("y", &y)]);
    assert!(
        e.contains("different row counts") && e.contains("'x' 5 rows") && e.contains("'y' 4"),
        "{e}"
    );
    let e = run(&[("x", &x)]);
    assert!(e.contains("input 'y' is not given"), "{e}");
    let e = run(&[("x", &x), ("y", &z)]);
    assert!(
        e.contains("z.npy: rows of f32[4] do not fit input 'y'"),
        "{e}"
    );
    let e = run(&[("x", &x), ("w", &x)]);
    assert!(e.contains("'w' is not an input"), "{e}");
}

#[test]
fn bad_npy_files_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.npy");
    write_f32(&good, vec![4, 64], &[0.5; 256]);
    let bytes = std::fs::read(&good).unwrap();
    let open_err = |name: &str, content: &[u8]| -> String {
        let p = dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        let e = MappedNpy::open(&p).unwrap_err().to_string();
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.contains(name), "{e}");
        e
    };
    let e = open_err("short.npy", &bytes[..bytes.len() - 5]);
    assert!(
        e.contains("truncated: data has 1019 bytes but f32[4,64] needs 1024"),
        "{e}"
    );
    let e = open_err("long.npy", &[&bytes[..], &[0u8; 4]].concat());
    assert!(e.contains("data has 1028 bytes"), "{e}");
    // Header edits of the same length keep the data where it was.
    let edit = |from: &[u8], to: &[u8]| -> Vec<u8> {
        let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
        [&bytes[..at], to, &bytes[at + from.len()..]].concat()
    };
    let e = open_err(
        "fortran.npy",
        &edit(b"'fortran_order': False", b"'fortran_order': True "),
    );
    assert!(e.contains("Fortran-order arrays cannot be streamed"), "{e}");
    let e = open_err("big.npy", &edit(b"<f4", b">f4"));
    assert!(e.contains("big-endian"), "{e}");
    let e = open_err("empty.npy", b"");
    assert!(e.contains("not a .npy file"), "{e}");
    let scalar = dir.path().join("scalar.npy");
    write_f32(&scalar, vec![], &[1.0]);
    let e = MappedNpy::open(&scalar).unwrap_err().to_string();
    assert!(e.contains("0-d array has no rows"), "{e}");
}

#[test]
fn writer_renames_only_when_complete() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("output_0.npy");
    let partial = dir.path().join(".output_0.npy.partial");
    let mut w = NpyRowWriter::create(&path, DType::F32, &[2], 3).unwrap();
    assert!(partial.exists() && !path.exists());
    w.write_rows(&f32s(&[1., 2., 3., 4.])).unwrap();
    assert!(w.write_rows(&f32s(&[5.])).is_err(), "half a row");
    w.write_rows(&f32s(&[5., 6.])).unwrap();
    assert!(
        w.write_rows(&f32s(&[7., 8.])).is_err(),
        "past the declared rows"
    );
    assert_eq!(w.finish().unwrap(), path);
    assert!(!partial.exists());
    let back = npy::read_npy(&path).unwrap();
    assert_eq!(back.shape(), &[3, 2]);
    assert_eq!(back.view().to_f32_vec(), vec![1., 2., 3., 4., 5., 6.]);

    // Unfinished: an error at finish, or dropped; no file left either way.
    let other = dir.path().join("output_1.npy");
    let mut w = NpyRowWriter::create(&other, DType::F32, &[2], 3).unwrap();
    w.write_rows(&f32s(&[1., 2.])).unwrap();
    let e = w.finish().unwrap_err().to_string();
    assert!(e.contains("only 1 of 3 rows"), "{e}");
    let w = NpyRowWriter::create(&other, DType::F32, &[2], 3).unwrap();
    drop(w);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "only output_0.npy: {left:?}");

    // numpy has no bfloat16: a clear error, no file.
    let e = NpyRowWriter::create(&other, DType::BF16, &[2], 3).unwrap_err();
    assert!(e.to_string().contains("cannot write bf16 as .npy"), "{e}");
    let e: StreamError = e.into();
    assert!(matches!(e, StreamError::Io(_)));
}

/// More than the writer's 8 MiB write-back chunk, in uneven batches: every byte lands where
/// it belongs (the flushes that start write-back mid-stream lose or reorder nothing).
#[test]
fn writer_past_its_write_back_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("output_0.npy");
    let rows = 3_000_000; // 3 floats a row: 36 MB of data, several write-back chunks
    let mut w = NpyRowWriter::create(&path, DType::F32, &[3], rows).unwrap();
    let mut done = 0;
    for batch in [1, 999_999, 700_001, 1_299_999] {
        let vals: Vec<f32> = (done * 3..(done + batch) * 3).map(|i| i as f32).collect();
        w.write_rows(&f32s(&vals)).unwrap();
        done += batch;
    }
    assert_eq!(done, rows);
    w.finish().unwrap();
    let back = npy::read_npy(&path).unwrap();
    assert_eq!(back.shape(), &[rows, 3]);
    let v = back.view().to_f32_vec();
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as f32));
}

#[test]
fn consumed_pages_leave_the_resident_set() {
    // 64 MiB of rows streamed at batch 1024: the pages of the file's mapping behind the
    // cursor leave the resident set (its Rss in /proc/self/smaps).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.npy");
    let rows = 1 << 18; // 256 KiRows x 256 B = 64 MiB
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let header = npy::encode_npy_header(DType::F32, &[rows, 64]).unwrap();
        f.write_all(&header).unwrap();
        let row = f32s(&digit_rows(1));
        for _ in 0..rows {
            f.write_all(&row).unwrap();
        }
    }
    let input = MappedNpy::open(&path).unwrap();
    let model = common::repo("models/digits/digits.onnx");
    let mut runner = BatchRunner::new(&model, &CompileOptions::default(), 1024).unwrap();
    // Touch every page first (how much a copy faults in varies by kernel and memcpy): the
    // whole file is resident now, and the release must take it back out behind the cursor.
    let all = input.rows_bytes(0..rows).unwrap();
    let touched: usize = all.iter().step_by(4096).map(|&b| b as usize).sum();
    assert!(touched < usize::MAX);
    assert!(mapped_rss(&path).unwrap() > 60 << 20);
    struct Rss<'a> {
        path: &'a Path,
        last: usize,
        checks: usize,
    }
    impl arenac::stream::RowSink for Rss<'_> {
        fn write_rows(&mut self, _: usize, _: usize, _: TensorRef<'_>) -> Result<(), StreamError> {
            Ok(())
        }
        fn batch_done(&mut self, _: usize) {
            let rss = mapped_rss(self.path).expect("the file is mapped");
            self.last = rss;
            self.checks += 1;
        }
    }
    let mut sink = Rss {
        path: &path,
        last: 0,
        checks: 0,
    };
    let stats = runner.run(&[("pixels", &input)], &mut sink).unwrap();
    assert_eq!((stats.batches, sink.checks), (256, 256));
    // One batch is 256 KiB; without the release the whole 64 MiB ends up resident.
    // Every row consumed: at most the last page (or so) stays; without the release, 64 MiB.
    assert!(
        sink.last < 1 << 20,
        "the mapping's Rss is {} bytes",
        sink.last
    );
}

/// The resident bytes of this process's mapping of `path` (`Rss:` of its /proc/self/smaps
/// entry); `None` when it is not mapped.
fn mapped_rss(path: &Path) -> Option<usize> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let name = path.to_str()?;
    let mut lines = smaps.lines();
    lines.find(|l| l.ends_with(name))?;
    let rss = lines.find(|l| l.starts_with("Rss:"))?;
    let kb: usize = rss[4..].trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

/// `y = Softmax(x, axis 0)` over rows of 3: every output row depends on every row of its
/// batch, so zero rows padding a tail batch would change the tail's outputs.
fn row_mixing_model(dir: &Path) -> std::path::PathBuf {
    use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
    use prost::Message;
    let m = ModelBuilder::new("mix", 17)
        .input("x", DType::F32, &[Dim::Sym("N"), Dim::N(3)])
        .node(
            "sm",
            "Softmax",
            &["x"],
            &["y"],
            vec![("axis", Attr::Int(0))],
        )
        .output("y", DType::F32, &[])
        .build();
    let path = dir.join("mix.onnx");
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    path
}

#[test]
fn a_tail_batch_is_exact_for_a_model_mixing_rows() {
    let dir = tempfile::tempdir().unwrap();
    let model = row_mixing_model(dir.path());
    let rows = 10;
    let x: Vec<f32> = (0..rows * 3)
        .map(|i| ((i * 7 % 11) as f32) * 0.3 - 1.0)
        .collect();
    let xp = dir.path().join("x.npy");
    write_f32(&xp, vec![rows, 3], &x);
    let xm = MappedNpy::open(&xp).unwrap();
    // Each batch's outputs are the model run on that batch's rows alone (f64 softmax down
    // each column): batches 0..4, 4..8 and the tail 8..10.
    let mut expected = vec![0f32; rows * 3];
    for (a, b) in [(0, 4), (4, 8), (8, 10)] {
        for c in 0..3 {
            let col = |r: usize| f64::from(x[r * 3 + c]);
            let total: f64 = (a..b).map(|r| col(r).exp()).sum();
            for r in a..b {
                expected[r * 3 + c] = (col(r).exp() / total) as f32;
            }
        }
    }
    let mut runner = BatchRunner::new(&model, &CompileOptions::default(), 4).unwrap();
    for round in 0..2 {
        let mut y = vec![0u8; rows * 12];
        let stats = runner
            .run(&[("x", &xm)], &mut [y.as_mut_slice()][..])
            .unwrap();
        assert_eq!((stats.batches, stats.batch), (3, 4), "round {round}");
        assert!(stats.tail_plan_bytes.is_some(), "round {round}");
        for (i, (g, e)) in to_f32(&y).iter().zip(&expected).enumerate() {
            assert!(
                (g - e).abs() < 1e-6,
                "round {round}, element {i}: {g} vs {e}"
            );
        }
        // The tail program replaced the main one; the next run compiles it again.
        assert!(runner.model().is_none());
    }
    // A multiple of the batch runs on the main program only.
    let mut y = vec![0u8; rows * 12];
    let mut runner = BatchRunner::new(&model, &CompileOptions::default(), 5).unwrap();
    let stats = runner
        .run(&[("x", &xm)], &mut [y.as_mut_slice()][..])
        .unwrap();
    assert_eq!((stats.batches, stats.tail_plan_bytes), (2, None));
    assert!(runner.model().is_some());
}

#[test]
fn bad_bool_rows_stop_the_run_from_the_reader_thread() {
    use arenac_compiler::import::builder::{Dim, ModelBuilder};
    use prost::Message;
    let dir = tempfile::tempdir().unwrap();
    let m = ModelBuilder::new("not", 17)
        .input("b", DType::Bool, &[Dim::Sym("N"), Dim::N(2)])
        .node("not", "Not", &["b"], &["y"], vec![])
        .output("y", DType::Bool, &[])
        .build();
    let model = dir.path().join("not.onnx");
    std::fs::write(&model, m.encode_to_vec()).unwrap();
    // 10 rows of 2 bools; row 6 holds a 2.
    let mut data = vec![0u8; 20];
    data[13] = 2;
    let path = dir.path().join("b.npy");
    npy::write_npy(
        &path,
        TensorBuf::new(DType::Bool, vec![10, 2], data)
            .unwrap()
            .view(),
    )
    .unwrap();
    let b = MappedNpy::open(&path).unwrap();
    let mut runner = BatchRunner::new(&model, &CompileOptions::default(), 4).unwrap();
    struct Rows(Vec<usize>);
    impl arenac::stream::RowSink for Rows {
        fn write_rows(
            &mut self,
            _: usize,
            first: usize,
            _: TensorRef<'_>,
        ) -> Result<(), StreamError> {
            self.0.push(first);
            Ok(())
        }
    }
    let mut seen = Rows(Vec::new());
    let e = runner.run(&[("b", &b)], &mut seen).unwrap_err().to_string();
    assert!(
        e.contains("b.npy: bool data holds a byte other than 0 or 1 in rows 4..8")
            && !e.contains('\n'),
        "{e}"
    );
    // The first batch ran; the bad one did not.
    assert_eq!(seen.0, vec![0]);
}

/// `y = ReduceSum(x, axis 1)` over rows of `T` values: `x[N, T]`, `T` free.
fn free_row_dim_model(dir: &Path) -> std::path::PathBuf {
    use arenac_compiler::import::builder::{Attr, Dim, ModelBuilder};
    use prost::Message;
    let m = ModelBuilder::new("sum", 11)
        .input("x", DType::F32, &[Dim::Sym("N"), Dim::Sym("T")])
        .node(
            "sum",
            "ReduceSum",
            &["x"],
            &["y"],
            vec![("axes", Attr::Ints(vec![1])), ("keepdims", Attr::Int(0))],
        )
        .output("y", DType::F32, &[])
        .build();
    let path = dir.join("sum.onnx");
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    path
}

#[test]
fn free_dims_past_the_batch_come_from_the_files() {
    use arenac::stream::{FileJob, run_files};
    let dir = tempfile::tempdir().unwrap();
    let model = free_row_dim_model(dir.path());
    let (rows, t) = (7, 5);
    let x: Vec<f32> = (0..rows * t).map(|i| (i % 9) as f32 - 2.0).collect();
    let xp = dir.path().join("x.npy");
    write_f32(&xp, vec![rows, t], &x);
    // T is bound to 5 by the file (the declared N by the batch); a --shape agreeing with it
    // is fine.
    for (opts, out) in [
        (CompileOptions::default(), "a"),
        (CompileOptions::default().with_shape("T", vec![t]), "b"),
    ] {
        let out = dir.path().join(out);
        let report = run_files(FileJob {
            model: &model,
            opts,
            inputs: vec![("x".into(), xp.clone())],
            batch: Some(3),
            output_dir: Some(&out),
            labels: None,
            progress: None,
        })
        .unwrap();
        assert_eq!((report.rows, report.batches), (rows, 3));
        let y = npy::read_npy(&out.join("output_0.npy")).unwrap();
        let want: Vec<f32> = x.chunks(t).map(|r| r.iter().sum()).collect();
        assert_eq!(y.view().to_f32_vec(), want);
    }
    // A --shape disagreeing with the file: one line naming both.
    let err = run_files(FileJob {
        model: &model,
        opts: CompileOptions::default().with_shape("T", vec![4]),
        inputs: vec![("x".into(), xp.clone())],
        batch: Some(3),
        output_dir: None,
        labels: None,
        progress: None,
    })
    .expect_err("a --shape disagreeing with the file is an error")
    .to_string();
    assert!(
        err.contains("x.npy") && err.contains("[5]") && err.contains("[4]"),
        "{err}"
    );
}
