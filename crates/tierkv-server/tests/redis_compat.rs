//! Redis 7 compatibility: raw RESP and inline exchanges that pin the server's replies byte for
//! byte to what Redis 7.0 answers to the same bytes (each expected reply below was checked
//! against `redis-server` 7.0.15 with `--save '' --appendonly no`): HELLO, AUTH and client
//! names, the order of NOAUTH and argument errors, parser limits, SET and counter options,
//! SCAN, RESP3, pipelining, QUIT and shutdown, and durability across a crash.

mod common;

use common::{exchange, read_for, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A RESP multibulk request.
fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Sends `bytes`, then reads until at least `expect.len()` bytes came back (or 10 s passed),
/// and checks they are exactly `expect`.
fn talk(s: &mut TcpStream, bytes: &[u8], expect: &[u8]) {
    s.write_all(bytes).unwrap();
    let got = read_at_least(s, expect.len());
    assert_eq!(
        got.escape_ascii().to_string(),
        expect.escape_ascii().to_string(),
        "reply to {:?}",
        bytes.escape_ascii().to_string()
    );
}

fn read_at_least(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while out.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => out.extend_from_slice(&buf[..k]),
        }
    }
    out
}

/// Reads until `lines` CRLF-terminated lines arrived (for replies that are all one line).
fn read_lines(s: &mut TcpStream, lines: usize) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while out.windows(2).filter(|w| w == b"\r\n").count() < lines {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => out.extend_from_slice(&buf[..k]),
        }
    }
    out
}

fn hello_map(proto: u8, id: u64) -> Vec<u8> {
    let head = if proto == 3 { "%7" } else { "*14" };
    format!(
        "{head}\r\n$6\r\nserver\r\n$6\r\ntierkv\r\n$7\r\nversion\r\n${}\r\n{}\r\n\
         $5\r\nproto\r\n:{proto}\r\n$2\r\nid\r\n:{id}\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n\
         $4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n",
        env!("CARGO_PKG_VERSION").len(),
        env!("CARGO_PKG_VERSION"),
    )
    .into_bytes()
}

/// This connection's client id (CLIENT ID).
fn client_id(s: &mut TcpStream) -> u64 {
    s.write_all(b"CLIENT ID\r\n").unwrap();
    let got = read_lines(s, 1);
    let text = String::from_utf8(got).unwrap();
    text.trim()
        .strip_prefix(':')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("CLIENT ID answered {text:?}"))
}

// ---------------------------------------------------------------------------------------------
// HELLO, AUTH and authentication
// ---------------------------------------------------------------------------------------------

/// HELLO's SETNAME is checked like CLIENT SETNAME, before anything else happens:
/// `HELLO 3 SETNAME "a b"` is `-ERR Client names cannot contain spaces, newlines or special
/// characters.` and neither the protocol nor the name changes.
#[test]
fn hello_setname_refuses_names_with_spaces_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    talk(
        &mut s,
        &resp(&[b"HELLO", b"3", b"SETNAME", b"a b"]),
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    );
    // Still RESP2, and no name.
    talk(&mut s, b"CLIENT GETNAME\r\n", b"$-1\r\n");
}

/// `HELLO 2 SETNAME ""` clears the name (as `CLIENT SETNAME ""` does), so CLIENT GETNAME is
/// nil.
#[test]
fn hello_setname_empty_clears_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    let id = client_id(&mut s);
    talk(&mut s, b"CLIENT SETNAME old\r\n", b"+OK\r\n");
    talk(
        &mut s,
        &resp(&[b"HELLO", b"2", b"SETNAME", b""]),
        &hello_map(2, id),
    );
    talk(&mut s, b"CLIENT GETNAME\r\n", b"$-1\r\n");
}

