//! The command table: which commands exist, their arity and flags (what `COMMAND` reports),
//! and turning a parsed request into a typed [`Command`] with Redis's error texts.
//!
//! Nothing here touches the database or the connection: a request either becomes a
//! [`Command`] or an error [`Reply`] the connection sends back as is.

use crate::resp::{parse_i64, Proto, Reply};

/// A command's static description, as `COMMAND INFO` reports it.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis arity: N means exactly N arguments (the name included), -N at least N.
    pub arity: i64,
    /// Redis flags (`readonly`, `write`, `fast`, ...).
    pub flags: &'static [&'static str],
    /// Position of the first key argument (0: none).
    pub first_key: i64,
    /// Position of the last key argument (-1: the last argument).
    pub last_key: i64,
    /// Step between key arguments.
    pub step: i64,
}

impl Spec {
    /// True if a client may run it before it authenticates (Redis's `no_auth` flag).
    pub fn no_auth(&self) -> bool {
        self.flags.contains(&"no_auth")
    }
}

const fn spec(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    keys: (i64, i64, i64),
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        step: keys.2,
    }
}

const NO_KEYS: (i64, i64, i64) = (0, 0, 0);
const ONE_KEY: (i64, i64, i64) = (1, 1, 1);
const ALL_KEYS: (i64, i64, i64) = (1, -1, 1);
const RO: &[&str] = &["readonly", "fast"];
const RW: &[&str] = &["write", "denyoom", "fast"];
const CONN: &[&str] = &["fast", "stale", "loading"];

/// Every command the server knows, in `COMMAND` order.
pub const SPECS: &[Spec] = &[
    spec("ping", -1, CONN, NO_KEYS),
    spec("echo", 2, CONN, NO_KEYS),
    spec(
        "hello",
        -1,
        &["noscript", "loading", "stale", "fast", "no_auth"],
        NO_KEYS,
    ),
    spec(
        "auth",
        -2,
        &["noscript", "loading", "stale", "fast", "no_auth"],
        NO_KEYS,
    ),
    spec("select", 2, CONN, NO_KEYS),
    spec("quit", -1, &["fast", "no_auth"], NO_KEYS),
    spec("client", -2, &["noscript", "loading", "stale"], NO_KEYS),
    spec("get", 2, RO, ONE_KEY),
    spec("set", -3, &["write", "denyoom"], ONE_KEY),
    spec("getset", 3, RW, ONE_KEY),
    spec("del", -2, &["write"], ALL_KEYS),
    spec("exists", -2, RO, ALL_KEYS),
    spec("mget", -2, RO, ALL_KEYS),
    spec("mset", -3, &["write", "denyoom"], (1, -1, 2)),
    spec("incr", 2, RW, ONE_KEY),
    spec("incrby", 3, RW, ONE_KEY),
    spec("decr", 2, RW, ONE_KEY),
    spec("decrby", 3, RW, ONE_KEY),
    spec("append", 3, RW, ONE_KEY),
    spec("strlen", 2, RO, ONE_KEY),
    spec("scan", -2, &["readonly"], NO_KEYS),
    spec("dbsize", 1, &["readonly"], NO_KEYS),
    spec("info", -1, &["loading", "stale"], NO_KEYS),
    spec(
        "config",
        -2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
    ),
    spec("command", -1, &["loading", "stale"], NO_KEYS),
    spec("flushall", -1, &["write"], NO_KEYS),
];

/// The spec of a command, by name in any case.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    SPECS
        .iter()
        .find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
}

/// SET's condition on the key's existence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetCond {
    /// Always write.
    Always,
    /// NX: only if the key is absent.
    IfAbsent,
    /// XX: only if the key is present.
    IfPresent,
}

/// `COMMAND` and its subcommands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandQuery {
    /// `COMMAND`: every command's info.
    All,
    /// `COMMAND COUNT`.
    Count,
    /// `COMMAND INFO name...`.
    Info(Vec<Vec<u8>>),
    /// `COMMAND DOCS [name...]`: no docs are kept; an empty map.
    Docs,
    /// `COMMAND LIST`.
    List,
}

