//! Zone write amplification of a capacity tier on an emulated zoned device: fills a database
//! with random keys, overwrites them all, and prints the zoned tier's report.
//!
//! ```text
//! cargo run --release -p tierkv --example zoned_write_amp -- RECORDS ZONE_MIB ZONES
//! ```
//!
//! Defaults: 300000 records of 100 random bytes, 8 MiB zones, 64 zones. The database lives in a
//! temporary directory on the machine's disk.

use rand::{Rng, SeedableRng};
use std::time::Instant;
use tierkv::{Db, Options, TierConfig, WriteOptions};

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .nth(n)
        .map(|a| a.parse().expect("arguments are numbers"))
        .unwrap_or(default)
}

fn main() -> tierkv::Result<()> {
    let (records, zone_mib, zones) = (arg(1, 300_000), arg(2, 8), arg(3, 64) as u32);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let opts = Options::builder()
        .tier(TierConfig::new("fast", dir.path().join("fast")))
        .tier(
            TierConfig::new("capacity", dir.path().join("capacity"))
                .with_zoned_tables(zone_mib << 20, zones),
        )
        .write_buffer_size(4 << 20)
        .target_file_size(4 << 20)
        .levels_on_fast(1)
        .build()?;
    let db = Db::open(opts)?;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    // NB: random values, so compression does not shrink what reaches the zones.
    let mut value = vec![0u8; 100];
    let start = Instant::now();
    for round in ["fillrandom", "overwrite"] {
        for _ in 0..records {
            let key = format!("key{:012}", rng.gen_range(0..records));
            rng.fill(&mut value[..]);
            db.put(&WriteOptions::default(), key.as_bytes(), &value)?;
        }
        db.flush()?;
        let stats = db.stats();
        let (_, z) = &stats.zoned_tiers[0];
        println!(
            "{round}: {:.1} s; zone write amplification {:.3}; {:?}",
            start.elapsed().as_secs_f64(),
            z.write_amplification(),
            z
        );
    }
    Ok(())
}