/// Without requirepass, Redis's `default` user has `nopass`: `AUTH default <anything>` and
/// `HELLO 3 AUTH default <anything>` succeed (client libraries configured with a user name
/// send exactly these, so a RESP3 client configured with a password can connect to a server
/// that has none), and an unknown user is WRONGPASS. Only the one-argument `AUTH pw` gets the
/// "called without any password configured" error.
#[test]
fn auth_with_a_user_name_succeeds_when_no_password_is_configured() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    let id = client_id(&mut s);
    talk(
        &mut s,
        b"AUTH whatever\r\n",
        b"-ERR AUTH <password> called without any password configured for the default user. \
          Are you sure your configuration is correct?\r\n",
    );
    talk(&mut s, b"AUTH default x\r\n", b"+OK\r\n");
    talk(&mut s, b"HELLO 3 AUTH default x\r\n", &hello_map(3, id));
    talk(
        &mut s,
        b"AUTH bob x\r\n",
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
}

/// HELLO's protocol version is checked before its options: `HELLO 4 FOO` is
/// `-NOPROTO unsupported protocol version`, not a syntax error.
#[test]
fn hello_checks_the_protocol_version_before_its_options() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    talk(
        &mut s,
        b"HELLO 4 FOO\r\n",
        b"-NOPROTO unsupported protocol version\r\n",
    );
}

/// NOAUTH answers any known command (with the right arity) that a client may not run before
/// AUTH, before its arguments are looked at: not `ERR syntax error`, `ERR value is not an
/// integer` or the CONFIG SET text. Unknown commands and wrong arity come first.
#[test]
fn unauthenticated_commands_get_noauth_before_argument_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--requirepass", "pw"]);
    let mut s = server.raw();
    talk(
        &mut s,
        b"FOO\r\nGET\r\n",
        b"-ERR unknown command 'FOO', with args beginning with: \r\n\
          -ERR wrong number of arguments for 'get' command\r\n",
    );
    talk(
        &mut s,
        b"SET k v FOO\r\nINCRBY k x\r\nCONFIG SET a b\r\nSCAN x\r\n",
        b"-NOAUTH Authentication required.\r\n-NOAUTH Authentication required.\r\n\
          -NOAUTH Authentication required.\r\n-NOAUTH Authentication required.\r\n",
    );
}

/// An inline command is at most 64 KiB anyway, and the unauthenticated multibulk and bulk
/// limits apply only to RESP multibulk requests: an inline `DEL a b ... k` (11 arguments)
/// before AUTH is answered NOAUTH and the connection stays open.
#[test]
fn unauthenticated_inline_command_with_many_args_gets_noauth_and_stays_open() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--requirepass", "pw"]);
    let mut s = server.raw();
    let (out, _) = exchange(
        &mut s,
        b"DEL a b c d e f g h i j k\r\nPING\r\n",
        Duration::from_millis(500),
    );
    assert_eq!(
        out.escape_ascii().to_string(),
        "-NOAUTH Authentication required.\\r\\n-NOAUTH Authentication required.\\r\\n"
    );
}

// ---------------------------------------------------------------------------------------------
// Commands, parsing, pipelining and durability
// ---------------------------------------------------------------------------------------------

/// Pipelined SETs are merged into one write batch, but never beyond the database's own batch
/// limit (`Options::max_batch_bytes`: one parallel-WAL page group, `wal.group_bytes`, by
/// default twice `write_buffer_size`; a zone append with `wal = "zoned"`), so SETs that each
/// fit succeed when pipelined too, as with Redis. Sent here: four pipelined SETs of 40 KiB
/// with a 64 KiB group.
#[test]
fn merged_pipelined_sets_stay_within_the_engine_batch_limit() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("server.toml");
    std::fs::write(&config, "[wal]\ngroup_bytes = \"64KiB\"\n").unwrap();
    let server = Server::start(dir.path(), &["--config", config.to_str().unwrap()]);
    let mut s = server.raw();
    let value = vec![b'v'; 40 << 10];
    // One at a time, each fits.
    talk(&mut s, &resp(&[b"SET", b"alone", &value]), b"+OK\r\n");
    // Grow the connection's read buffer, so a whole pipeline can arrive in one read.
    let echo = vec![b'e'; 512 << 10];
    s.write_all(&resp(&[b"ECHO", &echo])).unwrap();
    let echoed = format!("${}\r\n", echo.len()).len() + echo.len() + 2;
    assert_eq!(read_at_least(&mut s, echoed).len(), echoed);
    // NB: whether the four SETs are merged depends on how the server's reads split the
    // pipeline; a few rounds make a merge near certain.
    for round in 0..10 {
        let mut pipeline = Vec::new();
        for k in 0..4 {
            let key = format!("k{k}");
            pipeline.extend(resp(&[b"SET", key.as_bytes(), &value]));
        }
        s.write_all(&pipeline).unwrap();
        let got = read_lines(&mut s, 4);
        assert_eq!(
            String::from_utf8_lossy(&got),
            "+OK\r\n+OK\r\n+OK\r\n+OK\r\n",
            "round {round}: pipelined SETs of 40 KiB, each within the database's batch limit"
        );
    }
}

