//! ONNX's backend node tests as a conformance suite (owner: tooling).
//!
//! `scripts/gen_conformance.py` writes the 1,884 node cases of the pinned onnx package into
//! `ARENAC_ONNX_NODE_DIR` (`bash scripts/test.sh` does it, into `.cache/onnx-node/`). Every case
//! is compiled the way `arenac run --input` compiles a model — each input's value is given, and
//! an input whose value decides a shape (Reshape's shape, Slice's starts, ...) is compiled in as
//! a constant while the others stay run-time inputs — run in a `Session`, and every output is
//! compared with the case's expected output: same dtype, same shape, values within the case's
//! `atol + rtol * |expected|` (NaN equals NaN), as ONNX's own backend runner does.
//!
//! `tests/conformance/manifest.tsv` records each case's status (pass / fail / unsupported). The
//! test fails when a case's measured status differs from the manifest in either direction (a
//! claimed pass that no longer passes, or a new pass the manifest does not claim), and when the
//! README's ops table is not the one the manifest gives. `ARENAC_CONFORMANCE_UPDATE=1` rewrites
//! both instead. It prints pass / fail / unsupported counts per op.
//!
//! Cases run in child processes (this test binary re-run with `ARENAC_CONFORMANCE_WORKER`), a
//! chunk of cases each, so a crash in generated code is recorded as that case's failure instead
//! of ending the suite.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use arenac::conformance::{Entry, MANIFEST, Status, op_rows, ops_markdown, parse_manifest};
use arenac::io::TensorBuf;
use arenac::io::pb::read_pb;
use arenac::{CompileOptions, DType, Session, TensorRef, compile_file};
use arenac_compiler::ir::lowp;

/// Set in a worker process: the file listing the cases it runs.
const WORKER_ENV: &str = "ARENAC_CONFORMANCE_WORKER";
/// Cases per worker process.
const CHUNK: usize = 48;
/// Marker of a result line in a worker's stdout.
const RESULT_MARK: &str = "@@case\t";

/// One line of the generated `index.tsv`.
#[derive(Clone, Debug)]
struct Case {
    name: String,
    op: String,
    rtol: f64,
    atol: f64,
    io: String,
    dtypes: Vec<String>,
}

fn node_dir() -> Option<PathBuf> {
    let dir = std::env::var("ARENAC_ONNX_NODE_DIR")
        .ok()
        .filter(|s| !s.is_empty());
    if dir.is_none() {
        println!(
            "ARENAC_ONNX_NODE_DIR is unset: skipping (bash scripts/test.sh generates the node \
             cases and sets it)"
        );
    }
    dir.map(PathBuf::from)
}

fn read_index(dir: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(dir.join("index.tsv"))
        .unwrap_or_else(|e| panic!("{}/index.tsv: {e}", dir.display()));
    text.lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 6, "index.tsv line '{l}'");
            Case {
                name: f[0].into(),
                op: f[1].into(),
                rtol: f[2].parse().expect("rtol"),
                atol: f[3].parse().expect("atol"),
                io: f[4].into(),
                dtypes: f[5]
                    .split(',')
                    .filter(|s| *s != "-")
                    .map(String::from)
                    .collect(),
            }
        })
        .collect()
}

/// Reads `dir/{prefix}_K.pb` for K = 0, 1, ... while they exist.
fn read_tensors(dir: &Path, prefix: &str) -> Result<Vec<(TensorBuf, String)>, String> {
    let mut out = Vec::new();
    for k in 0.. {
        let path = dir.join(format!("{prefix}_{k}.pb"));
        if !path.exists() {
            break;
        }
        // The reason without the (machine-specific) path.
        let (t, name) = read_pb(&path).map_err(|e| match e {
            arenac::io::IoError::Format { reason, .. } => format!("{prefix} {k}: {reason}"),
            other => other.to_string(),
        })?;
        out.push((t, name.unwrap_or_default()));
    }
    Ok(out)
}

