//! End to end: the server binary on a loopback port, driven by the `redis` crate, by
//! `redis-cli`, and by raw sockets for what no client sends.

mod common;

use common::{exchange, have, read_for, run_to_exit, tier_flags, Server};
use redis::Value;
use std::collections::BTreeSet;
use std::io::Write;
use std::process::Command;
use std::time::Duration;

fn cmd(name: &str) -> redis::Cmd {
    redis::cmd(name)
}

#[test]
fn strings_counters_and_scan() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut con = server.client();
    let ok: String = cmd("SET").arg("a").arg("1").query(&mut con).unwrap();
    assert_eq!(ok, "OK");
    let n: i64 = cmd("INCRBY").arg("a").arg(41).query(&mut con).unwrap();
    assert_eq!(n, 42);
    let n: i64 = cmd("DECR").arg("a").query(&mut con).unwrap();
    assert_eq!(n, 41);
    let len: i64 = cmd("APPEND").arg("a").arg("x").query(&mut con).unwrap();
    assert_eq!(len, 3);
    let err = cmd("INCR").arg("a").query::<i64>(&mut con).unwrap_err();
    assert!(err.to_string().contains("not an integer"), "{err}");
    let _: () = cmd("MSET")
        .arg("b")
        .arg("2")
        .arg("c")
        .arg("3")
        .query(&mut con)
        .unwrap();
    let got: Vec<Option<String>> = cmd("MGET")
        .arg(&["a", "b", "zz", "c"])
        .query(&mut con)
        .unwrap();
    assert_eq!(
        got,
        vec![Some("41x".into()), Some("2".into()), None, Some("3".into())]
    );
    let n: i64 = cmd("EXISTS")
        .arg(&["a", "zz", "a"])
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 2);
    let old: Option<String> = cmd("SET")
        .arg("b")
        .arg("20")
        .arg("XX")
        .arg("GET")
        .query(&mut con)
        .unwrap();
    assert_eq!(old.as_deref(), Some("2"));
    let nx: Option<String> = cmd("SET")
        .arg("b")
        .arg("x")
        .arg("NX")
        .query(&mut con)
        .unwrap();
    assert_eq!(nx, None);
    let old: Option<String> = cmd("GETSET").arg("new").arg("v").query(&mut con).unwrap();
    assert_eq!(old, None);
    let n: i64 = cmd("DEL")
        .arg(&["a", "a", "zz", "new"])
        .query(&mut con)
        .unwrap();
    assert_eq!(n, 2);
    let n: i64 = cmd("STRLEN").arg("b").query(&mut con).unwrap();
    assert_eq!(n, 2);
    for i in 0..300 {
        let _: () = cmd("SET")
            .arg(format!("k{i:03}"))
            .arg(i)
            .query(&mut con)
            .unwrap();
    }
    let n: i64 = cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(n, 302);
    let mut seen = BTreeSet::new();
    let mut cursor = 0u64;
    for _ in 0..1000 {
        let (next, keys): (u64, Vec<String>) = cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("k1*")
            .arg("COUNT")
            .arg(17)
            .query(&mut con)
            .unwrap();
        for k in keys {
            assert!(seen.insert(k.clone()), "{k} returned twice");
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(cursor, 0, "the scan ended");
    assert_eq!(seen.len(), 100);
    let err = cmd("SCAN").arg(777).query::<Value>(&mut con).unwrap_err();
    assert!(err.to_string().contains("invalid cursor"), "{err}");
}

#[test]
fn pipelines_keep_each_connection_s_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--durability", "sync"]);
    let mut con = server.client();
    let mut pipe = redis::pipe();
    for i in 0..400 {
        pipe.cmd("SET").arg("k").arg(i).ignore();
        pipe.cmd("GET").arg("k");
        pipe.cmd("INCR").arg("n").ignore();
        pipe.cmd("SET").arg(format!("other{i}")).arg(i).ignore();
    }
    pipe.cmd("GET").arg("n");
    let got: Vec<i64> = pipe.query(&mut con).unwrap();
    let expect: Vec<i64> = (0..400).chain([400]).collect();
    assert_eq!(got, expect);
}

