//! A short run of every workload on tierkv through the real binary, checking the JSON report.

use std::process::Command;

const WORKLOADS: [&str; 13] = [
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom",
    "readseq",
    "scanrandom",
    "ycsb-a",
    "ycsb-b",
    "ycsb-c",
    "ycsb-d",
    "ycsb-e",
    "ycsb-f",
    "multiphase",
];

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tierkv-bench"))
        .args(args)
        .output()
        .expect("run tierkv-bench")
}

#[test]
fn every_workload_runs_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    for w in WORKLOADS {
        let json = dir.path().join(format!("{w}.json"));
        let out = bench(&[
            "--workload",
            w,
            "--records",
            "2000",
            "--ops",
            "2000",
            "--threads",
            "2",
            "--value-size",
            "100:50,1000:50",
            "--distribution",
            "zipfian",
            "--write-buffer-size",
            "262144",
            "--quiet",
            "--dir",
            dir.path().to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{w}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(report["workload"], w);
        assert_eq!(report["engine"], "tierkv");
        assert_eq!(report["ops"], 2000, "{w}");
        assert!(report["throughput_ops_per_sec"].as_f64().unwrap() > 0.0);
        for field in ["p50", "p90", "p99", "p999", "max"] {
            assert!(
                report["latency_us"]["all"][field].as_f64().is_some(),
                "{w} {field}"
            );
        }
        assert!(report["tiers"]["fast"]["bytes_written"].as_u64().is_some());
        assert!(report["cpu_seconds"]["user"].as_f64().is_some());
        assert!(report["reads_served"]["memtable"].as_u64().is_some());
        if ["readrandom", "ycsb-b", "ycsb-c"].contains(&w) {
            let found = &report["reads_found"];
            assert_eq!(
                found["found"], found["attempted"],
                "{w}: every loaded key is found"
            );
        }
    }
}

#[test]
fn compare_prints_ratios_and_writes_both_records() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cmp.json");
    let out = bench(&[
        "--compare",
        "tierkv:pl,tierkv:lad1",
        "--workload",
        "ycsb-a",
        "--records",
        "1000",
        "--ops",
        "1000",
        "--quiet",
        "--dir",
        dir.path().to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("comparison (ratios against tierkv:pl)"),
        "{stdout}"
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report.as_array().unwrap().len(), 2);
}

#[test]
fn invalid_arguments_are_clear_errors_not_panics() {
    for (args, needle) in [
        (vec!["--workload", "ycsb-z"], "unknown workload"),
        (vec!["--threads", "0"], "--threads"),
        (vec!["--distribution", "pareto"], "unknown distribution"),
        (vec!["--zipf-theta", "1.5"], "--zipf-theta"),
        (vec!["--value-size", "big"], "--value-size"),
        (vec!["--engine", "leveldb"], "unknown engine"),
        (vec!["--engine", "tierkv:lad9"], "unknown profile"),
        (vec!["--key-size", "4"], "--key-size"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut all = args.clone();
        all.extend([
            "--records",
            "10",
            "--quiet",
            "--dir",
            dir.path().to_str().unwrap(),
        ]);
        let out = bench(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
