//! Appends of any size and reads of any range map onto extents byte for byte.

use super::*;

/// Append sizes around and across LBA boundaries, and larger than a zone.
const PIECES: [usize; 11] = [1, 4095, 4096, 4097, 3, 70_000, 8191, 12_288, 2, 40_000, 5];

/// Appends `data` to a new file in `PIECES`-sized pieces (cycling), syncing after every
/// `sync_every` pieces (0: only at the end).
fn write_in_pieces(zfs: &ZoneFs, name: &str, data: &[u8], sync_every: usize) {
    let mut f = zfs.create(&dir().join(name)).unwrap();
    let (mut at, mut n) = (0, 0);
    while at < data.len() {
        let len = PIECES[n % PIECES.len()].min(data.len() - at);
        f.append(&data[at..at + len]).unwrap();
        at += len;
        n += 1;
        if sync_every > 0 && n % sync_every == 0 {
            f.sync().unwrap();
        }
        assert_eq!(f.size(), at as u64);
    }
    f.sync().unwrap();
    f.close().unwrap();
}

/// Ranges that start and end inside one LBA, on LBA boundaries, across LBAs and across
/// extents and zones.
fn ranges(len: u64) -> Vec<(u64, u64)> {
    let mut r = vec![
        (0, len),
        (0, 1),
        (len - 1, 1),
        (4095, 2),
        (4096, 4096),
        (100, 200),
    ];
    // Windows large enough to prefetch the bytes after them, up to and at the file's end.
    for n in [65_536, 100_000] {
        if n < len {
            r.extend([(1, n), (len - n, n), (len - n - 1, n)]);
        }
    }
    for start in [1, 4095, 4096, 4097, 8000, 12_289, 40_000, 65_535] {
        for n in [1, 17, 4095, 4096, 4097, 9000, 33_000] {
            if start + n <= len {
                r.push((start, n));
            }
        }
    }
    r
}

fn assert_reads_match(zfs: &ZoneFs, name: &str, data: &[u8]) {
    let file = zfs.open_read(&dir().join(name)).unwrap();
    for (start, n) in ranges(data.len() as u64) {
        let mut got = vec![0u8; n as usize];
        file.read_exact_at(start, &mut got).unwrap();
        let want = &data[start as usize..(start + n) as usize];
        assert!(got == want, "{name}: {n} bytes at {start} differ");
    }
}

#[test]
fn appends_of_any_size_read_back_at_any_range() {
    let fs = FaultFs::new(41);
    // 16 LBAs per zone: a 70 KB append spans two zones.
    let g = geometry(16, 12);
    let zfs = open(&fs, g);
    let one_extent = pattern(6, 30_000);
    let synced_often = pattern(7, 150_000);
    write_in_pieces(&zfs, "000001.sst", &one_extent, 0);
    write_in_pieces(&zfs, "000002.sst", &synced_often, 3);
    assert_eq!(
        zfs.zone_map().1["000001.sst"].len(),
        1,
        "unsynced appends in one zone grow one extent"
    );
    assert!(zfs.zone_map().1["000002.sst"].len() >= 4);
    assert_reads_match(&zfs, "000001.sst", &one_extent);
    assert_reads_match(&zfs, "000002.sst", &synced_often);
    drop(zfs);
    let zfs = open(&fs, g);
    assert_reads_match(&zfs, "000001.sst", &one_extent);
    assert_reads_match(&zfs, "000002.sst", &synced_often);
    assert_no_leaks(&zfs);
}

#[test]
fn a_synced_partial_lba_is_padded_once_and_the_next_append_starts_a_new_extent() {
    let fs = FaultFs::new(42);
    let zfs = open(&fs, geometry(16, 8));
    let path = dir().join("a");
    let mut f = zfs.create(&path).unwrap();
    let data = pattern(8, 4096 + 100 + 5000);
    f.append(&data[..4096 + 100]).unwrap();
    f.sync().unwrap();
    f.append(&data[4096 + 100..]).unwrap();
    f.sync().unwrap();
    f.close().unwrap();
    let stats = zfs.stats();
    // 4196 bytes padded to 8192, then 5000 padded to 8192.
    assert_eq!(stats.padding_bytes, (8192 - 4196) + (8192 - 5000));
    assert_eq!(stats.data_bytes, 8192 * 2);
    let extents = &zfs.zone_map().1["a"];
    assert_eq!(extents.len(), 2, "{extents:?}");
    assert_eq!(extents[1].offset, extents[0].offset + 8192);
    assert_eq!(read(&zfs, "a"), data);
}
