//! Zoned tables on a damaged device: a metadata journal whose checksums hold but whose
//! extents make no sense (a bug of another build, or bytes written by hand) is `Corruption`
//! naming the device, at open and in the tools, never a panic.

mod common;

use common::{small, CAPACITY, FAST};
use std::path::Path;
use std::sync::Arc;
use tierkv::env::{FaultFs, Fs};
use tierkv::inspect::ZonedDir;
use tierkv::{Db, Options, TierConfig, WalMode};

const LBA: u64 = 4096;
const ZONE: u64 = 16 * LBA;
const ZONES: u32 = 4;

fn zoned(fs: &Arc<FaultFs>) -> Options {
    small(WalMode::Group, 64 << 10)
        .tier(TierConfig::new("fast", FAST))
        .tier(TierConfig::new("capacity", CAPACITY).with_zoned_tables(ZONE, ZONES))
        .fs(fs.clone())
        .build()
        .unwrap()
}

fn varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push(v as u8 | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

/// A journal commit (format of docs/zonefs.md) holding one snapshot of one file.
fn snapshot_commit(generation: u64, name: &str, size: u64, extents: &[(u64, u64, u64)]) -> Vec<u8> {
    let mut body = vec![1u8];
    varint(&mut body, 2); // next id
    varint(&mut body, 1); // files
    varint(&mut body, 1); // id
    varint(&mut body, name.len() as u64);
    body.extend_from_slice(name.as_bytes());
    varint(&mut body, size);
    varint(&mut body, extents.len() as u64);
    for &(zone, offset, len) in extents {
        varint(&mut body, zone);
        varint(&mut body, offset);
        varint(&mut body, len);
    }
    let mut head = Vec::new();
    head.extend_from_slice(&generation.to_le_bytes());
    head.extend_from_slice(&(body.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head), &body);
    let mut out = b"ZFJ1".to_vec();
    out.extend_from_slice(&head);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// A device (layout of `zoned::emulator`) whose zone 0 holds `commit` and zone 2 some data.
fn device_with(commit: &[u8]) -> Vec<u8> {
    let mut sb = b"TKVZONED".to_vec();
    sb.extend_from_slice(&1u32.to_le_bytes());
    sb.extend_from_slice(&LBA.to_le_bytes());
    sb.extend_from_slice(&ZONE.to_le_bytes());
    sb.extend_from_slice(&ZONE.to_le_bytes());
    sb.extend_from_slice(&ZONES.to_le_bytes());
    let crc = crc32c::crc32c(&sb);
    sb.extend_from_slice(&crc.to_le_bytes());
    let data_start = 2 * LBA;
    let mut dev = vec![0u8; (data_start + u64::from(ZONES) * ZONE) as usize];
    dev[..sb.len()].copy_from_slice(&sb);
    let z0 = data_start as usize;
    dev[z0..z0 + commit.len()].copy_from_slice(commit);
    let z2 = (data_start + 2 * ZONE) as usize;
    dev[z2..z2 + LBA as usize].fill(0x5a);
    dev
}

/// Opens the crafted device through the tools and the engine: each must fail (or, for the
/// read-only image, report) with `Corruption` naming the device.
fn assert_corruption_everywhere(commit: Vec<u8>) {
    let fs = FaultFs::new(81);
    let dir = Path::new(CAPACITY);
    fs.create_dir_all(dir).unwrap();
    fs.write_raw(&dir.join("ZONED-DEVICE"), &device_with(&commit));
    let d = ZonedDir::open(fs.as_ref(), dir).expect("the image shows a damaged journal");
    let e = d
        .image()
        .check()
        .expect_err("the image's check finds the damage");
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains("ZONED-DEVICE"), "{e}");
    // A dump reading the file through its extents gets the same error, not other bytes.
    let read = d.open_read("000005.sst").and_then(|f| {
        let mut buf = vec![0u8; 4.min(f.size() as usize)];
        f.read_exact_at(0, &mut buf).map(|()| buf)
    });
    let e = read.expect_err("no bytes are read through damaged extents");
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains("000005.sst"), "names the file: {e}");
    let e = Db::open(zoned(&fs)).expect_err("the engine refuses the damage");
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains("ZONED-DEVICE"), "{e}");
}

#[test]
fn an_extent_length_near_u64_max_is_corruption_not_a_panic() {
    let huge = u64::MAX - 10;
    assert_corruption_everywhere(snapshot_commit(7, "000005.sst", huge, &[(2, 0, huge)]));
}

#[test]
fn an_extent_offset_near_u64_max_is_corruption_not_a_panic() {
    let far = u64::MAX / LBA * LBA;
    assert_corruption_everywhere(snapshot_commit(7, "000005.sst", LBA, &[(2, far, LBA)]));
}

#[test]
fn extents_adding_past_u64_max_are_corruption_not_a_panic() {
    let big = 1u64 << 63;
    let extents = [(2, 0, big), (3, 0, big)];
    assert_corruption_everywhere(snapshot_commit(7, "000005.sst", 4, &extents));
}

#[test]
fn an_extent_in_a_metadata_zone_is_corruption_not_journal_bytes() {
    assert_corruption_everywhere(snapshot_commit(7, "000005.sst", 100, &[(0, 0, 100)]));
}

#[test]
fn a_well_formed_crafted_device_opens() {
    // The crafting itself is right: a sane journal naming zone 2's bytes opens and reads.
    let fs = FaultFs::new(82);
    let dir = Path::new(CAPACITY);
    fs.create_dir_all(dir).unwrap();
    let commit = snapshot_commit(7, "000005.sst", 100, &[(2, 0, 100)]);
    fs.write_raw(&dir.join("ZONED-DEVICE"), &device_with(&commit));
    let d = ZonedDir::open(fs.as_ref(), dir).unwrap();
    d.image().check().unwrap();
    let mut buf = vec![0u8; 100];
    d.open_read("000005.sst")
        .unwrap()
        .read_exact_at(0, &mut buf)
        .unwrap();
    assert_eq!(buf, vec![0x5a; 100]);
}

/// A damaged superblock field (here the LBA size: bit 0 of byte 12) is `Corruption` naming
/// the device, as `ZonedDir::open` documents, not an invalid-geometry complaint.
#[test]
fn a_damaged_superblock_field_is_corruption() {
    let fs = FaultFs::new(83);
    let dir = Path::new(CAPACITY);
    fs.create_dir_all(dir).unwrap();
    let device = dir.join("ZONED-DEVICE");
    let commit = snapshot_commit(7, "000005.sst", 100, &[(2, 0, 100)]);
    fs.write_raw(&device, &device_with(&commit));
    fs.flip_bit(&device, 12, 0);
    let e = ZonedDir::open(fs.as_ref(), dir).err().expect("damaged");
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains("ZONED-DEVICE"), "{e}");
    let e = ZonedDir::geometry(fs.as_ref(), dir).expect_err("damaged");
    assert!(e.is_corruption(), "{e}");
}