#[test]
fn concurrent_increments_are_atomic() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut con = server.client();
            std::thread::spawn(move || {
                for _ in 0..100 {
                    let _: i64 = cmd("INCR").arg("hot").query(&mut con).unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let n: i64 = cmd("GET").arg("hot").query(&mut server.client()).unwrap();
    assert_eq!(n, 400);
}

#[test]
fn introspection_commands() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--durability", "sync"]);
    let mut con = server.client();
    let info: String = cmd("INFO").query(&mut con).unwrap();
    for field in [
        "# Server",
        "# Clients",
        "# Persistence",
        "# Tiers",
        "# Stats",
        "appendfsync:always",
        "tier0:name=fast",
        "connected_clients:1",
    ] {
        assert!(info.contains(field), "INFO lacks {field}: {info}");
    }
    let info: String = cmd("INFO").arg("tiers").query(&mut con).unwrap();
    assert!(!info.contains("# Server"), "{info}");
    let cfg: Vec<String> = cmd("CONFIG")
        .arg("GET")
        .arg("append*")
        .query(&mut con)
        .unwrap();
    assert_eq!(cfg, vec!["appendonly", "yes", "appendfsync", "always"]);
    let n: i64 = cmd("COMMAND").arg("COUNT").query(&mut con).unwrap();
    assert!(n > 20);
    let docs: Value = cmd("COMMAND").arg("DOCS").query(&mut con).unwrap();
    assert!(
        matches!(docs, Value::Array(ref v) if v.is_empty())
            || matches!(docs, Value::Map(ref v) if v.is_empty()),
        "{docs:?}"
    );
    let err = cmd("FOO")
        .arg("a")
        .arg("b")
        .query::<Value>(&mut con)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("unknown command 'FOO', with args beginning with: 'a' 'b'"),
        "{err}"
    );
    let err = cmd("FLUSHALL").query::<Value>(&mut con).unwrap_err();
    assert!(err.to_string().contains("--enable-flushall"), "{err}");
    let err = cmd("SELECT").arg(1).query::<Value>(&mut con).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
    let _: () = cmd("SELECT").arg(0).query(&mut con).unwrap();
}

#[test]
fn flushall_when_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--enable-flushall"]);
    let mut con = server.client();
    let mut pipe = redis::pipe();
    for i in 0..50 {
        pipe.cmd("SET").arg(i).arg(i).ignore();
    }
    pipe.cmd("FLUSHALL")
        .ignore()
        .cmd("DBSIZE")
        .cmd("GET")
        .arg(7);
    let (n, v): (i64, Option<String>) = pipe.query(&mut con).unwrap();
    assert_eq!((n, v), (0, None));
}

#[test]
fn resp3_after_hello_3() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    let (out, _) = exchange(
        &mut s,
        b"HELLO 3\r\nGET missing\r\nCONFIG GET port\r\nHELLO 2\r\nGET missing\r\n",
        Duration::from_millis(500),
    );
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.starts_with("%7\r\n$6\r\nserver\r\n$6\r\ntierkv\r\n"),
        "{text}"
    );
    assert!(text.contains("_\r\n%1\r\n$4\r\nport\r\n"), "{text}");
    assert!(text.ends_with("$-1\r\n"), "{text}");
    let (out, _) = exchange(&mut s, b"HELLO 4\r\n", Duration::from_millis(300));
    assert_eq!(out, b"-NOPROTO unsupported protocol version\r\n");
}

#[test]
fn redis_cli_works_unchanged() {
    if !have("redis-cli") {
        println!("SKIPPED: redis-cli is not installed (Debian package redis-tools)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let port = server.port().to_string();
    let cli = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(["-p", &port])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(cli(&["SET", "greeting", "hello world"]), "OK\n");
    assert_eq!(cli(&["GET", "greeting"]), "hello world\n");
    assert_eq!(cli(&["INCR", "n"]), "1\n");
    assert_eq!(cli(&["--scan", "--pattern", "g*"]), "greeting\n");
    assert!(cli(&["INFO", "server"]).contains("redis_mode:standalone"));
    assert!(cli(&["NOPE"]).contains("unknown command 'NOPE'"));
    // Commands on stdin, as a script would pipe them (redis-cli asks COMMAND DOCS first
    // when it is interactive; that must not break it either).
    let mut child = Command::new("redis-cli")
        .args(["-p", &port])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"PING\nCOMMAND DOCS\nGET n\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("PONG\n") && text.ends_with("1\n"),
        "{text}"
    );
}

#[test]
fn synced_writes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    synced_writes_survive_kill_9_with(Server::start(dir.path(), &["--durability", "sync"]));
}