/// Runs one case: every data set compiled (with its values) and run.
fn run_case(dir: &Path, case: &Case) -> (Status, String) {
    if case.io != "tensor" {
        return (
            Status::Unsupported,
            format!(
                "inputs or outputs are {} values: arenac compiles graphs of tensors only",
                case.io
            ),
        );
    }
    let case_dir = dir.join(&case.name);
    let mut data_dirs: Vec<PathBuf> = std::fs::read_dir(&case_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    data_dirs.sort();
    if data_dirs.is_empty() {
        return (Status::Fail, "no data set".into());
    }
    for data in &data_dirs {
        let inputs = match read_tensors(data, "input") {
            Ok(v) => v,
            Err(e) => return (Status::Unsupported, e),
        };
        let expected = match read_tensors(data, "output") {
            Ok(v) => v,
            Err(e) => return (Status::Unsupported, e),
        };
        let mut opts = CompileOptions::default();
        for (t, name) in &inputs {
            opts = opts.with_value(name.clone(), t.view());
        }
        let model = match compile_file(&case_dir.join("model.onnx"), &opts) {
            Ok(m) => m,
            Err(e) => return (Status::Unsupported, e.to_string()),
        };
        let frozen: Vec<&str> = model.frozen().iter().map(|f| f.name.as_str()).collect();
        let feeds: Vec<(&str, TensorRef<'_>)> = inputs
            .iter()
            .filter(|(_, n)| !frozen.contains(&n.as_str()))
            .map(|(t, n)| (n.as_str(), t.view()))
            .collect();
        let mut session = match Session::new(&model) {
            Ok(s) => s,
            Err(e) => return (Status::Fail, format!("session: {e}")),
        };
        let outputs = match session.run(&feeds) {
            Ok(o) => o,
            Err(e) => return (Status::Fail, format!("run: {e}")),
        };
        if outputs.len() != expected.len() {
            return (
                Status::Fail,
                format!("{} outputs, expected {}", outputs.len(), expected.len()),
            );
        }
        for (k, (want, name)) in expected.iter().enumerate() {
            let Some(got) = outputs.get(k) else {
                return (Status::Fail, format!("no output {k}"));
            };
            if let Err(e) = compare(got, want, case.rtol, case.atol) {
                return (Status::Fail, format!("output '{name}': {e}"));
            }
        }
    }
    (Status::Pass, String::new())
}

/// An element as a number: floats as f64, integers and bools exactly.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Num {
    F(f64),
    I(i128),
}

fn decode(dtype: DType, bytes: &[u8]) -> Vec<Num> {
    let n = dtype.size();
    bytes
        .chunks_exact(n)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(c);
            let u = u64::from_le_bytes(b);
            match dtype {
                DType::F32 => Num::F(f64::from(f32::from_bits(u as u32))),
                DType::F64 => Num::F(f64::from_bits(u)),
                DType::F16 => Num::F(half::f16::from_bits(u as u16).to_f64()),
                DType::BF16 => Num::F(half::bf16::from_bits(u as u16).to_f64()),
                DType::I8 => Num::I(i128::from(u as u8 as i8)),
                DType::I16 => Num::I(i128::from(u as u16 as i16)),
                DType::I32 => Num::I(i128::from(u as u32 as i32)),
                DType::I64 => Num::I(i128::from(u as i64)),
                DType::U8 | DType::U16 | DType::U32 | DType::U64 | DType::Bool => {
                    Num::I(i128::from(u))
                }
                DType::I4 | DType::U4 | DType::I2 | DType::U2 => {
                    Num::I(i128::from(lowp::decode_int(dtype, u as u8)))
                }
                DType::F8E4M3FN
                | DType::F8E4M3FNUZ
                | DType::F8E5M2
                | DType::F8E5M2FNUZ
                | DType::F8E8M0
                | DType::F4E2M1 => Num::F(f64::from(lowp::decode_float(dtype, u as u8))),
            }
        })
        .collect()
}

