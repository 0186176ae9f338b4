//! Replays the fuzz targets' stored inputs on stable Rust, through the same drivers the
//! libFuzzer targets run (`fuzz/src/drivers.rs`): every input that once crashed a target
//! (`fuzz/regressions/<target>/`) and every seed (`fuzz/seeds/<target>/`). A driver panics on
//! a decoder panic, an untyped rejection or a failed round trip, and the test names the file.

#[path = "../fuzz/src/drivers.rs"]
mod drivers;

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files of `dir/<target>/`, sorted; none if the folder is absent.
fn inputs(dir: &str, target: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(fuzz_dir().join(dir).join(target)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("readable folder").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(dir: &str) -> usize {
    let mut n = 0;
    for &(target, driver) in drivers::TARGETS {
        for file in inputs(dir, target) {
            let data = std::fs::read(&file).expect("readable input");
            let run = std::panic::catch_unwind(|| driver(&data));
            assert!(run.is_ok(), "{target}: {} fails", file.display());
            n += 1;
        }
    }
    n
}

#[test]
fn found_inputs_stay_fixed() {
    replay("regressions");
}

#[test]
fn seeds_decode_cleanly() {
    assert!(replay("seeds") >= drivers::TARGETS.len());
}

#[test]
fn stored_inputs_belong_to_a_target() {
    for dir in ["regressions", "seeds"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(dir)) else {
            continue;
        };
        for e in entries {
            let name = e.expect("readable folder").file_name();
            let name = name.to_string_lossy();
            assert!(
                drivers::TARGETS.iter().any(|(t, _)| *t == name),
                "{dir}/{name} is not a fuzz target"
            );
        }
    }
}

/// Small structured inputs for every driver, so the drivers themselves are checked on stable.
#[test]
fn drivers_take_edge_inputs() {
    let mut inputs: Vec<Vec<u8>> = vec![Vec::new(), vec![0], vec![0xff; 64], vec![0; 4096 * 3]];
    inputs.extend((0u8..=255).map(|c| {
        let mut v = vec![c];
        v.extend((0..200u32).map(|i| (i * 31 + u32::from(c)) as u8));
        v
    }));
    for &(target, driver) in drivers::TARGETS {
        for data in &inputs {
            let run = std::panic::catch_unwind(|| driver(data));
            assert!(run.is_ok(), "{target} fails on {data:?}");
        }
    }
}