/// What the server sets on 4 cores or more (`server_engine_defaults`), forced by a config
/// file so that a 2-core machine tests it too: the writes of a group inserted into the
/// memtable by several threads at once.
#[test]
fn synced_writes_survive_kill_9_with_parallel_memtable_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("server.toml");
    std::fs::write(
        &config,
        "[wal]\nconcurrent_memtable_writes = true\nconcurrent_memtable_min_ops = 2\n\
         [pipeline]\nworkers = 4\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let server = Server::start(dir.path(), &["--durability", "sync", "--config", config]);
    let writers: Vec<_> = (0..4)
        .map(|c| {
            let mut con = server.client();
            std::thread::spawn(move || {
                let mut pipe = redis::pipe();
                for i in 0..300 {
                    pipe.cmd("SET").arg(format!("w{c}-{i}")).arg(i).ignore();
                }
                let () = pipe.query(&mut con).unwrap();
            })
        })
        .collect();
    writers.into_iter().for_each(|t| t.join().unwrap());
    let parallel = info_stat(&mut server.client(), "engine_parallel_insert_groups");
    assert!(parallel > 0, "no group was inserted in parallel");
    let server = synced_writes_survive_kill_9_with(server);
    let mut con = server.client();
    for c in 0..4 {
        let keys: Vec<String> = (0..300).map(|i| format!("w{c}-{i}")).collect();
        let got: Vec<Option<i64>> = cmd("MGET").arg(&keys).query(&mut con).unwrap();
        assert!(
            got.iter().enumerate().all(|(i, v)| *v == Some(i as i64)),
            "lost writes of writer {c}: {got:?}"
        );
    }
}

/// Writes 500 keys and a counter with sync durability, kills the server with SIGKILL and
/// restarts it: everything acknowledged is there. Returns the restarted server.
fn synced_writes_survive_kill_9_with(mut server: Server) -> Server {
    let mut con = server.client();
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.cmd("SET").arg(format!("d{i}")).arg(i).ignore();
    }
    pipe.cmd("INCRBY").arg("total").arg(500).ignore();
    let () = pipe.query(&mut con).unwrap();
    server.kill9();
    let server = server.restart();
    let mut con = server.client();
    let keys: Vec<String> = (0..500).map(|i| format!("d{i}")).collect();
    let got: Vec<Option<i64>> = cmd("MGET").arg(&keys).query(&mut con).unwrap();
    assert!(
        got.iter().enumerate().all(|(i, v)| *v == Some(i as i64)),
        "lost writes: {got:?}"
    );
    let n: i64 = cmd("GET").arg("total").query(&mut con).unwrap();
    assert_eq!(n, 500);
    server
}

#[test]
fn sigterm_finishes_in_flight_requests_and_closes() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--durability", "buffered"]);
    let mut con = server.client();
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.cmd("SET").arg(format!("g{i}")).arg(i).ignore();
    }
    let () = pipe.query(&mut con).unwrap();
    drop(con);
    let (status, err) = server.terminate();
    assert!(status.success(), "{status:?}: {err}");
    assert!(err.contains("shut down cleanly"), "{err}");
    // Buffered writes are kept by a clean close.
    let server = server.restart();
    let n: i64 = cmd("DBSIZE").query(&mut server.client()).unwrap();
    assert_eq!(n, 2000);
}

