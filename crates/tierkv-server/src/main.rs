//! The `tierkv-server` command: parses the configuration, opens the database, serves until
//! SIGTERM or SIGINT, then closes the database. Errors go to stderr with exit code 1 (2 for
//! bad flags, from clap).

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use tierkv_server::bench;
use tierkv_server::config::{Args, ServerConfig};
use tierkv_server::server::{self, Server};

/// The heap: jemalloc, handing freed pages back to the OS after a second (a background
/// thread does it): a server's memory goes up and down with its clients, and what the
/// allocator keeps is taken from the page cache that serves the capacity tier's reads
/// (BENCHMARKS.md, "Process memory").
#[global_allocator]
static HEAP: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at its start (a C string; `None` would mean defaults).
#[unsafe(export_name = "_rjem_malloc_conf")]
static HEAP_OPTIONS: Option<&'static u8> =
    Some(&b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0"[0]);

fn main() -> ExitCode {
    tierkv::bound_heap_retention();
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tierkv-server: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let (config, opts) = args.resolve()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.io_threads)
        // NB: transactions block; bound the threads they may take on a small machine.
        .max_blocking_threads(64)
        .enable_all()
        .build()?;
    let db = server::open_db(opts)?;
    if let Some(keys) = args.bench_load {
        let took = bench::load(&db, keys, args.bench_value_size)?;
        println!(
            "loaded {keys} keys of {} bytes in {:.1} s",
            args.bench_value_size,
            took.as_secs_f64()
        );
    }
    if let Some(secs) = args.bench_inprocess {
        return runtime.block_on(bench_inprocess(db, args, secs));
    }
    if args.bench_load.is_some() {
        return Ok(());
    }
    runtime.block_on(serve(db, config))?;
    runtime.shutdown_timeout(server::SHUTDOWN_GRACE);
    Ok(())
}

async fn serve(db: tierkv::Db, config: ServerConfig) -> Result<(), Box<dyn std::error::Error>> {
    let server = Server::bind(db, config).await?;
    // NB: tests and scripts read this line to learn the port (with --port 0).
    println!("tierkv-server listening on {}", server.local_addr());
    std::io::stdout().flush()?;
    match server.run(server::termination_signal()).await {
        Some(db) => {
            drop(db);
            eprintln!("tierkv-server: shut down cleanly");
        }
        None => eprintln!(
            "tierkv-server: connections still busy after {:?}; exiting without waiting (the WAL recovers the database)",
            server::SHUTDOWN_GRACE
        ),
    }
    Ok(())
}

async fn bench_inprocess(
    db: tierkv::Db,
    args: &Args,
    secs: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let db = Arc::new(db);
    let run = bench::random_gets(
        Arc::clone(&db),
        args.bench_keyspace,
        args.bench_clients,
        secs,
    )
    .await;
    let rate = run.ops as f64 / run.elapsed.as_secs_f64();
    println!(
        "inprocess GET: {} clients, keyspace {}: {} ops in {:.1} s = {:.0} ops/s, found {:.1}%, p50 {} us, p99 {} us",
        args.bench_clients,
        args.bench_keyspace,
        run.ops,
        run.elapsed.as_secs_f64(),
        rate,
        100.0 * run.found as f64 / run.ops.max(1) as f64,
        run.p50_us,
        run.p99_us
    );
    Ok(())
}