/// `assert_allclose(expected, got, rtol, atol, equal_nan=True)` plus exact dtype and shape.
fn compare(got: TensorRef<'_>, want: &TensorBuf, rtol: f64, atol: f64) -> Result<(), String> {
    if got.dtype() != want.dtype() {
        return Err(format!(
            "dtype {}, expected {}",
            got.dtype().name(),
            want.dtype().name()
        ));
    }
    if got.shape() != want.shape() {
        return Err(format!(
            "shape {:?}, expected {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let (a, b) = (
        decode(got.dtype(), got.bytes()),
        decode(want.dtype(), want.bytes()),
    );
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let ok = match (*x, *y) {
            (Num::F(x), Num::F(y)) => {
                (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= atol + rtol * y.abs()
            }
            (x, y) => x == y,
        };
        if !ok {
            return Err(format!("[{i}] = {x:?}, expected {y:?}"));
        }
    }
    Ok(())
}

/// Worker side: runs the cases listed in the file named by `WORKER_ENV`, one result line each,
/// flushed as it goes (so a crash loses only the case being run).
#[test]
fn worker() {
    let Some(list) = std::env::var_os(WORKER_ENV) else {
        return;
    };
    let Some(dir) = node_dir() else { return };
    let wanted: Vec<String> = std::fs::read_to_string(&list)
        .expect("worker list")
        .lines()
        .map(String::from)
        .collect();
    let index: HashMap<String, Case> = read_index(&dir)
        .into_iter()
        .map(|c| (c.name.clone(), c))
        .collect();
    let mut out = std::io::stdout().lock();
    for name in &wanted {
        let case = &index[name];
        let (status, detail) = catch_unwind(AssertUnwindSafe(|| run_case(&dir, case)))
            .unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                (Status::Fail, format!("panic: {msg}"))
            });
        let detail: String = detail
            .chars()
            .map(|c| if c == '\t' || c == '\n' { ' ' } else { c })
            .take(300)
            .collect();
        writeln!(out, "{RESULT_MARK}{name}\t{}\t{detail}", status.as_str()).unwrap();
        out.flush().unwrap();
    }
}

/// Runs `names` in one worker process; returns the results it printed and how it ended.
fn spawn_worker(
    dir: &Path,
    names: &[String],
    tag: usize,
) -> (Vec<(String, Status, String)>, String) {
    let list = std::env::temp_dir().join(format!(
        "arenac-conformance-{}-{tag}.txt",
        std::process::id()
    ));
    std::fs::write(&list, names.join("\n")).expect("write worker list");
    let exe = std::env::current_exe().expect("current exe");
    let out = Command::new(exe)
        .args(["worker", "--exact", "--nocapture", "--test-threads=1"])
        .env(WORKER_ENV, &list)
        .env("ARENAC_ONNX_NODE_DIR", dir)
        .output()
        .expect("spawn worker");
    let _ = std::fs::remove_file(&list);
    let text = String::from_utf8_lossy(&out.stdout);
    let results = text
        .lines()
        .filter_map(|l| l.find(RESULT_MARK).map(|i| &l[i + RESULT_MARK.len()..]))
        .filter_map(|l| {
            let mut f = l.splitn(3, '\t');
            let name = f.next()?.to_string();
            let status = match f.next()? {
                "pass" => Status::Pass,
                "fail" => Status::Fail,
                _ => Status::Unsupported,
            };
            Some((name, status, f.next().unwrap_or("").to_string()))
        })
        .collect();
    (results, format!("{}", out.status))
}

/// Runs every case in worker processes, two at a time (one per core of the CI machine).
fn run_all(dir: &Path, cases: &[Case]) -> HashMap<String, (Status, String)> {
    let queue: Mutex<Vec<Vec<String>>> = Mutex::new(
        cases
            .chunks(CHUNK)
            .rev()
            .map(|c| c.iter().map(|c| c.name.clone()).collect())
            .collect(),
    );
    let results = Mutex::new(HashMap::new());
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 4);
    let tag = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let Some(chunk) = queue.lock().unwrap().pop() else {
                        return;
                    };
                    let t = tag.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let (got, how) = spawn_worker(dir, &chunk, t);
                    let done = got.len();
                    let mut r = results.lock().unwrap();
                    for (name, st, detail) in got {
                        r.insert(name, (st, detail));
                    }
                    if done < chunk.len() {
                        // The worker died on chunk[done]: record it, requeue the rest.
                        r.insert(
                            chunk[done].clone(),
                            (Status::Fail, format!("the worker process died ({how})")),
                        );
                        if done + 1 < chunk.len() {
                            queue.lock().unwrap().push(chunk[done + 1..].to_vec());
                        }
                    }
                }
            });
        }
    });
    results.into_inner().unwrap()
}

const TABLE_BEGIN: &str = "<!-- ops-table:begin (generated from tests/conformance/manifest.tsv by tests/onnx_node.rs) -->\n";
const TABLE_END: &str = "<!-- ops-table:end -->";

fn readme_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")
}

/// The README with its ops table replaced by `table`; `None` when the markers are missing.
fn readme_with_table(readme: &str, table: &str) -> Option<String> {
    let start = readme.find(TABLE_BEGIN)? + TABLE_BEGIN.len();
    let end = readme[start..].find(TABLE_END)? + start;
    Some(format!("{}{table}{}", &readme[..start], &readme[end..]))
}