/// A request, checked and typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// PING [message].
    Ping(Option<Vec<u8>>),
    /// ECHO message.
    Echo(Vec<u8>),
    /// HELLO [protover [AUTH user pass] [SETNAME name]].
    Hello {
        /// Requested protocol version.
        proto: Option<Proto>,
        /// Credentials (user, password).
        auth: Option<(Vec<u8>, Vec<u8>)>,
        /// Client name (checked; empty clears it).
        name: Option<Vec<u8>>,
    },
    /// AUTH [user] password.
    Auth {
        /// User name (only `default` exists); `None` when only a password was given.
        user: Option<Vec<u8>>,
        /// Password.
        pass: Vec<u8>,
    },
    /// SELECT index (only 0 exists).
    Select(i64),
    /// QUIT.
    Quit,
    /// CLIENT subcommand (names and ids only).
    Client(ClientCmd),
    /// GET key.
    Get(Vec<u8>),
    /// SET key value [NX|XX] [GET] [KEEPTTL].
    Set {
        /// Key.
        key: Vec<u8>,
        /// Value.
        value: Vec<u8>,
        /// NX / XX.
        cond: SetCond,
        /// GET: reply with the old value.
        get: bool,
    },
    /// GETSET key value.
    GetSet(Vec<u8>, Vec<u8>),
    /// DEL key...
    Del(Vec<Vec<u8>>),
    /// EXISTS key...
    Exists(Vec<Vec<u8>>),
    /// MGET key...
    MGet(Vec<Vec<u8>>),
    /// MSET key value [key value ...].
    MSet(Vec<(Vec<u8>, Vec<u8>)>),
    /// INCR, INCRBY, DECR, DECRBY: add `by` (DECRBY n is by = -n).
    IncrBy(Vec<u8>, i64),
    /// APPEND key value.
    Append(Vec<u8>, Vec<u8>),
    /// STRLEN key.
    StrLen(Vec<u8>),
    /// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type].
    Scan {
        /// 0 to start, else a cursor an earlier SCAN returned.
        cursor: u64,
        /// Glob pattern keys must match.
        pattern: Option<Vec<u8>>,
        /// Keys to examine in this call.
        count: usize,
        /// False when TYPE names a type other than string: nothing can match.
        strings: bool,
    },
    /// DBSIZE.
    DbSize,
    /// INFO [section...].
    Info(Vec<String>),
    /// CONFIG GET pattern...
    ConfigGet(Vec<Vec<u8>>),
    /// COMMAND [...].
    Command(CommandQuery),
    /// FLUSHALL [ASYNC|SYNC].
    FlushAll,
}

/// `CLIENT` subcommands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientCmd {
    /// CLIENT SETNAME name (checked; empty clears it).
    SetName(Vec<u8>),
    /// CLIENT GETNAME.
    GetName,
    /// CLIENT ID.
    Id,
    /// CLIENT SETINFO attr value: accepted and ignored.
    SetInfo,
}

/// Most keys one SCAN call examines.
pub const MAX_SCAN_COUNT: usize = 100_000;

/// Redis's reply to a command it does not know.
pub fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let mut list = String::new();
    for arg in &args[1..] {
        if list.len() >= 128 {
            break;
        }
        let room = 128 - list.len();
        let text = String::from_utf8_lossy(arg);
        let cut: String = text.chars().take(room).collect();
        list.push_str(&format!("'{cut}' "));
    }
    let name: String = String::from_utf8_lossy(&args[0])
        .chars()
        .take(128)
        .collect();
    Reply::err(format!(
        "unknown command '{name}', with args beginning with: {list}"
    ))
}

fn wrong_arity(name: &str) -> Reply {
    Reply::err(format!("wrong number of arguments for '{name}' command"))
}

fn syntax() -> Reply {
    Reply::err("syntax error")
}

fn not_integer() -> Reply {
    Reply::err("value is not an integer or out of range")
}

fn int_arg(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg).ok_or_else(not_integer)
}

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// Types a request. `Err` is the reply to send instead (unknown command, arity, syntax).
pub fn parse(args: Vec<Vec<u8>>) -> Result<Command, Reply> {
    let spec = resolve(&args)?;
    parse_args(spec, args)
}

/// The spec of a request's command, if it is known and has the right number of arguments:
/// what Redis checks before anything else, authentication included.
pub fn resolve(args: &[Vec<u8>]) -> Result<&'static Spec, Reply> {
    let Some(spec) = lookup(&args[0]) else {
        return Err(unknown_command(args));
    };
    let n = args.len() as i64;
    if (spec.arity >= 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
        return Err(wrong_arity(spec.name));
    }
    Ok(spec)
}

/// Types the arguments of a request [`resolve`] accepted as a `spec` command.
pub fn parse_args(spec: &Spec, mut args: Vec<Vec<u8>>) -> Result<Command, Reply> {
    let mut rest: Vec<Vec<u8>> = args.drain(1..).collect();
    parse_known(spec.name, &mut rest)
}

