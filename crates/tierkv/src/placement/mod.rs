//! Placement: which tier each table lives on, and the machinery that keeps it there.
//!
//! The subsystem owns every decision about tiers that is not a file operation: the tier a new
//! table prefers, whether a table may move deeper without a rewrite, which table migrates and
//! which one gets a replica on the fast tier, how much of the flush reserve is lent, how busy
//! each tier is, and how fast background writes to the fast tier may go. The `db` module runs
//! these decisions (copies files, writes MANIFEST edits, samples counters); nothing here does
//! I/O, takes a database lock or reads a clock (time comes in as `Instant`s).
//!
//! Invariants:
//! - Every decision is a function of data: a [`Version`](crate::version::Version), budgets,
//!   readings and the set of files busy in a compaction. That is what the tests here build.
//! - The fast tier ([`TierId::FAST`](crate::tier::TierId::FAST)) holds the WAL and MANIFEST;
//!   the upper levels have first claim on the rest of it (`policy::deep_allowance`).
//! - L0 tables and a compaction's inputs never migrate and never get replicas: both are about
//!   to be rewritten.
//!
//! Files:
//! - `policy`: the preferred tier of a level (LAD-n / PL), the deep-level allowance, the
//!   trivial-move rule, the output tier of a new table, and [`Placer`] (fixed or automatic).
//! - `auto`: the `placement = auto` controller: a pointer over the levels moved by readings
//!   of the fast tier, and migration hints.
//! - `iomon`: per-tier I/O rates by kind over a sliding window, utilisation against a ceiling.
//! - `reserve`: how much of the flush reserve to hold, lending the rest to replicas.
//! - `ratelimit`: the token bucket pacing background writes to the fast tier and migrations.
//! - `migrate`: which table moves between tiers for a migration hint.
//! - `replica`: which table gets a replica on the fast tier, and which replicas go first.

pub mod auto;
pub mod iomon;
pub mod policy;
pub mod ratelimit;
pub mod reserve;

pub use policy::Placer;