#[test]
fn onnx_node_conformance() {
    if std::env::var_os(WORKER_ENV).is_some() {
        return;
    }
    let Some(dir) = node_dir() else { return };
    let mut cases = read_index(&dir);
    // `ARENAC_CONFORMANCE_OPS=Floor,Ceil`: only those ops' cases, counts and failures printed,
    // nothing compared or written (for working on an op).
    let only: Option<Vec<String>> = std::env::var("ARENAC_CONFORMANCE_OPS")
        .ok()
        .map(|s| s.split(',').map(|o| o.trim().to_string()).collect());
    if let Some(ops) = &only {
        cases.retain(|c| ops.contains(&c.op));
    }
    let results = run_all(&dir, &cases);
    let measured: Vec<Entry> = cases
        .iter()
        .map(|c| {
            let (status, detail) = results
                .get(&c.name)
                .cloned()
                .unwrap_or((Status::Fail, "no result".into()));
            Entry {
                case: c.name.clone(),
                op: c.op.clone(),
                status,
                dtypes: c.dtypes.clone(),
                detail,
            }
        })
        .collect();

    // Counts per op.
    let rows = op_rows(&measured);
    for r in &rows {
        println!(
            "{:<28} pass {:>3}  fail {:>3}  unsupported {:>3}{}",
            r.op,
            r.pass,
            r.fail,
            r.unsupported,
            if r.full() { "" } else { "  " }.to_string() + if r.full() { "" } else { &r.reason }
        );
    }
    let pass = measured.iter().filter(|e| e.status == Status::Pass).count();
    let fail = measured.iter().filter(|e| e.status == Status::Fail).count();
    println!(
        "conformance: {pass} of {} cases pass, {fail} fail, {} unsupported; {} of {} ops pass every case",
        measured.len(),
        measured.len() - pass - fail,
        rows.iter().filter(|r| r.full()).count(),
        rows.len()
    );
    for e in measured.iter().filter(|e| e.status != Status::Pass) {
        let word = if e.status == Status::Fail {
            "FAIL"
        } else {
            "UNSUPPORTED"
        };
        println!("{word} {} ({}): {}", e.case, e.op, e.detail);
    }
    if only.is_some() {
        return;
    }

    let table = ops_markdown(&measured);
    let readme = std::fs::read_to_string(readme_path()).expect("README.md");
    if std::env::var_os("ARENAC_CONFORMANCE_UPDATE").is_some() {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/manifest.tsv");
        std::fs::write(&manifest, arenac::conformance::write_manifest(&measured))
            .expect("write manifest");
        let new = readme_with_table(&readme, &table).expect("README ops-table markers");
        std::fs::write(readme_path(), new).expect("write README");
        println!("updated {} and README.md", manifest.display());
        return;
    }

    // The manifest must be what was measured.
    let claimed: BTreeMap<String, Entry> = parse_manifest(MANIFEST)
        .expect("manifest")
        .into_iter()
        .map(|e| (e.case.clone(), e))
        .collect();
    let mut problems = Vec::new();
    for e in &measured {
        match claimed.get(&e.case) {
            None => problems.push(format!("{}: not in the manifest", e.case)),
            Some(c) if c.status == Status::Pass && e.status != Status::Pass => {
                problems.push(format!(
                    "{} ({}): claimed to pass, now {}: {}",
                    e.case,
                    e.op,
                    e.status.as_str(),
                    e.detail
                ))
            }
            Some(c) if c.status != e.status => problems.push(format!(
                "{} ({}): manifest says {}, measured {}",
                e.case,
                e.op,
                c.status.as_str(),
                e.status.as_str()
            )),
            Some(_) => {}
        }
    }
    if claimed.len() != measured.len() {
        problems.push(format!(
            "the manifest has {} cases, the generated suite {}",
            claimed.len(),
            measured.len()
        ));
    }
    if readme_with_table(&readme, &table).as_deref() != Some(readme.as_str()) {
        problems.push("README.md's ops table is not the one the measured results give".into());
    }
    assert!(
        problems.is_empty(),
        "{}\n(after a deliberate change: ARENAC_CONFORMANCE_UPDATE=1 bash scripts/test.sh -p \
         arenac-tests --test onnx_node, then review the diff)",
        problems.join("\n")
    );
}