#[test]
fn set_options_getset_and_arity_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    let mut req = Vec::new();
    for args in [
        &[&b"SET"[..], b"k", b"v", b"NX", b"NX"][..],
        &[b"SET", b"k", b"w", b"XX", b"GET"],
        &[b"SET", b"k", b"x", b"KEEPTTL"],
        &[b"SET", b"k", b"y", b"GET", b"NX"],
        &[b"SET", b"k", b"v", b"NX", b"XX"],
        &[b"SET", b"k", b"v", b"FOO"],
        &[b"GETSET", b"k", b"z"],
        &[b"GETSET", b"k"],
        &[b"GET", b"k", b"x"],
        &[b"SET", b"k"],
        &[b"GETSET", b"nokey", b"1"],
        &[b"SET", b"nokey2", b"1", b"XX", b"GET"],
        &[b"GET", b"nokey2"],
        &[b"DEL", b"k", b"nokey"],
    ] {
        req.extend(resp(args));
    }
    talk(
        &mut s,
        &req,
        b"+OK\r\n$1\r\nv\r\n+OK\r\n$1\r\nx\r\n-ERR syntax error\r\n-ERR syntax error\r\n\
          $1\r\nx\r\n-ERR wrong number of arguments for 'getset' command\r\n\
          -ERR wrong number of arguments for 'get' command\r\n\
          -ERR wrong number of arguments for 'set' command\r\n$-1\r\n$-1\r\n$-1\r\n:2\r\n",
    );
}

#[test]
fn counters_match_redis_including_overflow_and_bad_integers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    let mut req = Vec::new();
    req.extend(resp(&[b"INCRBY", b"n", b"9223372036854775807"]));
    req.extend(resp(&[b"INCR", b"n"]));
    req.extend(resp(&[b"DECRBY", b"n", b"-9223372036854775808"]));
    req.extend(resp(&[b"INCRBY", b"n", b"x"]));
    for bad in [
        &b"1.5"[..],
        b"00",
        b" 1",
        b"-0",
        b"+1",
        b"9223372036854775808",
        b"",
    ] {
        req.extend(resp(&[b"SET", b"i", bad]));
        req.extend(resp(&[b"INCR", b"i"]));
    }
    req.extend(resp(&[b"SET", b"i", b"-9223372036854775808"]));
    req.extend(resp(&[b"DECR", b"i"]));
    req.extend(resp(&[b"INCRBY", b"i", b"-1"]));
    req.extend(resp(&[b"DECRBY", b"i", b"1"]));
    req.extend(resp(&[b"GET", b"i"]));
    let not_int = "+OK\r\n-ERR value is not an integer or out of range\r\n".repeat(7);
    let expect = format!(
        ":9223372036854775807\r\n-ERR increment or decrement would overflow\r\n\
         -ERR decrement would overflow\r\n-ERR value is not an integer or out of range\r\n\
         {not_int}+OK\r\n{ovf}{ovf}{ovf}$20\r\n-9223372036854775808\r\n",
        ovf = "-ERR increment or decrement would overflow\r\n"
    );
    talk(&mut s, &req, expect.as_bytes());
}

