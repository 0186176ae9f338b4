//! Crash sweep: files are written, removed, renamed and garbage-collected (by the background
//! collector, running beside the writes and woken for whole passes, and in the foreground)
//! until an injected fault stops the device, then the power goes (or the process dies); after
//! each reopen every file whose last sync returned Ok reads back whole and no zone leaks.

use super::*;
use crate::env::FaultKind;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// What the test knows about the files.
#[derive(Default)]
struct Model {
    /// Files whose last change returned Ok: their bytes.
    certain: BTreeMap<String, Vec<u8>>,
    /// Files a failed operation touched: may or may not exist, with unknown bytes.
    uncertain: std::collections::BTreeSet<String>,
    next: u64,
    /// Files written and synced with Ok, over the whole sweep.
    synced: u64,
    /// Zones the garbage collector emptied in the foreground, over the whole sweep.
    collected: usize,
}

impl Model {
    fn check(&mut self, zfs: &ZoneFs) {
        for (name, bytes) in &self.certain {
            assert_eq!(&read(zfs, name), bytes, "file {name}");
        }
        let names = zfs.list_dir(&dir()).unwrap();
        for name in names {
            assert!(
                self.certain.contains_key(&name) || self.uncertain.contains(&name),
                "file {name} appeared from nowhere"
            );
            // An uncertain file that exists is settled: the next steps know it as it is now.
            self.certain
                .entry(name)
                .or_insert_with_key(|name| read(zfs, name));
        }
        self.uncertain.clear();
        assert_no_leaks(zfs);
    }

    fn step(&mut self, zfs: &ZoneFs, rng: &mut SmallRng) -> Result<()> {
        let pick = |rng: &mut SmallRng, m: &Model| {
            let names: Vec<&String> = m.certain.keys().collect();
            (!names.is_empty()).then(|| names[rng.gen_range(0..names.len())].clone())
        };
        match rng.gen_range(0..10) {
            0..=4 => {
                let name = format!("{:06}.sst", self.next);
                self.next += 1;
                let data = pattern(self.next, rng.gen_range(1..24_000));
                self.uncertain.insert(name.clone());
                write(zfs, &name, &data, Lifetime::for_level(rng.gen_range(0..5)))?;
                self.uncertain.remove(&name);
                self.certain.insert(name, data);
                self.synced += 1;
            }
            5..=7 => {
                if let Some(name) = pick(rng, self) {
                    self.certain.remove(&name);
                    self.uncertain.insert(name.clone());
                    zfs.remove_file(&dir().join(&name))?;
                    self.uncertain.remove(&name);
                }
            }
            8 => {
                if let Some(name) = pick(rng, self) {
                    let to = format!("{name}.renamed");
                    let data = self.certain.remove(&name).unwrap();
                    self.uncertain.insert(name.clone());
                    self.uncertain.insert(to.clone());
                    zfs.rename(&dir().join(&name), &dir().join(&to))?;
                    self.uncertain.clear();
                    self.certain.insert(to, data);
                }
            }
            9 if rng.gen_bool(0.5) => {
                self.collected += zfs.collect_garbage()?;
            }
            _ => zfs.run_background_pass(Duration::from_secs(1)),
        }
        Ok(())
    }
}

/// A background collector that runs whenever any zone is collectable, unpaced, so that it
/// is often in the middle of a zone when the fault or the crash comes.
fn open_collecting(fs: &Arc<FaultFs>, g: Geometry) -> ZoneFs {
    let config = ZoneFsConfig {
        gc_high_free_zones: g.zones,
        gc_low_free_zones: 0,
        gc_bytes_per_sec: 0,
        read_only: false,
    };
    ZoneFs::open(fs.clone(), &dir(), g, config).unwrap()
}

#[test]
fn crash_sweep_loses_no_synced_file_and_leaks_no_zone() {
    let g = geometry(4, 12);
    let (mut cycles, mut synced, mut collected, mut in_background) = (0, 0, 0, 0);
    for seed in 0..25u64 {
        let fs = FaultFs::new(seed);
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut model = Model::default();
        drop(open(&fs, g));
        for _ in 0..45 {
            let zfs = open_collecting(&fs, g);
            model.check(&zfs);
            // Keep the device from filling: the sweep is about crashes, not space.
            while model.certain.len() > 4 {
                let name = model.certain.keys().next().unwrap().clone();
                zfs.remove_file(&dir().join(&name)).unwrap();
                model.certain.remove(&name);
            }
            fs.fail_after(rng.gen_range(0..60), FaultKind::Io, false);
            for _ in 0..30 {
                // Any error ends the cycle: the injected fault, or a full device.
                if model.step(&zfs, &mut rng).is_err() {
                    break;
                }
            }
            fs.clear_faults();
            in_background += zfs.stats().gc_background_zones;
            match rng.gen_range(0..5) {
                0 => fs.process_crash(),
                1 => fs.crash(CrashPolicy::DropUnsynced),
                2 => fs.crash(CrashPolicy::KeepRandomPages),
                3 => fs.crash(CrashPolicy::TearLastSector),
                _ => fs.crash(CrashPolicy::KeepRandomWrites),
            }
            drop(zfs);
            cycles += 1;
        }
        let zfs = open(&fs, g);
        model.check(&zfs);
        synced += model.synced;
        collected += model.collected;
    }
    assert!(cycles >= 1000, "{cycles} crash/reopen cycles");
    assert!(synced >= 1000, "only {synced} files synced");
    assert!(
        collected >= 50,
        "the foreground collector emptied only {collected} zones"
    );
    assert!(
        in_background >= 50,
        "the background collector emptied only {in_background} zones"
    );
}
