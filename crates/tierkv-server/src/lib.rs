//! tierkv-server: the tierkv engine over the network, speaking the Redis protocol (RESP2, and
//! RESP3 after `HELLO 3`), so `redis-cli`, `redis-benchmark` and Redis client libraries work
//! unchanged.
//!
//! Modules, from the wire inwards: [`resp`] (request parser, reply encoder), [`commands`]
//! (the command table and typed commands), [`conn`] (one connection: pipelining,
//! backpressure), [`deps`] (the order of a connection's requests on the same keys), [`exec`]
//! (requests in flight and their replies), [`atomic`] (read-modify-write commands as
//! transactions), [`scan`] (SCAN cursors, MATCH globs), [`info`] (INFO, CONFIG GET),
//! [`server`] (listener, client limit, shutdown), [`config`] (flags and TOML) and [`bench`]
//! (in-process baselines for the benchmarks).

#![warn(missing_docs)]

pub mod atomic;
pub mod bench;
pub mod commands;
pub mod config;
pub mod conn;
pub mod deps;
pub mod exec;
pub mod info;
pub mod resp;
pub mod scan;
pub mod server;