#[test]
fn missing_keys_duplicates_empty_and_binary_keys_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    let bin_key = b"a\r\nb\x00*";
    let bin_val = b"v\r\n\x00$-1\r\n";
    let mut req = Vec::new();
    for args in [
        &[&b"APPEND"[..], b"ap", b"x"][..],
        &[b"STRLEN", b"nope"],
        &[b"MSET", b"a"],
        &[b"MSET", b"a", b"1", b"b"],
        &[b"EXISTS", b"a", b"a"],
        &[b"MSET", b"a", b"1", b"a", b"2"],
        &[b"EXISTS", b"a", b"a", b"nope"],
        &[b"GET", b"a"],
        &[b"DEL", b"a", b"a"],
        &[b"SET", b"", b""],
        &[b"GET", b""],
        &[b"STRLEN", b""],
        &[b"EXISTS", b""],
        &[b"APPEND", b"", b"xy"],
        &[b"SET", bin_key, bin_val],
        &[b"GET", bin_key],
        &[b"MGET", bin_key, b"", b"nope"],
        &[b"DEL", bin_key, b"", b"ap"],
        &[b"DBSIZE"],
    ] {
        req.extend(resp(args));
    }
    talk(
        &mut s,
        &req,
        b":1\r\n:0\r\n-ERR wrong number of arguments for 'mset' command\r\n\
          -ERR wrong number of arguments for 'mset' command\r\n:0\r\n+OK\r\n:2\r\n$1\r\n2\r\n:1\r\n\
          +OK\r\n$0\r\n\r\n:0\r\n:1\r\n:2\r\n+OK\r\n$9\r\nv\r\n\x00$-1\r\n\r\n\
          *3\r\n$9\r\nv\r\n\x00$-1\r\n\r\n$2\r\nxy\r\n$-1\r\n:3\r\n:0\r\n",
    );
}

#[test]
fn inline_commands_and_empty_requests_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    talk(
        &mut s,
        b"SET \"a\\x41\\z\" \"x\\\\\"\r\nGET aAz\r\n\r\n\n   \r\n*0\r\n*-1\r\nECHO 'it\\'s'\r\n\
          ECHO \"\\x4\"\r\nECHO a\tb\r\nPING\n",
        b"+OK\r\n$2\r\nx\\\r\n$4\r\nit's\r\n$2\r\nx4\r\n\
          -ERR wrong number of arguments for 'echo' command\r\n+PONG\r\n",
    );
    let (out, closed) = exchange(&mut s, b"SET k \"a\"b\r\nPING\r\n", Duration::from_secs(5));
    assert_eq!(
        String::from_utf8_lossy(&out),
        "-ERR Protocol error: unbalanced quotes in request\r\n"
    );
    assert!(closed);
}

/// A pipeline mixing RESP and inline requests, sent one byte per TCP segment: every split
/// point of every header, bulk and CRLF; the replies come back complete and in order.
#[test]
fn requests_split_at_every_byte_are_answered_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    s.set_nodelay(true).unwrap();
    let mut req = resp(&[b"SET", b"k\r\n", b"v\x00\r\n1"]);
    req.extend_from_slice(b"APPEND k\\r\\n 2\r\n");
    req.extend(resp(&[b"APPEND", b"k\r\n", b"3"]));
    req.extend_from_slice(b"\r\n*0\r\nPING\n");
    req.extend(resp(&[b"GET", b"k\r\n"]));
    req.extend(resp(&[b"INCR", b"n"]));
    req.extend(resp(&[b"INCR", b"n"]));
    req.extend(resp(&[b"ECHO", b""]));
    for b in &req {
        s.write_all(std::slice::from_ref(b)).unwrap();
        std::thread::sleep(Duration::from_micros(300));
    }
    // NB: the inline key `k\r\n` is five bytes (no escapes outside quotes): another key.
    let expect: &[u8] = b"+OK\r\n:1\r\n:6\r\n+PONG\r\n$6\r\nv\x00\r\n13\r\n:1\r\n:2\r\n$0\r\n\r\n";
    let got = read_at_least(&mut s, expect.len());
    assert_eq!(
        got.escape_ascii().to_string(),
        expect.escape_ascii().to_string()
    );
}

