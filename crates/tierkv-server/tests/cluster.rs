//! Scale-out behind twemproxy (`nutcracker`): keys written through the proxy land on exactly
//! one shard; a killed shard fails only its own keys; restarted, it serves them again with
//! every acknowledged (sync) write. Skips with a notice where nutcracker is not installed
//! (`.ci/run` installs it).

mod common;

use common::{have, Server};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SHARDS: usize = 3;
const KEYS: usize = 300;

/// A nutcracker process, killed on drop.
struct Proxy {
    child: Child,
    port: u16,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts nutcracker in front of `shards` with the settings cluster.sh writes.
fn start_proxy(dir: &Path, shards: &[Server]) -> Proxy {
    let port = free_port();
    let mut conf = format!(
        "tierkv:\n  listen: 127.0.0.1:{port}\n  hash: fnv1a_64\n  distribution: ketama\n  \
         redis: true\n  auto_eject_hosts: false\n  timeout: 1000\n  servers:\n"
    );
    for (i, s) in shards.iter().enumerate() {
        conf.push_str(&format!("   - {}:1 shard{i}\n", s.addr));
    }
    let path = dir.join("nutcracker.yml");
    std::fs::write(&path, conf).unwrap();
    let child = Command::new("nutcracker")
        .arg("-c")
        .arg(&path)
        .args(["-a", "127.0.0.1", "-s", &free_port().to_string()])
        .arg("-o")
        .arg(dir.join("nutcracker.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let proxy = Proxy { child, port };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nutcracker did not start listening"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    proxy
}

fn connect(port: u16) -> redis::Connection {
    use redis::IntoConnectionInfo;
    // NB: twemproxy closes a connection that sends CLIENT, which the redis crate sends on
    // connect unless told not to.
    let info = format!("redis://127.0.0.1:{port}/")
        .into_connection_info()
        .unwrap();
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    let client = redis::Client::open(info.set_redis_settings(settings)).unwrap();
    let con = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap();
    con.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    con
}

fn key(i: usize) -> String {
    format!("user:{i}")
}

/// Which shard holds each key, read from the shards directly.
fn owners(shards: &[Server]) -> Vec<usize> {
    let mut cons: Vec<_> = shards.iter().map(Server::client).collect();
    (0..KEYS)
        .map(|i| {
            let holders: Vec<usize> = (0..shards.len())
                .filter(|&s| {
                    let v: Option<String> =
                        redis::cmd("GET").arg(key(i)).query(&mut cons[s]).unwrap();
                    v.is_some()
                })
                .collect();
            assert_eq!(holders.len(), 1, "{} is on shards {holders:?}", key(i));
            holders[0]
        })
        .collect()
}

#[test]
fn keys_spread_over_shards_and_survive_a_shard_restart() {
    if !have("nutcracker") {
        println!("SKIPPED: nutcracker is not installed (Debian package nutcracker)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut shards: Vec<Server> = (0..SHARDS)
        .map(|i| {
            Server::start(
                &dir.path().join(format!("shard{i}")),
                &["--durability", "sync"],
            )
        })
        .collect();
    let proxy = start_proxy(dir.path(), &shards);
    let mut con = connect(proxy.port);
    for i in 0..KEYS {
        let _: () = redis::cmd("SET")
            .arg(key(i))
            .arg(i)
            .query(&mut con)
            .unwrap();
    }
    let owner = owners(&shards);
    for s in 0..SHARDS {
        let n = owner.iter().filter(|&&o| o == s).count();
        // NB: ketama's spread over three names is uneven; every shard must get some keys.
        assert!(n > 0, "shard {s} holds none of {KEYS} keys");
    }

    let victim = (0..SHARDS)
        .max_by_key(|&s| owner.iter().filter(|&&o| o == s).count())
        .unwrap();
    shards[victim].kill9();
    let mut con = connect(proxy.port);
    for (i, &o) in owner.iter().enumerate() {
        let got = redis::cmd("GET").arg(key(i)).query::<Option<i64>>(&mut con);
        match got {
            Ok(v) => {
                assert_ne!(o, victim, "{} answered from a dead shard", key(i));
                assert_eq!(v, Some(i as i64));
            }
            Err(e) => {
                assert_eq!(o, victim, "{} failed but its shard is up: {e}", key(i));
                // The proxy may close the client connection after a server error.
                con = connect(proxy.port);
            }
        }
    }

    shards[victim] = shards[victim].restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut pending: Vec<usize> = (0..KEYS).filter(|&i| owner[i] == victim).collect();
    while !pending.is_empty() {
        assert!(
            Instant::now() < deadline,
            "{} keys still failing after the restart",
            pending.len()
        );
        let mut con = connect(proxy.port);
        pending.retain(|&i| {
            let got = redis::cmd("GET").arg(key(i)).query::<Option<i64>>(&mut con);
            match got {
                Ok(v) => {
                    assert_eq!(v, Some(i as i64), "{} lost after the restart", key(i));
                    false
                }
                Err(_) => true,
            }
        });
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
