//! Replays every fuzz corpus on the stable toolchain, in the normal test run: each input that
//! once exercised new code must still be handled without a panic (`fuzz/corpus/<target>/`).

use std::path::Path;

#[test]
fn import_bytes_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/import_bytes");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fuzz corpus directory")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(files.len() > 100, "corpus has only {} inputs", files.len());
    for f in &files {
        let data = std::fs::read(f).expect("read corpus input");
        arenac_tests::fuzz_import_bytes(&data);
    }
    println!("replayed {} inputs", files.len());
}