#[test]
fn auth_is_required_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--requirepass", "s3cret"]);
    let mut s = server.raw();
    let (out, _) = exchange(
        &mut s,
        b"GET a\r\nAUTH wrong\r\nAUTH s3cret\r\nSET a 1\r\nGET a\r\n",
        Duration::from_millis(500),
    );
    assert_eq!(
        String::from_utf8_lossy(&out),
        "-NOAUTH Authentication required.\r\n\
         -WRONGPASS invalid username-password pair or user is disabled.\r\n\
         +OK\r\n+OK\r\n$1\r\n1\r\n"
    );
    let client = redis::Client::open(format!("redis://:s3cret@{}/", server.addr)).unwrap();
    let mut con = client.get_connection().unwrap();
    let v: i64 = cmd("GET").arg("a").query(&mut con).unwrap();
    assert_eq!(v, 1);
    // Before AUTH, a client cannot make the server buffer a large request.
    let mut s = server.raw();
    let (out, closed) = exchange(
        &mut s,
        b"*2\r\n$3\r\nGET\r\n$1000000\r\n",
        Duration::from_secs(5),
    );
    assert_eq!(
        String::from_utf8_lossy(&out),
        "-ERR Protocol error: unauthenticated bulk length\r\n"
    );
    assert!(closed);
}

#[test]
fn refuses_to_listen_beyond_loopback_without_a_password() {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = ["--bind", "0.0.0.0", "--port", "0"]
        .map(String::from)
        .to_vec();
    args.extend(tier_flags(dir.path()));
    let (status, err) = run_to_exit(&args);
    assert_eq!(status.code(), Some(1));
    assert!(
        err.contains("refusing to listen on 0.0.0.0 without a password"),
        "{err}"
    );
}

#[test]
fn a_second_server_on_the_same_tiers_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let _first = Server::start(dir.path(), &[]);
    let mut args: Vec<String> = ["--port", "0"].map(String::from).to_vec();
    args.extend(tier_flags(dir.path()));
    let (status, err) = run_to_exit(&args);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("already open in another process"), "{err}");
}

#[test]
fn malformed_and_oversized_requests_close_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        &["--max-request-size", "64KiB", "--max-args", "100"],
    );
    let cases: [(&[u8], &str); 5] = [
        (
            b"*1\r\n$4\r\nPING\r\n*x\r\n",
            "+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*2\r\n$3\r\nGET\r\n$100000\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*101\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n:5\r\n",
            "-ERR Protocol error: expected '$', got ':'\r\n",
        ),
        (
            b"GET \"open\r\n",
            "-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
    ];
    for (input, expect) in cases {
        let mut s = server.raw();
        let (out, closed) = exchange(&mut s, input, Duration::from_secs(5));
        assert_eq!(String::from_utf8_lossy(&out), expect);
        assert!(closed, "closed after {input:?}");
    }
    // A line with no end is cut off at the inline limit rather than buffered.
    let mut s = server.raw();
    let (out, closed) = exchange(&mut s, &vec![b'a'; 70_000], Duration::from_secs(5));
    assert_eq!(
        String::from_utf8_lossy(&out),
        "-ERR Protocol error: too big inline request\r\n"
    );
    assert!(closed);
    // Clients vanishing mid-request leave the server serving.
    for partial in [
        &b"*3\r\n$3\r\nSET\r\n$1\r\nk"[..],
        b"*2\r\n$3\r\nGET\r\n",
        b"SET k",
    ] {
        let mut s = server.raw();
        s.write_all(partial).unwrap();
    }
    let pong: String = cmd("PING").query(&mut server.client()).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn idle_and_stalled_clients_time_out() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--timeout", "1"]);
    let mut slow = server.raw();
    slow.write_all(b"*2\r\n$3\r\nGET").unwrap();
    let (_, closed) = read_for(&mut slow, Duration::from_secs(5));
    assert!(closed, "an idle, half-sent request is dropped");
    // A client that sends but never reads: the server stops reading from it (its queue is
    // bounded), then gives up writing to it, and meanwhile serves others.
    let mut con = server.client();
    let _: () = cmd("SET")
        .arg("big")
        .arg(vec![b'v'; 256 << 10])
        .query(&mut con)
        .unwrap();
    let mut hog = server.raw();
    hog.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let get = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n".repeat(64);
    for _ in 0..200 {
        if hog.write_all(&get).is_err() {
            break;
        }
    }
    let pong: String = cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    std::thread::sleep(Duration::from_millis(2500));
    let (_, closed) = read_for(&mut hog, Duration::from_secs(10));
    assert!(closed, "the server gave up on a client that does not read");
    let info: String = cmd("INFO")
        .arg("stats")
        .query(&mut server.client())
        .unwrap();
    assert!(!info.contains("timed_out_clients:0"), "{info}");
}

