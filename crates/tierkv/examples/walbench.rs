use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkv::{Db, Options, TierConfig, WalMode, WriteOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = if args[1] == "parallel" {
        WalMode::Parallel
    } else {
        WalMode::Group
    };
    let threads: usize = args[2].parse().unwrap();
    let inflight: usize = args[3].parse().unwrap();
    let secs: u64 = args.get(4).map_or(5, |s| s.parse().unwrap());
    let dir = std::path::PathBuf::from("/var/tmp/walbench");
    let _ = std::fs::remove_dir_all(&dir);
    let opts = Options::builder()
        .tier(TierConfig::new("fast", dir.join("fast")))
        .tier(TierConfig::new("capacity", dir.join("cap")))
        .wal(mode)
        .build()
        .unwrap();
    let db = Arc::new(Db::open(opts).unwrap());
    let ops = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let cpu0 = cpu();
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let db = db.clone();
            let ops = ops.clone();
            std::thread::spawn(move || {
                let val = vec![7u8; 1024];
                let mut i = 0u64;
                let mut q = std::collections::VecDeque::new();
                while start.elapsed() < Duration::from_secs(secs) {
                    let k = format!("{t:02}{:016}", (i * 2654435761) % 1000000007);
                    i += 1;
                    if inflight <= 1 {
                        db.put(&WriteOptions::sync(), k.as_bytes(), &val).unwrap();
                        ops.fetch_add(1, Ordering::Relaxed);
                    } else {
                        if q.len() >= inflight {
                            let h: tierkv::Handle<()> = q.pop_front().unwrap();
                            h.wait().unwrap();
                            ops.fetch_add(1, Ordering::Relaxed);
                        }
                        q.push_back(
                            db.submit_put(&WriteOptions::sync(), k.as_bytes(), &val)
                                .unwrap(),
                        );
                    }
                }
                for h in q {
                    h.wait().unwrap();
                    ops.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let el = start.elapsed().as_secs_f64();
    let n = ops.load(Ordering::Relaxed);
    let s = db.stats();
    println!("{mode:?} t={threads} inflight={inflight}: {:.0} ops/s, cpu {:.1} us/op, runs {} pages {} path {} loggers {} cover {}",
        n as f64 / el, (cpu() - cpu0) / n as f64 * 1e6, s.wal_runs, s.wal_pages, s.wal_io_path, s.active_loggers, s.wal_cover_syncs);
}

fn cpu() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap();
    let f: Vec<&str> = s.rsplit(')').next().unwrap().split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}
