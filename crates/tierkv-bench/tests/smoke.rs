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

/// Runs tierkv-bench with `args` and checks that it succeeded.
fn bench_ok(args: &[&str]) -> std::process::Output {
    let out = bench(args);
    assert!(
        out.status.success(),
        "tierkv-bench {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn every_workload_runs_and_reports() {
    for multiget in ["1", "8"] {
        every_workload_runs_and_reports_with(multiget);
    }
}

/// Every workload with `--multiget N`; the multi-get figures are checked by
/// `multiget_batches_point_reads_and_reports_per_batch_latency`.
fn every_workload_runs_and_reports_with(multiget: &str) {
    let dir = tempfile::tempdir().unwrap();
    for w in WORKLOADS {
        let json = dir.path().join(format!("{w}.json"));
        bench_ok(&[
            "--multiget",
            multiget,
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
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(report["workload"], w);
        assert_eq!(report["multiget"].to_string(), multiget, "{w}");
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
    let out = bench_ok(&[
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
        (vec!["--engine", "tierkv:group+parallel"], "two WAL modes"),
        (vec!["--engine", "tierkv:pl+lad1"], "two placements"),
        (vec!["--inflight", "0"], "--inflight"),
        (vec!["--multiget", "0"], "--multiget"),
        (vec!["--key-size", "4"], "--key-size"),
        (
            vec!["--tier-kind", "fast=optane"],
            "the kinds are block and pm",
        ),
        (vec!["--tier-kind", "warm=pm"], "no tier named"),
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

fn read_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn inflight_drives_the_async_api_on_every_op_kind() {
    let dir = tempfile::tempdir().unwrap();
    // fillrandom --sync: puts; ycsb-a zipfian: gets and puts on hot keys; ycsb-e: scans and
    // inserts; ycsb-f: read-modify-writes (get, then submit_write); readrandom: every key found.
    for (w, sync) in [
        ("fillrandom", true),
        ("ycsb-a", false),
        ("ycsb-e", false),
        ("ycsb-f", false),
        ("readrandom", false),
    ] {
        let json = dir.path().join(format!("{w}-inflight.json"));
        let mut args = vec![
            "--workload",
            w,
            "--records",
            "1500",
            "--ops",
            "1500",
            "--threads",
            "2",
            "--inflight",
            "8",
            "--distribution",
            "zipfian",
            "--zipf-theta",
            "0.99",
            "--value-size",
            "200",
            "--write-buffer-size",
            "262144",
            "--quiet",
            "--dir",
            dir.path().to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ];
        if sync {
            args.push("--sync");
        }
        bench_ok(&args);
        let report = read_json(&json);
        assert_eq!(report["ops"], 1500, "{w}");
        assert_eq!(report["inflight"], 8, "{w}");
        assert_eq!(report["inflight_requested"], 8, "{w}");
        assert!(report["inflight_note"].is_null(), "{w}");
        assert_eq!(report["sync"], sync, "{w}");
        // Lucky reads complete inline and are not counted as admitted requests.
        let submitted =
            report["async_requests"].as_u64().unwrap() + report["lucky_reads"].as_u64().unwrap();
        assert!(
            submitted >= 1500,
            "{w}: every op went through submit_*: {report}"
        );
        assert_eq!(report["wal_io_path"], "group", "{w}");
        assert!(report["latency_us"]["all"]["p99"].as_f64().unwrap() > 0.0);
        assert!(report["cpu_us_per_op"].as_f64().unwrap() > 0.0);
        let found = &report["reads_found"];
        if w == "readrandom" {
            assert_eq!(found["attempted"], 1500);
            assert_eq!(
                found["found"], found["attempted"],
                "every loaded key is found"
            );
        }
        if w == "ycsb-f" {
            // Half the ops are read-modify-writes: each is one read and one write.
            let rmw = report["latency_us"]["rmw"]["count"].as_u64().unwrap();
            assert!(rmw > 500, "{report}");
            assert_eq!(found["attempted"].as_u64().unwrap(), 1500);
        }
    }
}

#[test]
fn wal_profiles_run_side_by_side_with_inflight() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("wal.json");
    let out = bench_ok(&[
        "--compare",
        "tierkv:group,tierkv:parallel,tierkv:pl+parallel",
        "--workload",
        "fillrandom",
        "--sync",
        "--records",
        "2000",
        "--threads",
        "2",
        "--inflight",
        "16",
        "--wal-loggers",
        "2",
        "--write-buffer-size",
        "262144",
        "--quiet",
        "--dir",
        dir.path().to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("comparison (ratios against tierkv:group)"),
        "{stdout}"
    );
    assert!(stdout.contains("WAL io path"), "{stdout}");
    let report = read_json(&json);
    let runs = report.as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[0]["engine"], "tierkv:group");
    assert_eq!(runs[0]["wal_io_path"], "group");
    for r in &runs[1..] {
        assert_eq!(r["ops"], 2000, "{r}");
        assert_eq!(r["inflight"], 16, "{r}");
        let path = r["wal_io_path"].as_str().unwrap();
        assert!(["io_uring", "pwrite"].contains(&path), "{r}");
        assert!(r["wal_runs"].as_u64().unwrap() > 0, "{r}");
        assert!(r["wal_pages_per_run"].as_f64().unwrap() >= 1.0, "{r}");
        assert!(r["wal_writes_per_run"].as_f64().unwrap() > 0.0, "{r}");
        let loggers = r["active_loggers"].as_u64().unwrap();
        assert!((1..=2).contains(&loggers), "{r}");
    }
    // The parallel profile with pl placement keeps no tables on the fast tier.
    assert_eq!(runs[2]["engine"], "tierkv:pl+parallel");
}

#[test]
fn wal_profiles_run_synchronously_too() {
    let dir = tempfile::tempdir().unwrap();
    for engine in ["tierkv:group", "tierkv:parallel"] {
        let json = dir.path().join("sync.json");
        bench_ok(&[
            "--engine",
            engine,
            "--workload",
            "ycsb-a",
            "--distribution",
            "zipfian",
            "--sync",
            "--records",
            "1000",
            "--ops",
            "1000",
            "--write-buffer-size",
            "262144",
            "--quiet",
            "--dir",
            dir.path().to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ]);
        let report = read_json(&json);
        assert_eq!(report["engine"], engine);
        assert_eq!(report["inflight"], 1);
        assert_eq!(report["ops"], 1000);
        assert_eq!(
            report["async_requests"], 0,
            "--inflight 1 stays synchronous"
        );
    }
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_falls_back_to_one_request_in_flight_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("rocks.json");
    let out = bench(&[
        "--compare",
        "rocksdb,tierkv",
        "--workload",
        "fillrandom",
        "--records",
        "1000",
        "--threads",
        "2",
        "--inflight",
        "4",
        "--quiet",
        "--dir",
        dir.path().to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("no asynchronous API"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("NOTE: rocksdb has no asynchronous API"),
        "{stdout}"
    );
    let report = read_json(&json);
    let runs = report.as_array().unwrap();
    assert_eq!(runs[0]["inflight"], 1);
    assert_eq!(runs[0]["inflight_requested"], 4);
    assert!(runs[0]["inflight_note"]
        .as_str()
        .unwrap()
        .contains("falls back"));
    assert_eq!(runs[1]["inflight"], 4);
    assert_eq!(runs[0]["ops"], 1000);
    assert!(runs[0]["wal_io_path"].is_null());
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_rejects_wal_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let out = bench(&[
        "--engine",
        "rocksdb:parallel",
        "--records",
        "10",
        "--quiet",
        "--dir",
        dir.path().to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("tierkv profiles"), "{stderr}");
}

/// Checks a report of a `--multiget` run: reads went through multi-gets of at most `n` keys,
/// one `mget` latency sample each, and ops count keys.
fn check_multiget_report(report: &serde_json::Value, n: u64, ops: u64) {
    let w = &report["workload"];
    assert_eq!(report["multiget"], n, "{w}");
    assert_eq!(report["ops"], ops, "{w}");
    let batches = report["multiget_batches"].as_u64().unwrap();
    assert!(batches > 0, "{w}: {report}");
    let latency = &report["latency_us"];
    assert_eq!(latency["mget"]["count"], batches, "{w}");
    assert!(latency["read"].is_null(), "{w}: no read is issued alone");
    let per_batch = report["multiget_keys_per_batch"].as_f64().unwrap();
    assert!(per_batch > 1.0 && per_batch <= n as f64, "{w}: {per_batch}");
    let note = report["multiget_latency_note"].as_str().unwrap();
    assert!(
        note.contains(&format!("per multi-get of up to {n} keys")),
        "{w}"
    );
}

#[test]
fn multiget_batches_point_reads_and_reports_per_batch_latency() {
    let dir = tempfile::tempdir().unwrap();
    // Synchronous multi_get, then submit_multi_get with 4 in flight.
    for (w, inflight) in [
        ("readrandom", "1"),
        ("ycsb-a", "1"),
        ("ycsb-f", "1"),
        ("readrandom", "4"),
        ("ycsb-a", "4"),
        ("ycsb-f", "4"),
    ] {
        let json = dir.path().join(format!("{w}-{inflight}-mget.json"));
        let out = bench_ok(&[
            "--workload",
            w,
            "--multiget",
            "8",
            "--inflight",
            inflight,
            "--records",
            "1500",
            "--ops",
            "1500",
            "--threads",
            "2",
            "--distribution",
            "zipfian",
            "--value-size",
            "200",
            "--write-buffer-size",
            "262144",
            "--quiet",
            "--dir",
            dir.path().to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("multiget 8"), "{stdout}");
        assert!(
            stdout.contains("NOTE: mget latencies are per multi-get"),
            "{stdout}"
        );
        let report = read_json(&json);
        check_multiget_report(&report, 8, 1500);
        let found = &report["reads_found"];
        if w == "readrandom" {
            assert_eq!(found["attempted"], 1500, "{w}");
            assert_eq!(found["found"], 1500, "{w}: every loaded key is found");
        } else {
            // Updates and read-modify-writes are issued alone, between the batches.
            let single = ["update", "rmw"]
                .iter()
                .filter_map(|k| report["latency_us"][k]["count"].as_u64())
                .sum::<u64>();
            assert!(single > 0, "{w}: {report}");
        }
        if inflight == "4" {
            assert!(report["async_requests"].as_u64().unwrap() > 0, "{w}");
        } else {
            assert_eq!(report["async_requests"], 0, "{w}");
        }
    }
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_and_tierkv_multiget_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("mget.json");
    let out = bench_ok(&[
        "--compare",
        "rocksdb,tierkv",
        "--workload",
        "readrandom",
        "--multiget",
        "8",
        "--records",
        "2000",
        "--ops",
        "2000",
        "--threads",
        "2",
        "--write-buffer-size",
        "262144",
        "--quiet",
        "--dir",
        dir.path().to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("count each multi-get as one sample"),
        "{stdout}"
    );
    let report = read_json(&json);
    for r in report.as_array().unwrap() {
        check_multiget_report(r, 8, 2000);
        let found = &r["reads_found"];
        assert_eq!(found["found"], 2000, "{r}");
        assert_eq!(found["attempted"], 2000, "{r}");
    }
}

#[test]
fn warmup_requests_run_before_the_run_phase_and_are_not_measured() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("warm.json");
    bench_ok(&[
        "--engine",
        "tierkv",
        "--workload",
        "ycsb-c",
        "--records",
        "1000",
        "--ops",
        "1000",
        "--warmup",
        "600",
        "--quiet",
        "--dir",
        dir.path().to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let run = read_json(&json);
    assert_eq!(run["warmup_ops"], 600);
    assert_eq!(run["ops"], 1000);
    assert_eq!(run["reads_found"]["attempted"], 1000);
    // The engine's own counters saw the warm-up's reads as well as the run's.
    let served: u64 = run["reads_served"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(served, 1600, "{run}");
}

#[test]
fn splitkv_runs_on_a_pm_fast_tier_and_reports_its_value_log_space() {
    if !std::path::Path::new("/dev/shm").is_dir() {
        return;
    }
    let fast = tempfile::tempdir_in("/dev/shm").unwrap();
    let capacity = tempfile::tempdir().unwrap();
    let fast_tier = format!("fast={}", fast.path().display());
    let capacity_tier = format!("capacity={}", capacity.path().display());
    let out = bench_ok(&[
        "--engine",
        "tierkv:splitkv",
        "--workload",
        "overwrite",
        "--records",
        "300",
        "--ops",
        "600",
        "--value-size",
        "256:50,4096:50",
        "--tier",
        &fast_tier,
        "--tier",
        &capacity_tier,
        "--tier-kind",
        "fast=pm",
        "--tier-capacity",
        "fast=1M",
        "--collect-value-log",
        "--quiet",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("value log: at the end of the run"),
        "{stdout}"
    );
    assert!(stdout.contains("after collection"), "{stdout}");
}