fn take(args: &mut [Vec<u8>], i: usize) -> Vec<u8> {
    std::mem::take(&mut args[i])
}

fn parse_known(name: &str, a: &mut Vec<Vec<u8>>) -> Result<Command, Reply> {
    Ok(match name {
        "ping" if a.len() > 1 => return Err(wrong_arity("ping")),
        "ping" => Command::Ping(a.pop()),
        "echo" => Command::Echo(take(a, 0)),
        "hello" => parse_hello(a)?,
        "auth" if a.len() > 2 => return Err(syntax()),
        "auth" if a.len() == 2 => Command::Auth {
            user: Some(take(a, 0)),
            pass: take(a, 1),
        },
        "auth" => Command::Auth {
            user: None,
            pass: take(a, 0),
        },
        "select" => Command::Select(int_arg(&a[0])?),
        "quit" => Command::Quit,
        "client" => Command::Client(parse_client(a)?),
        "get" => Command::Get(take(a, 0)),
        "set" => parse_set(a)?,
        "getset" => Command::GetSet(take(a, 0), take(a, 1)),
        "del" => Command::Del(std::mem::take(a)),
        "exists" => Command::Exists(std::mem::take(a)),
        "mget" => Command::MGet(std::mem::take(a)),
        "mset" => parse_mset(a)?,
        "incr" => Command::IncrBy(take(a, 0), 1),
        "decr" => Command::IncrBy(take(a, 0), -1),
        "incrby" => Command::IncrBy(take(a, 0), int_arg(&a[1])?),
        "decrby" => {
            let by = int_arg(&a[1])?;
            let neg = by
                .checked_neg()
                .ok_or_else(|| Reply::err("decrement would overflow"))?;
            Command::IncrBy(take(a, 0), neg)
        }
        "append" => Command::Append(take(a, 0), take(a, 1)),
        "strlen" => Command::StrLen(take(a, 0)),
        "scan" => parse_scan(a)?,
        "dbsize" => Command::DbSize,
        "info" => Command::Info(
            a.iter()
                .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
                .collect(),
        ),
        "config" => parse_config(a)?,
        "command" => Command::Command(parse_command_query(a)?),
        "flushall" => parse_flushall(a)?,
        _ => unreachable!("every spec has a parser: {name}"),
    })
}

fn parse_hello(a: &mut [Vec<u8>]) -> Result<Command, Reply> {
    let mut proto = None;
    let mut auth = None;
    let mut name = None;
    let mut i = 0;
    if let Some(first) = a.first() {
        proto = Some(protocol_version(first)?);
        i = 1;
    }
    // NB: options are checked in order, each before the next; the first bad one answers.
    while i < a.len() {
        let left = a.len() - i - 1;
        if is(&a[i], "auth") && left >= 2 {
            auth = Some((take(a, i + 1), take(a, i + 2)));
            i += 3;
        } else if is(&a[i], "setname") && left >= 1 {
            check_client_name(&a[i + 1])?;
            name = Some(take(a, i + 1));
            i += 2;
        } else {
            let opt = String::from_utf8_lossy(&a[i]).into_owned();
            return Err(Reply::err(format!("Syntax error in HELLO option '{opt}'")));
        }
    }
    Ok(Command::Hello { proto, auth, name })
}

/// HELLO's protocol version, checked before its options as Redis does.
fn protocol_version(arg: &[u8]) -> Result<Proto, Reply> {
    match parse_i64(arg) {
        Some(2) => Ok(Proto::Resp2),
        Some(3) => Ok(Proto::Resp3),
        Some(_) => Err(Reply::Error("NOPROTO unsupported protocol version".into())),
        None => Err(Reply::err(
            "Protocol version is not an integer or out of range",
        )),
    }
}

