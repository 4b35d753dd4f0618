//! Replays every fuzz corpus on the stable toolchain, in the normal test run: each input that
//! once exercised new code must still be handled without a panic (`fuzz/corpus/<target>/`).
//! Also a fixed sweep of pseudo-random inputs through the structure-aware targets, so their
//! generator and checks run even where a corpus is small, and the seeding of the corpora
//! from the fixtures (`seed_corpora_from_fixtures`, ignored: it writes files).

use std::path::{Path, PathBuf};

use arenac_tests::fuzzing::source::Rng;
use arenac_tests::fuzzing::{fuzz_graph_plan, fuzz_jit_diff};

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fuzz corpus {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

fn replay(target: &str, min: usize, body: impl Fn(&[u8]) + std::panic::RefUnwindSafe) {
    let files = corpus(target);
    assert!(
        files.len() >= min,
        "{target} corpus has only {} inputs",
        files.len()
    );
    for f in &files {
        let data = std::fs::read(f).expect("read corpus input");
        let result = std::panic::catch_unwind(|| body(&data));
        if let Err(e) = result {
            std::panic::resume_unwind(Box::new(format!(
                "{target}: {} fails: {:?}",
                f.display(),
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            )));
        }
    }
    println!("replayed {} {target} inputs", files.len());
}

#[test]
fn import_bytes_corpus() {
    replay("import_bytes", 100, arenac_tests::fuzz_import_bytes);
}

#[test]
fn graph_plan_corpus() {
    replay("graph_plan", 20, fuzz_graph_plan);
}

#[test]
fn jit_diff_corpus() {
    replay("jit_diff", 20, |d| {
        fuzz_jit_diff(d);
    });
}

/// Prints the graph one input decodes to and runs it through one target:
/// `FUZZ_INPUT=path FUZZ_TARGET=jit_diff cargo test -p arenac-tests --test fuzz_replay -- --ignored replay_one --nocapture`.
#[test]
#[ignore]
fn replay_one() {
    use arenac_compiler::import::{ImportOptions, import_model};
    use arenac_tests::fuzzing::graph_gen::random_model;
    use arenac_tests::fuzzing::source::Source;
    let Some(path) = std::env::var_os("FUZZ_INPUT") else {
        return;
    };
    let data = std::fs::read(path).expect("read FUZZ_INPUT");
    let target = std::env::var("FUZZ_TARGET").unwrap_or_else(|_| "jit_diff".into());
    let mode = data.first().map_or(0, |b| b % 4);
    if mode != 3 && (mode != 0 || target == "jit_diff") {
        let mut src = Source::new(&data);
        src.byte();
        src.byte();
        let max = if target == "jit_diff" { 12 } else { 24 };
        let m = random_model(&mut src, max);
        match import_model(&m.model, None, &ImportOptions::default()) {
            Ok(i) => eprintln!("{}", arenac_compiler::ir::print::print_graph(&i.graph)),
            Err(e) => eprintln!("import: {e}"),
        }
    }
    match target.as_str() {
        "graph_plan" => fuzz_graph_plan(&data),
        "import_bytes" => arenac_tests::fuzz_import_bytes(&data),
        _ => eprintln!("ran and matched: {}", fuzz_jit_diff(&data)),
    }
}

/// `n` pseudo-random byte strings of 16 to 200 bytes.
fn sweep(n: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let len = 16 + (rng.next_u64() % 185) as usize;
            (0..len).map(|_| rng.next_u64() as u8).collect()
        })
        .collect()
}

#[test]
fn graph_plan_random_sweep() {
    for data in sweep(1500, 0x9e37_79b9_7f4a_7c15) {
        fuzz_graph_plan(&data);
    }
}

#[test]
fn jit_diff_random_sweep() {
    let inputs = sweep(300, 0x2545_f491_4f6c_dd1d);
    let mut ran = 0;
    for mut data in inputs.clone() {
        data[0] &= !3; // a generated graph, not a model file
        if std::env::var_os("FUZZ_DEBUG").is_some() {
            eprintln!("{data:?}");
        }
        ran += fuzz_jit_diff(&data) as usize;
    }
    // Every generated op has a kernel: (nearly) every graph must run and match.
    assert!(
        ran * 10 >= inputs.len() * 9,
        "only {ran} of {} graphs ran",
        inputs.len()
    );
}

/// Writes `fuzz/corpus/{graph_plan,jit_diff}/fixture-<family>-<name>`: each fixture that
/// parses, encoded as a `ModelProto` behind the two bytes that select the model-file mode
/// (`3`) and the plan options, with its `# shapes:` header bound into the inputs' dims.
/// Run once with `cargo test -p arenac-tests --test fuzz_replay -- --ignored`.
#[test]
#[ignore]
fn seed_corpora_from_fixtures() {
    use arenac_compiler::import::text::parse_model_text;
    use arenac_proto::tensor_shape_proto::dimension::Value as DimValue;
    use arenac_proto::type_proto;
    use prost::Message;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    for fx in arenac_tests::list_fixtures() {
        if fx.expects_error() {
            continue;
        }
        let src = fx.source();
        let Ok(mut model) = parse_model_text(&src) else {
            continue;
        };
        let shapes = arenac_tests::header_shapes(&src);
        if let Some(g) = model.graph.as_mut() {
            for input in &mut g.input {
                let full = shapes.iter().find(|(n, _)| Some(n) == input.name.as_ref());
                let Some(type_proto::Value::TensorType(t)) =
                    input.r#type.as_mut().and_then(|t| t.value.as_mut())
                else {
                    continue;
                };
                let Some(shape) = t.shape.as_mut() else {
                    continue;
                };
                for (i, d) in shape.dim.iter_mut().enumerate() {
                    let bound = match (&d.value, full) {
                        (_, Some((_, dims))) => dims.get(i).copied(),
                        (Some(DimValue::DimParam(p)), None) => shapes
                            .iter()
                            .find(|(n, dims)| n == p && dims.len() == 1)
                            .map(|(_, dims)| dims[0]),
                        _ => None,
                    };
                    if let Some(b) = bound {
                        d.value = Some(DimValue::DimValue(b as i64));
                    }
                }
            }
        }
        let mut bytes = vec![3u8, 0b0010_1110];
        bytes.extend(model.encode_to_vec());
        for target in ["graph_plan", "jit_diff"] {
            let dir = root.join(target);
            std::fs::create_dir_all(&dir).expect("corpus dir");
            let path = dir.join(format!("fixture-{}-{}", fx.family, fx.name));
            std::fs::write(path, &bytes).expect("write seed");
        }
    }
}