#[test]
fn maxclients_refuses_extra_connections() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--maxclients", "2"]);
    let _a = server.client();
    let _b = server.client();
    let mut c = server.raw();
    let (out, _) = read_for(&mut c, Duration::from_secs(3));
    assert_eq!(
        String::from_utf8_lossy(&out),
        "-ERR max number of clients reached\r\n"
    );
}

#[test]
fn engine_busy_becomes_backpressure() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("server.toml");
    std::fs::write(&config, "max_pending_requests = 2\npipeline_workers = 1\n").unwrap();
    let server = Server::start(dir.path(), &["--config", config.to_str().unwrap()]);
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let mut con = server.client();
            std::thread::spawn(move || {
                let mut pipe = redis::pipe();
                for i in 0..300 {
                    pipe.cmd("SET").arg(format!("c{c}k{i}")).arg(i).ignore();
                    pipe.cmd("GET").arg(format!("c{c}k{}", i / 2));
                }
                let got: Vec<i64> = pipe.query(&mut con).unwrap();
                assert_eq!(got, (0..300).map(|i| i / 2).collect::<Vec<i64>>());
            })
        })
        .collect();
    clients.into_iter().for_each(|t| t.join().unwrap());
    let info: String = cmd("INFO")
        .arg("stats")
        .query(&mut server.client())
        .unwrap();
    let busy = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    };
    assert!(busy("engine_busy_rejections:") > 0, "{info}");
    assert!(busy("busy_backoffs:") > 0, "{info}");
}

/// One counter of `INFO stats`.
fn info_stat(con: &mut redis::Connection, name: &str) -> u64 {
    let info: String = cmd("INFO").arg("stats").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("INFO stats lacks {name}: {info}"))
}

#[test]
fn pipelined_replies_that_miss_the_memtable_share_a_write() {
    let dir = tempfile::tempdir().unwrap();
    // Keys in tables, not in a memtable: every GET is served by an engine worker.
    let mut load = tier_flags(dir.path());
    load.extend(["--bench-load", "500", "--bench-value-size", "100"].map(String::from));
    let (status, err) = run_to_exit(&load);
    assert!(status.success(), "{err}");
    // One worker and no block cache, so that the GETs complete well after they are queued.
    let config = dir.path().join("server.toml");
    std::fs::write(&config, "pipeline_workers = 1\n").unwrap();
    let flags = ["--config", config.to_str().unwrap(), "--block-cache", "0"];
    let server = Server::start(dir.path(), &flags);
    let mut con = server.client();
    let lucky_before = info_stat(&mut con, "engine_lucky_reads");
    let writes_before = info_stat(&mut con, "reply_writes");
    let mut pipe = redis::pipe();
    for i in 0..200 {
        pipe.cmd("GET").arg(format!("key:{:012}", (i * 7) % 500));
    }
    let got: Vec<Vec<u8>> = pipe.query(&mut con).unwrap();
    assert_eq!(got, vec![vec![b'x'; 100]; 200]);
    // NB: the counter is read before the INFO reply that shows it is written.
    let writes = info_stat(&mut con, "reply_writes") - writes_before - 1;
    let lucky = info_stat(&mut con, "engine_lucky_reads") - lucky_before;
    assert_eq!(lucky, 0, "the GETs were to miss the memtable");
    // Typically 1-3 writes; the bound leaves room for a loaded machine splitting the
    // pipeline across reads (one write per reply would be 200).
    assert!(
        writes <= 10,
        "200 pipelined GETs took {writes} reply writes; expected them to share a few"
    );
}