/// With --max-request-size 1KiB, a request whose arguments total exactly 1024 bytes is
/// served, in both forms; one byte more is a protocol error that closes the connection.
#[test]
fn requests_at_exactly_the_max_request_size() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &["--max-request-size", "1KiB"]);
    let mut s = server.raw();
    let fits = vec![b'x'; 1024 - 4];
    let mut expect = format!("${}\r\n", fits.len()).into_bytes();
    expect.extend_from_slice(&fits);
    expect.extend_from_slice(b"\r\n");
    talk(&mut s, &resp(&[b"ECHO", &fits]), &expect);
    let mut inline = b"ECHO ".to_vec();
    inline.extend_from_slice(&fits);
    inline.extend_from_slice(b"\r\n");
    talk(&mut s, &inline, &expect);
    let over = vec![b'x'; 1024 - 3];
    let (out, closed) = exchange(&mut s, &resp(&[b"ECHO", &over]), Duration::from_secs(5));
    assert_eq!(
        String::from_utf8_lossy(&out),
        "-ERR Protocol error: request larger than 1024 bytes (max request size)\r\n"
    );
    assert!(closed);
}

/// Many arguments in one request (MSET of 20000 pairs, MGET/EXISTS/DEL of 40000 keys).
#[test]
fn very_many_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    let keys: Vec<Vec<u8>> = (0..20_000).map(|i| format!("m{i}").into_bytes()).collect();
    let mut mset: Vec<&[u8]> = vec![b"MSET"];
    for k in &keys {
        mset.push(k);
        mset.push(b"1");
    }
    talk(&mut s, &resp(&mset), b"+OK\r\n");
    let mut exists: Vec<&[u8]> = vec![b"EXISTS"];
    for k in keys.iter().chain(keys.iter()) {
        exists.push(k);
    }
    talk(&mut s, &resp(&exists), b":40000\r\n");
    exists[0] = b"DEL";
    talk(&mut s, &resp(&exists), b":20000\r\n");
    talk(&mut s, b"DBSIZE\r\n", b":0\r\n");
}

/// RESP3 after HELLO 3: nulls are `_`, CONFIG GET a map, INFO a verbatim string; HELLO 2
/// goes back.
#[test]
fn resp3_nulls_maps_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    let id = client_id(&mut s);
    talk(&mut s, b"HELLO 3\r\n", &hello_map(3, id));
    talk(
        &mut s,
        b"SET r v NX\r\nSET r v NX\r\nGET nope\r\nMGET r nope\r\nCONFIG GET nosuch\r\n\
          INFO nosuch\r\nCLIENT GETNAME\r\nCOMMAND INFO nosuch\r\n",
        b"+OK\r\n_\r\n_\r\n*2\r\n$1\r\nv\r\n_\r\n%0\r\n=4\r\ntxt:\r\n_\r\n*1\r\n_\r\n",
    );
    talk(&mut s, b"HELLO 2\r\n", &hello_map(2, id));
    talk(
        &mut s,
        b"GET nope\r\nCONFIG GET nosuch\r\n",
        b"$-1\r\n*0\r\n",
    );
}

#[test]
fn scan_argument_errors_match_redis() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    talk(
        &mut s,
        b"SCAN 0 COUNT 0\r\nSCAN 0 COUNT -1\r\nSCAN 0 MATCH\r\nSCAN x\r\nSCAN 0 TYPE foo\r\n\
          SCAN 0 COUNT 1.5\r\n",
        b"-ERR syntax error\r\n-ERR syntax error\r\n-ERR syntax error\r\n-ERR invalid cursor\r\n\
          *2\r\n$1\r\n0\r\n*0\r\n-ERR value is not an integer or out of range\r\n",
    );
}

