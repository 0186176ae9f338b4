//! In-process measurements that the network benchmarks are compared against: loading keys
//! as `redis-benchmark -r` names them, and random GETs through the engine's asynchronous API
//! by as many concurrent readers as redis-benchmark has clients, with no network in between.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkv::{Db, Error, ReadOptions, WriteBatch, WriteOptions};

/// redis-benchmark's name for key number `n` (`key:__rand_int__` with `-r`).
pub fn bench_key(n: u64) -> Vec<u8> {
    format!("key:{n:012}").into_bytes()
}

/// Writes keys `0..keys` with `value_size`-byte values, in batches, then flushes.
pub fn load(db: &Db, keys: u64, value_size: usize) -> tierkv::Result<Duration> {
    let start = Instant::now();
    let value = vec![b'x'; value_size];
    let mut batch = WriteBatch::new();
    for n in 0..keys {
        batch.put(bench_key(n), &value);
        if batch.len() >= 256 {
            db.write(&WriteOptions::default(), std::mem::take(&mut batch))?;
        }
    }
    db.write(&WriteOptions::default(), batch)?;
    db.flush()?;
    Ok(start.elapsed())
}

/// What a GET run measured.
#[derive(Debug, Clone)]
pub struct GetRun {
    /// GETs completed.
    pub ops: u64,
    /// GETs that found a value.
    pub found: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Latency percentiles p50, p99 (microseconds).
    pub p50_us: u64,
    /// See `p50_us`.
    pub p99_us: u64,
}

/// `clients` tasks issue random GETs over `0..keyspace` for `secs` seconds.
pub async fn random_gets(db: Arc<Db>, keyspace: u64, clients: usize, secs: u64) -> GetRun {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|i| tokio::spawn(reader(Arc::clone(&db), keyspace, i as u64, deadline)))
        .collect();
    let (mut ops, mut found, mut lat) = (0, 0, Vec::new());
    for t in tasks {
        let (o, f, l) = t.await.expect("reader task");
        ops += o;
        found += f;
        lat.extend(l);
    }
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    GetRun {
        ops,
        found,
        elapsed: start.elapsed(),
        p50_us: pct(0.50),
        p99_us: pct(0.99),
    }
}

async fn reader(db: Arc<Db>, keyspace: u64, seed: u64, deadline: Instant) -> (u64, u64, Vec<u64>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let ro = ReadOptions::default();
    let (mut ops, mut found, mut lat) = (0, 0, Vec::new());
    while Instant::now() < deadline {
        let key = bench_key(rng.gen_range(0..keyspace.max(1)));
        let t = Instant::now();
        let handle = loop {
            match db.submit_get(&ro, &key) {
                Err(Error::Busy(_)) => tokio::time::sleep(Duration::from_micros(50)).await,
                other => break other,
            }
        };
        if let Ok(Some(_)) = async { handle?.await }.await {
            found += 1;
        }
        ops += 1;
        lat.push(t.elapsed().as_micros() as u64);
    }
    (ops, found, lat)
}
