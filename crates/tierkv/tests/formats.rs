//! Golden checks of the small on-disk formats as a new database writes them: the `TIER`
//! identity file (`docs/current.md`) and the parallel WAL's `WAL-AREA` metadata page
//! (`docs/parallel-wal.md`). The encoders' own unit tests pin the byte layouts; these pin what
//! actually lands in the directories.

use tierkv::{Db, Options, TierConfig, WalMode};

fn open(root: &std::path::Path, wal: WalMode) -> Db {
    let opts = Options::builder()
        .tier(TierConfig::new("fast", root.join("fast")))
        .tier(TierConfig::new("capacity", root.join("capacity")))
        .write_buffer_size(64 << 10)
        .wal(wal)
        .build()
        .unwrap();
    Db::open(opts).unwrap()
}

/// The database id in a TIER file: 32 lowercase hex digits.
fn db_id_of(text: &str) -> String {
    let id = text
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("db_id="))
        .expect("second line is db_id=");
    assert_eq!(id.len(), 32, "{text:?}");
    assert!(id
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    id.to_string()
}

#[test]
fn tier_files_are_three_exact_lines_with_one_database_id() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), WalMode::Group));
    let fast = std::fs::read_to_string(dir.path().join("fast/TIER")).unwrap();
    let capacity = std::fs::read_to_string(dir.path().join("capacity/TIER")).unwrap();
    let id = db_id_of(&fast);
    assert_eq!(fast, format!("tierkv-tier 1\ndb_id={id}\nname=fast\n"));
    assert_eq!(fast.len(), 63, "the documented example's length");
    assert_eq!(
        capacity,
        format!("tierkv-tier 1\ndb_id={id}\nname=capacity\n")
    );
}

#[test]
fn wal_area_metadata_page_starts_with_its_magic_and_version() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), WalMode::Parallel));
    let area = std::fs::read(dir.path().join("fast/WAL-AREA")).unwrap();
    // Two metadata pages; the first memtable's group start wrote generation 1 to page 1.
    let page = &area[4096..8192];
    assert_eq!(&page[0..8], b"tierkvWA");
    assert_eq!(&page[8..12], &1u32.to_le_bytes(), "format version");
    assert_eq!(&page[16..24], &1u64.to_le_bytes(), "generation");
    assert_eq!(&page[24..28], &4096u32.to_le_bytes(), "page size");
    assert_eq!(
        u32::from_le_bytes(page[12..16].try_into().unwrap()),
        crc32c(&page[16..]),
        "checksum of bytes 16..4096"
    );
}

/// CRC32C (Castagnoli), bit by bit: the test's own reference, independent of the engine's.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