/// SCAN's guarantee while other clients write: a key present for the whole iteration is
/// returned (here exactly once); the iteration ends with cursor 0. MATCH with classes and
/// escapes filters as Redis's glob does.
#[test]
fn scan_returns_every_stable_key_while_others_change() {
    use redis::Commands;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut con = server.client();
    let mut writer = server.client();
    for i in 0..300 {
        let _: () = con.set(format!("s{i:03}"), i).unwrap();
    }
    let _: () = con.set("x*y", 1).unwrap();
    let _: () = con.set("xay", 1).unwrap();
    let mut seen = std::collections::BTreeMap::<String, u32>::new();
    let mut cursor = 0u64;
    let mut calls = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(7)
            .query(&mut con)
            .unwrap();
        for k in keys {
            *seen.entry(k).or_default() += 1;
        }
        // Meanwhile: delete some keys ahead and behind, add new ones.
        let _: () = writer
            .del(format!("s{:03}", (calls * 13) % 300 + 1000))
            .unwrap();
        let _: () = writer.del(format!("s{:03}", 299 - calls % 50 * 2)).unwrap();
        let _: () = writer.set(format!("s{calls:03}_new"), 1).unwrap();
        calls += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
        assert!(calls < 1000, "the scan does not end");
    }
    let deleted: std::collections::BTreeSet<String> = (0..calls)
        .map(|c| format!("s{:03}", 299 - c % 50 * 2))
        .collect();
    for i in 0..300 {
        let k = format!("s{i:03}");
        if deleted.contains(&k) {
            continue;
        }
        assert_eq!(
            seen.get(&k),
            Some(&1),
            "{k}: present throughout, returned once"
        );
    }
    let matched: Vec<String> = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg("x\\*y")
        .arg("COUNT")
        .arg(10_000)
        .query::<(u64, Vec<String>)>(&mut con)
        .unwrap()
        .1;
    assert_eq!(matched, vec!["x*y"]);
    let matched: Vec<String> = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg("s00[^0-4]")
        .arg("COUNT")
        .arg(10_000)
        .query::<(u64, Vec<String>)>(&mut con)
        .unwrap()
        .1;
    assert_eq!(matched, vec!["s005", "s006", "s007", "s008", "s009"]);
}

/// QUIT answers +OK and closes; what was pipelined after it is not run.
#[test]
fn quit_closes_after_answering_and_ignores_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    let (out, closed) = exchange(
        &mut s,
        b"SET q 1\r\nQUIT\r\nSET q 2\r\n",
        Duration::from_secs(5),
    );
    assert_eq!(String::from_utf8_lossy(&out), "+OK\r\n+OK\r\n");
    assert!(closed);
    let mut s = server.raw();
    talk(&mut s, b"GET q\r\n", b"$1\r\n1\r\n");
}

/// SIGTERM with an idle client connected and another mid-request: both are closed and the
/// server shuts down cleanly, keeping what was written.
#[test]
fn sigterm_with_idle_and_half_sent_clients_shuts_down_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--durability", "buffered"]);
    let mut idle = server.raw();
    talk(&mut idle, b"SET t 1\r\n", b"+OK\r\n");
    let mut half = server.raw();
    half.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nt\r\n$5\r\n12")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let (status, err) = server.terminate();
    assert!(status.success(), "{status:?}: {err}");
    assert!(err.contains("shut down cleanly"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        read_for(&mut idle, Duration::from_secs(2)).1,
        "idle client closed"
    );
    assert!(
        read_for(&mut half, Duration::from_secs(2)).1,
        "half-sent client closed"
    );
    let server = server.restart();
    let mut s = server.raw();
    talk(&mut s, b"GET t\r\n", b"$1\r\n1\r\n");
}

/// `--durability flush` (the default; Redis's everysec) survives a process crash: what was
/// acknowledged, merged SETs and transactions alike, is there after SIGKILL and a restart.
#[test]
fn flush_durability_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    let mut s = server.raw();
    let mut req = Vec::new();
    for i in 0..200 {
        req.extend(resp(&[b"SET", format!("f{i}").as_bytes(), b"v"]));
    }
    req.extend(resp(&[b"INCRBY", b"total", b"200"]));
    req.extend(resp(&[b"APPEND", b"f7", b"w"]));
    let mut expect = b"+OK\r\n".repeat(200);
    expect.extend_from_slice(b":200\r\n:2\r\n");
    talk(&mut s, &req, &expect);
    server.kill9();
    let server = server.restart();
    let mut s = server.raw();
    talk(
        &mut s,
        b"DBSIZE\r\nGET total\r\nGET f7\r\nGET f199\r\n",
        b":201\r\n$3\r\n200\r\n$2\r\nvw\r\n$1\r\nv\r\n",
    );
}
