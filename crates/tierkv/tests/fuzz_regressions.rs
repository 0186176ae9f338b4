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

/// The seeds of the newer formats are well formed, so the fuzzers start from inputs that
/// decode all the way: the append logs and the zoned device replay their writes, the slot,
/// journal, record and pointer decode to what `make_seeds.py` wrote.
#[test]
fn seeds_of_the_newer_formats_decode_to_their_contents() {
    use std::path::Path;
    use tierkv::env::{FaultFs, Fs};
    use tierkv::inspect::{self, SplitValue};
    use tierkv::RecoveryMode;
    let seed = |target: &str, n: usize| {
        std::fs::read(fuzz_dir().join(format!("seeds/{target}/seed-{n}"))).expect("seed")
    };
    let fs = FaultFs::new(0);
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    fs.write_raw(&dir.join("WALZONES"), &seed("wal_zoned", 0)[1..]);
    let zones = inspect::read_zoned_device(fs.as_ref(), &dir.join("WALZONES")).unwrap();
    let states: Vec<_> = zones.iter().map(|z| (z.state, z.write_pointer)).collect();
    assert_eq!(
        states,
        [("CLOSED", 1536), ("EMPTY", 0), ("EMPTY", 0), ("FULL", 4096)]
    );
    let replayed = inspect::replay_logs(fs.as_ref(), dir, 0, RecoveryMode::PointInTime).unwrap();
    let seqs: Vec<_> = replayed.iter().map(|(s, b)| (*s, b.len())).collect();
    assert_eq!(seqs, [(1, 2), (3, 1)]);

    let raw = seed("wal_append", 2);
    let first = inspect::decode_append_record(&raw[1..]).unwrap();
    assert_eq!((first.log, first.seq, first.batch.len()), (5, 7, 1));
    let second = inspect::decode_append_record(&raw[1 + first.len as usize..]).unwrap();
    assert_eq!((second.synced, second.seq), (8, 8));

    let slot = inspect::decode_hot_slot(&seed("hot_slot", 0)[1..])
        .unwrap()
        .unwrap();
    assert_eq!((slot.seq, slot.kind), (0x0102, "value"));
    assert_eq!((&slot.key[..], &slot.value[..]), (&b"ab"[..], &b"xyz"[..]));

    fs.create_dir_all(Path::new("/db/hot")).unwrap();
    let journal = Path::new("/db/hot/HOT-JOURNAL");
    fs.write_raw(journal, &seed("hot_journal", 0)[1..]);
    let j = inspect::read_hot_journal(fs.as_ref(), journal)
        .unwrap()
        .unwrap();
    assert_eq!((j.log_number, j.lowest, j.pages.len()), (4, 9, 1));

    fs.write_raw(Path::new("/db/hot/PARTITIONS"), &seed("hot_partitions", 0));
    let parts = inspect::read_hot_partitions(fs.as_ref(), Path::new("/db/hot")).unwrap();
    assert_eq!(parts, 4);

    let (k, v) = inspect::decode_value_record(&seed("vlog_value", 0)[1..]).unwrap();
    assert_eq!((&k[..], &v[..]), (&b"k1"[..], &b"val"[..]));
    let pointer = inspect::decode_split_value(&seed("vlog_value", 1)[1..]).unwrap();
    assert_eq!(
        pointer,
        SplitValue::Pointer {
            file: 3,
            offset: 300,
            len: 17
        }
    );
}

#[test]
fn a_zonefs_metadata_zone_without_a_snapshot_decodes_to_nothing() {
    use tierkv::inspect;
    let zeros = vec![0u8; 8192];
    assert_eq!(inspect::scan_zonefs_journal(&zeros, 4096).unwrap(), None);
    let err = inspect::scan_zonefs_journal(&zeros, 1000).unwrap_err();
    assert!(matches!(err, tierkv::Error::InvalidArgument(_)), "{err:?}");
    // The driver's sealed header with an empty body: a commit with no snapshot, so none.
    drivers::zonefs_journal(&[0; 64]);
    drivers::zonefs_journal(&[1; 600]);
}
