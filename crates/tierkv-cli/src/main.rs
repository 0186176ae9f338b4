//! `tierkv`: the command-line tool for tierkv databases, in the spirit of RocksDB's `ldb` and
//! `sst_dump`, plus a `demo` benchmark.
//!
//! Modules: `cli` (argument parsing), `open` (flags -> `Options`), `text` (escaping, hex),
//! `errors` (exit codes), one module per group of commands (`kv`, `admin`, `dump`, `zones`,
//! `demo`) and `progress` (the progress bar). Results go to stdout, diagnostics to stderr prefixed
//! `tierkv: `; the exit codes are listed in `--help`.

mod admin;
mod cli;
mod demo;
mod dump;
mod errors;
mod kv;
mod open;
mod progress;
mod text;
mod zones;

use anyhow::Result;
use clap::Parser;
use cli::{Cli, Command};
use open::OpenMode;
use std::io::{BufWriter, Write};
use std::process::ExitCode;
use text::Encoding;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut out = BufWriter::new(std::io::stdout().lock());
    let result = run(&cli, &mut out).and_then(|code| {
        out.flush()?;
        Ok(code)
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // NB: flush what was printed before the error so it precedes the message.
            let _ = out.flush();
            errors::report(&e)
        }
    }
}

/// Runs one command; `Ok` carries the exit code of a command that did its job. Arguments are
/// decoded before the database is opened, so a bad one costs no open (and no side effects).
/// `get`, `scan`, `stats` and `check` open the database read-only: they never change it.
fn run(cli: &Cli, out: &mut dyn Write) -> Result<u8> {
    let enc = Encoding::new(cli.hex);
    let engine = &cli.engine;
    let arg = |text: &str| enc.parse(text.as_bytes());
    match &cli.command {
        Command::Put { key, value, sync } => {
            let (key, value) = (arg(key)?, arg(value)?);
            kv::put(
                &engine.open(OpenMode::CreateIfMissing)?,
                &key,
                &value,
                *sync,
            )
        }
        Command::Get { key } => {
            let key = arg(key)?;
            kv::get(&engine.open(OpenMode::ReadOnly)?, enc, &key, out)
        }
        Command::Delete { key, sync } => {
            let key = arg(key)?;
            kv::delete(&engine.open(OpenMode::CreateIfMissing)?, &key, *sync)
        }
        Command::Scan(args) => {
            let bounds = kv::Bounds::parse(enc, args)?;
            kv::scan(&engine.open(OpenMode::ReadOnly)?, enc, &bounds, args, out)
        }
        Command::Load(args) => {
            let db = engine.open(OpenMode::CreateIfMissing)?;
            kv::load(&db, enc, args, &mut std::io::stdin().lock())
        }
        Command::Stats { files } => {
            admin::stats(&engine.open(OpenMode::ReadOnly)?, enc, *files, out)
        }
        Command::Compact => admin::compact(&engine.open(OpenMode::Existing)?, out),
        Command::Check => admin::check(&engine.open(OpenMode::ReadOnly)?, out),
        Command::DumpManifest => dump::manifest(&engine.tier0_dir()?, enc, out),
        Command::DumpWal(args) => dump::wal(&engine.tier0_dir()?, args, enc, out),
        Command::DumpSst(args) => dump::sst(args, enc, out),
        Command::DumpZones { dir } => zones::dump(dir, out),
        Command::Demo(args) => demo::demo(engine, args, out),
    }
}