/// Redis's rule for a client name (CLIENT SETNAME, HELLO SETNAME): printable ASCII without
/// spaces, so that CLIENT LIST stays parseable.
fn check_client_name(name: &[u8]) -> Result<(), Reply> {
    if name.iter().any(|b| *b <= b' ' || *b > b'~') {
        return Err(Reply::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

fn parse_client(a: &mut [Vec<u8>]) -> Result<ClientCmd, Reply> {
    let sub = String::from_utf8_lossy(&a[0]).to_ascii_lowercase();
    let cmd = match (sub.as_str(), a.len()) {
        ("setname", 2) => {
            check_client_name(&a[1])?;
            ClientCmd::SetName(take(a, 1))
        }
        ("getname", 1) => ClientCmd::GetName,
        ("id", 1) => ClientCmd::Id,
        ("setinfo", 3) => ClientCmd::SetInfo,
        ("setname" | "getname" | "id" | "setinfo", _) => {
            return Err(Reply::err(format!(
                "wrong number of arguments for 'client|{sub}' command"
            )))
        }
        _ => return Err(unknown_subcommand(&a[0], "CLIENT")),
    };
    Ok(cmd)
}

fn unknown_subcommand(sub: &[u8], cmd: &str) -> Reply {
    let sub: String = String::from_utf8_lossy(sub).chars().take(128).collect();
    Reply::err(format!("unknown subcommand '{sub}'. Try {cmd} HELP."))
}

fn parse_set(a: &mut [Vec<u8>]) -> Result<Command, Reply> {
    let mut cond = SetCond::Always;
    let mut get = false;
    for opt in &a[2..] {
        let upper = String::from_utf8_lossy(opt).to_ascii_uppercase();
        match upper.as_str() {
            "NX" if cond != SetCond::IfPresent => cond = SetCond::IfAbsent,
            "XX" if cond != SetCond::IfAbsent => cond = SetCond::IfPresent,
            "GET" => get = true,
            // NB: no key has a TTL, so keeping it is what already happens.
            "KEEPTTL" => {}
            "EX" | "PX" | "EXAT" | "PXAT" => {
                return Err(Reply::err(
                    "SET with EX, PX, EXAT or PXAT is not supported: tierkv-server keeps no key expiry (TTL)",
                ))
            }
            _ => return Err(syntax()),
        }
    }
    Ok(Command::Set {
        key: take(a, 0),
        value: take(a, 1),
        cond,
        get,
    })
}

fn parse_mset(a: &mut Vec<Vec<u8>>) -> Result<Command, Reply> {
    if !a.len().is_multiple_of(2) {
        return Err(wrong_arity("mset"));
    }
    let mut pairs = Vec::with_capacity(a.len() / 2);
    let mut it = std::mem::take(a).into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        pairs.push((k, v));
    }
    Ok(Command::MSet(pairs))
}

fn parse_scan(a: &mut [Vec<u8>]) -> Result<Command, Reply> {
    let cursor = std::str::from_utf8(&a[0])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| Reply::err("invalid cursor"))?;
    let mut pattern = None;
    let mut count = 10;
    let mut strings = true;
    let mut i = 1;
    while i < a.len() {
        if i + 1 >= a.len() {
            return Err(syntax());
        }
        if is(&a[i], "match") {
            pattern = Some(take(a, i + 1)).filter(|p| p != b"*");
        } else if is(&a[i], "count") {
            let n = int_arg(&a[i + 1])?;
            if n < 1 {
                return Err(syntax());
            }
            count = (n as u64).min(MAX_SCAN_COUNT as u64) as usize;
        } else if is(&a[i], "type") {
            strings = is(&a[i + 1], "string");
        } else {
            return Err(syntax());
        }
        i += 2;
    }
    Ok(Command::Scan {
        cursor,
        pattern,
        count,
        strings,
    })
}

fn parse_config(a: &mut Vec<Vec<u8>>) -> Result<Command, Reply> {
    if !is(&a[0], "get") {
        if is(&a[0], "set") || is(&a[0], "resetstat") || is(&a[0], "rewrite") {
            return Err(Reply::err(
                "CONFIG SET, RESETSTAT and REWRITE are not supported: restart tierkv-server with new flags or a new config file",
            ));
        }
        return Err(unknown_subcommand(&a[0], "CONFIG"));
    }
    if a.len() < 2 {
        return Err(Reply::err(
            "wrong number of arguments for 'config|get' command",
        ));
    }
    Ok(Command::ConfigGet(a.drain(1..).collect()))
}

fn parse_command_query(a: &mut Vec<Vec<u8>>) -> Result<CommandQuery, Reply> {
    let Some(sub) = a.first() else {
        return Ok(CommandQuery::All);
    };
    let q = match String::from_utf8_lossy(sub).to_ascii_lowercase().as_str() {
        "count" => CommandQuery::Count,
        "docs" => CommandQuery::Docs,
        "list" => CommandQuery::List,
        "info" => CommandQuery::Info(a.drain(1..).collect()),
        _ => return Err(unknown_subcommand(sub, "COMMAND")),
    };
    Ok(q)
}

fn parse_flushall(a: &[Vec<u8>]) -> Result<Command, Reply> {
    match a {
        [] => Ok(Command::FlushAll),
        [mode] if is(mode, "sync") || is(mode, "async") => Ok(Command::FlushAll),
        _ => Err(syntax()),
    }
}

/// `COMMAND INFO`'s entry for one command: name, arity, flags, first key, last key, step.
pub fn info_entry(spec: &Spec) -> Reply {
    Reply::Array(vec![
        Reply::text(spec.name),
        Reply::Int(spec.arity),
        Reply::Array(
            spec.flags
                .iter()
                .map(|f| Reply::Simple((*f).into()))
                .collect(),
        ),
        Reply::Int(spec.first_key),
        Reply::Int(spec.last_key),
        Reply::Int(spec.step),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(words: &[&str]) -> Result<Command, Reply> {
        parse(words.iter().map(|w| w.as_bytes().to_vec()).collect())
    }

    fn err_text(r: Result<Command, Reply>) -> String {
        match r {
            Err(Reply::Error(e)) => e,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn unknown_command_text_is_redis_s() {
        assert_eq!(
            err_text(p(&["foo", "a", "b"])),
            "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
        assert_eq!(
            err_text(p(&["FOO"])),
            "ERR unknown command 'FOO', with args beginning with: "
        );
    }

    #[test]
    fn arity_and_case() {
        assert_eq!(p(&["GeT", "k"]), Ok(Command::Get(b"k".to_vec())));
        assert_eq!(
            err_text(p(&["get"])),
            "ERR wrong number of arguments for 'get' command"
        );
        assert_eq!(
            err_text(p(&["mset", "a", "1", "b"])),
            "ERR wrong number of arguments for 'mset' command"
        );
    }

    #[test]
    fn set_options() {
        let c = p(&["set", "k", "v", "nx", "get"]).unwrap();
        assert!(matches!(
            c,
            Command::Set {
                cond: SetCond::IfAbsent,
                get: true,
                ..
            }
        ));
        assert_eq!(
            err_text(p(&["set", "k", "v", "nx", "xx"])),
            "ERR syntax error"
        );
        assert!(err_text(p(&["set", "k", "v", "ex", "10"])).contains("TTL"));
    }

    #[test]
    fn counters_and_scan() {
        assert_eq!(
            p(&["decrby", "k", "5"]),
            Ok(Command::IncrBy(b"k".to_vec(), -5))
        );
        assert!(err_text(p(&["decrby", "k", "-9223372036854775808"])).contains("overflow"));
        assert_eq!(
            err_text(p(&["incrby", "k", "1.5"])),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            p(&["scan", "0", "match", "a*", "count", "5"]),
            Ok(Command::Scan {
                cursor: 0,
                pattern: Some(b"a*".to_vec()),
                count: 5,
                strings: true
            })
        );
        assert_eq!(err_text(p(&["scan", "x"])), "ERR invalid cursor");
    }

    #[test]
    fn hello_checks_version_then_options_in_order() {
        assert_eq!(
            err_text(p(&["hello", "4", "foo"])),
            "NOPROTO unsupported protocol version"
        );
        let bad_name = "ERR Client names cannot contain spaces, newlines or special characters.";
        assert_eq!(err_text(p(&["hello", "3", "setname", "a b"])), bad_name);
        assert_eq!(err_text(p(&["client", "setname", "a\nb"])), bad_name);
        assert_eq!(
            err_text(p(&["hello", "3", "foo", "setname", "a b"])),
            "ERR Syntax error in HELLO option 'foo'"
        );
        assert_eq!(
            p(&["hello", "3", "setname", ""]),
            Ok(Command::Hello {
                proto: Some(Proto::Resp3),
                auth: None,
                name: Some(Vec::new()),
            })
        );
    }

    #[test]
    fn auth_records_whether_a_user_was_given() {
        assert_eq!(
            p(&["auth", "pw"]),
            Ok(Command::Auth {
                user: None,
                pass: b"pw".to_vec()
            })
        );
        assert_eq!(
            p(&["auth", "default", "pw"]),
            Ok(Command::Auth {
                user: Some(b"default".to_vec()),
                pass: b"pw".to_vec()
            })
        );
    }

    #[test]
    fn only_auth_hello_and_quit_run_before_authentication() {
        let open: Vec<&str> = SPECS
            .iter()
            .filter(|s| s.no_auth())
            .map(|s| s.name)
            .collect();
        assert_eq!(open, ["hello", "auth", "quit"]);
    }

    #[test]
    fn every_spec_parses_with_its_arity() {
        for spec in SPECS {
            let n = spec.arity.unsigned_abs() as usize;
            let mut words = vec![spec.name.to_string()];
            words.extend((1..n).map(|i| i.to_string()));
            let args: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
            // Must not panic; errors (e.g. CLIENT's unknown subcommand "1") are fine.
            let _ = parse(args);
        }
    }
}
