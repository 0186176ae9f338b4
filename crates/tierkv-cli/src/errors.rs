//! Exit codes and how an error chooses one.
//!
//! Commands return `anyhow::Result`; the cause chain decides the code: a [`Usage`] error is 2
//! like clap's own, any `tierkv::Error::Corruption` (or [`Damaged`]) is 3, the rest 4.

use std::fmt;
use std::process::ExitCode;

/// Success.
pub const OK: u8 = 0;
/// `get` found nothing.
pub const NOT_FOUND: u8 = 1;
/// Bad arguments (clap uses the same code).
pub const USAGE: u8 = 2;
/// Damaged data was detected.
pub const CORRUPTION: u8 = 3;
/// Anything else.
pub const FAILURE: u8 = 4;

/// An argument that clap accepted but that does not make sense (e.g. bad hex).
#[derive(Debug)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Damage a dump found without an engine error to carry it (e.g. a WAL that is corrupt
/// rather than torn).
#[derive(Debug)]
pub struct Damaged(pub String);

impl fmt::Display for Damaged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Damaged {}

/// The exit code for `err`.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    let corrupt = err.chain().any(|c| {
        c.downcast_ref::<tierkv::Error>()
            .is_some_and(tierkv::Error::is_corruption)
            || c.is::<Damaged>()
    });
    if corrupt {
        CORRUPTION
    } else if err.chain().any(|c| c.is::<Usage>()) {
        USAGE
    } else {
        FAILURE
    }
}

/// True when the error is stdout closing under us (`tierkv scan | head`): not worth a message.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Prints `err` the way a shell user expects and returns its exit code.
pub fn report(err: &anyhow::Error) -> ExitCode {
    if is_broken_pipe(err) {
        return ExitCode::from(OK);
    }
    eprintln!("tierkv: {}", tierkv::chain_message(err.as_ref()));
    ExitCode::from(exit_code(err))
}
