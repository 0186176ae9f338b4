//! Test harness: a `tierkv-server` process on a loopback port of its own, killed on drop, and
//! small raw-socket helpers for feeding the server bytes no client library would send.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Longest a server may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A running server; killed (SIGKILL) when dropped.
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its tier directories, kept for a restart.
    pub tiers: Vec<String>,
    /// The extra flags it was started with.
    pub flags: Vec<String>,
}

/// Tier flags for a database under `dir`.
pub fn tier_flags(dir: &Path) -> Vec<String> {
    vec![
        "--tier".into(),
        format!("fast={}", dir.join("fast").display()),
        "--tier".into(),
        format!("capacity={}", dir.join("capacity").display()),
    ]
}

/// The built server binary.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tierkv-server"))
}

impl Server {
    /// Starts a server on a free loopback port with its database under `dir`.
    pub fn start(dir: &Path, flags: &[&str]) -> Server {
        let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        Server::start_with(tier_flags(dir), flags, 0)
    }

    /// Starts a server with these tier flags, extra flags and port (0: any free one).
    pub fn start_with(tiers: Vec<String>, flags: Vec<String>, port: u16) -> Server {
        let mut child = Command::new(binary())
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(&tiers)
            .args(&flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tierkv-server");
        let addr = read_address(&mut child);
        Server {
            child,
            addr,
            tiers,
            flags,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// A client of the `redis` crate connected to it.
    pub fn client(&self) -> redis::Connection {
        let client = redis::Client::open(format!("redis://{}/", self.addr)).unwrap();
        let con = client
            .get_connection_with_timeout(Duration::from_secs(10))
            .unwrap();
        con.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        con
    }

    /// A raw socket to it, with a read timeout.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// SIGKILL, and wait for it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM; waits (bounded) for the exit and returns its status and stderr.
    pub fn terminate(&mut self) -> (ExitStatus, String) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let deadline = Instant::now() + Duration::from_secs(40);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "server did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (status, err)
    }

    /// A new server on the same tiers, flags and port.
    pub fn restart(&self) -> Server {
        Server::start_with(self.tiers.clone(), self.flags.clone(), self.port())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Reads `tierkv-server listening on ADDR` from the child's stdout (bounded in time).
fn read_address(child: &mut Child) -> SocketAddr {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = match rx.recv_timeout(START_TIMEOUT) {
        Ok(line) => line,
        Err(_) => {
            let _ = child.kill();
            panic!("tierkv-server printed no address in {START_TIMEOUT:?}");
        }
    };
    let Some(addr) = line.trim().strip_prefix("tierkv-server listening on ") else {
        let _ = child.kill();
        let mut err = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut err);
        panic!("unexpected first line {line:?}; stderr: {err}");
    };
    addr.parse().unwrap()
}

/// Runs the server binary to completion (for start-up failures); bounded in time.
pub fn run_to_exit(args: &[String]) -> (ExitStatus, String) {
    let mut child = Command::new(binary())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status, err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tierkv-server {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes `bytes`, then reads until the server closes the connection or `wait` passes.
pub fn exchange(stream: &mut TcpStream, bytes: &[u8], wait: Duration) -> (Vec<u8>, bool) {
    stream.write_all(bytes).unwrap();
    read_for(stream, wait)
}

/// Reads until the peer closes (true) or `wait` passes (false).
pub fn read_for(stream: &mut TcpStream, wait: Duration) -> (Vec<u8>, bool) {
    let deadline = Instant::now() + wait;
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (out, false);
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (out, true),
            Err(_) => return (out, false),
        }
    }
}

/// True if `program` runs (`program --version`).
pub fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
