//! The public API stays nameable: every root item, every type a public method returns, and the
//! `env` and `inspect` surfaces are named here by path, so making one of them private (or
//! moving it) breaks this test instead of a user's build.

use std::path::Path;
use std::sync::Arc;
use tierkv::env::{
    CrashPolicy, FaultFs, FaultKind, FileLock, Fs, IoTarget, PositionalFile, PosixFs,
    RandomAccessFile, WritableFile,
};
use tierkv::inspect::{
    decode_footer, decode_index, decode_properties, decode_stored_block, decode_version_edit,
    human_bytes, parse_file_name, parse_internal_key, parse_size, read_area, read_identity,
    user_key, AreaBatch, AreaLayout, AreaMeta, AreaRecovered, AreaSlot, AutoPlaceConfig,
    BlockEntry, BlockHandle, BlockView, FileKind, FilterView, InternalIterator, LogReader, LogTail,
    NewFile, ParsedKey, RecoveredManifest, Table, TableFooter, TableIter, TableProperties,
    ValueKind, VersionEdit, BLOCK_TRAILER_LEN, IN_MEMORY,
};
use tierkv::{
    BatchIter, BatchOp, CacheOptions, CompactionOptions, Compression, Db, DbIterator, Durability,
    Entries, Error, Handle, LevelStats, LiveFile, MemtableOptions, Options, OptionsBuilder,
    PipelineOptions, Placement, PlacementOptions, ReadOptions, RecoveryMode, Result, ScanEntries,
    SeqNo, Snapshot, Stats, TableOptions, TierConfig, TierIo, TierStats, Transaction, WalMode,
    WalOptions, WriteBatch, WriteOptions, MAX_BATCH_BYTES, MAX_KEY_LEN, MAX_VALUE_LEN,
};

fn open(fs: &Arc<FaultFs>) -> Result<Db> {
    let builder: OptionsBuilder = Options::builder()
        .tier(TierConfig::new("fast", "/api/fast"))
        .tier(TierConfig::new("capacity", "/api/capacity"))
        .fs(fs.clone());
    let opts: Options = builder.build()?;
    let _: (Placement, WalMode, RecoveryMode, Compression) = (
        opts.placement.mode,
        opts.wal.mode,
        opts.wal.recovery_mode,
        opts.table.compression,
    );
    let _: (
        &MemtableOptions,
        &CompactionOptions,
        &TableOptions,
        &CacheOptions,
        &WalOptions,
        &PlacementOptions,
        &PipelineOptions,
    ) = (
        &opts.memtable,
        &opts.compaction,
        &opts.table,
        &opts.cache,
        &opts.wal,
        &opts.placement,
        &opts.pipeline,
    );
    let _: AutoPlaceConfig = opts.auto_place_config();
    Db::open(opts)
}

#[test]
fn root_items_are_nameable() -> Result<()> {
    let fs = FaultFs::new(7);
    let db = open(&fs)?;
    let sync = WriteOptions {
        durability: Durability::Sync,
    };

    let mut batch = WriteBatch::new();
    batch.put(b"a", b"1");
    batch.delete(b"b");
    let ops: BatchIter<'_> = batch.iter();
    let ops: Vec<BatchOp<'_>> = ops.collect::<Result<_>>()?;
    assert_eq!(ops, [BatchOp::Put(b"a", b"1"), BatchOp::Delete(b"b")]);
    db.write(&sync, batch)?;

    let snapshot: Snapshot = db.snapshot();
    let _: SeqNo = snapshot.sequence();
    db.put(&sync, b"c", b"3")?;

    let txn: Transaction<'_> = db.transaction();
    let done: Handle<()> = txn.submit_commit(&sync)?;
    done.wait()?;

    let scan: Handle<ScanEntries> = db.submit_scan(ReadOptions::default(), b"", 10)?;
    assert_eq!(scan.wait()?.len(), 2);
    let mut it: DbIterator = db.iter(ReadOptions::at(&snapshot))?;
    it.seek_to_first();
    let entries: Entries = it.entries();
    assert_eq!(entries.count(), 1);

    db.flush()?;
    let stats: Stats = db.stats();
    let _: (&TierStats, &LevelStats) = (&stats.tiers[0], &stats.levels[0]);
    let _: Option<&TierIo> = stats.tier_io.first();
    let files: Vec<LiveFile> = db.live_files();
    assert!(!files.is_empty());

    let too_long = vec![0u8; MAX_KEY_LEN + 1];
    let err: Error = db.put(&sync, &too_long, b"").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)));
    const { assert!(MAX_VALUE_LEN < MAX_BATCH_BYTES) };
    Ok(())
}

/// What a user implementing [`Fs`] needs is public in `env`.
#[test]
fn env_items_are_nameable() {
    fn takes_fs(_: &dyn Fs) {}
    fn file_traits(
        _: Option<Box<dyn WritableFile>>,
        _: Option<Arc<dyn RandomAccessFile>>,
        _: Option<Arc<dyn PositionalFile>>,
        _: Option<Box<dyn FileLock>>,
        _: Option<IoTarget>,
    ) {
    }
    takes_fs(&PosixFs::new());
    let fault = FaultFs::new(1);
    takes_fs(fault.as_ref());
    fault.fail_after(1_000_000, FaultKind::Io, true);
    fault.crash(CrashPolicy::DropUnsynced);
    file_traits(None, None, None, None, None);
}

/// What the project's tools read offline is public in `inspect`.
#[test]
fn inspect_items_are_nameable() -> Result<()> {
    let fs = FaultFs::new(9);
    {
        let db = open(&fs)?;
        db.put(&WriteOptions::sync(), b"key", b"value")?;
        db.flush()?;
    }
    let dir = Path::new("/api/fast");
    let m: RecoveredManifest = RecoveredManifest::read(fs.as_ref(), dir)?.unwrap();
    let edits: &[VersionEdit] = &m.edits;
    let added: Vec<&NewFile> = edits.iter().flat_map(|e| &e.new_files).collect();
    let table = added[0];
    let path = Path::new(if table.tier == "fast" {
        "/api/fast"
    } else {
        "/api/capacity"
    })
    .join(format!("{:06}.sst", table.number));
    let name = path.file_name().unwrap().to_str().unwrap();
    assert_eq!(parse_file_name(name), Some((FileKind::Table, table.number)));

    let t = Table::open(fs.open_read(&path)?, &path)?;
    let props: &TableProperties = t.properties();
    assert_eq!(props.num_entries, 1);
    assert!(t.verify_checksums()? > 0);
    assert!(!t.index_entries().is_empty() && BLOCK_TRAILER_LEN > 0);
    let mut it: TableIter = t.iter();
    it.seek_to_first();
    let parsed: ParsedKey<'_> = parse_internal_key(it.key()).unwrap();
    assert_eq!(
        (parsed.user_key, parsed.kind),
        (&b"key"[..], ValueKind::Value)
    );
    assert_eq!(user_key(it.key()), b"key");
    it.status()?;

    for n in fs.list_dir(dir)? {
        if let Some((FileKind::Wal, _)) = parse_file_name(&n) {
            let mut log = LogReader::open(fs.as_ref(), &dir.join(&n), RecoveryMode::PointInTime)?;
            while log.next_record()?.is_some() {}
            let _: LogTail = log.tail();
        }
    }
    assert!(read_identity(fs.as_ref(), dir)?.is_some());
    assert_eq!(parse_size("1 KiB")?, 1024);
    assert_eq!(human_bytes(1024), "1.0 KiB");
    let _: Option<AreaMeta> = AreaMeta::decode(&[0u8; 4096]);
    let _: Option<(AreaLayout, AreaSlot)> = None;
    Ok(())
}

/// The in-memory decoders of `inspect` read a real table's parts and a real MANIFEST the way
/// the engine does.
#[test]
fn inspect_part_decoders_read_real_files() -> Result<()> {
    let fs = FaultFs::new(10);
    {
        let db = open(&fs)?;
        for i in 0..50u32 {
            db.put(
                &WriteOptions::sync(),
                format!("key{i:03}").as_bytes(),
                b"value",
            )?;
        }
        db.flush()?;
    }
    let dir = Path::new("/api/fast");
    let m = RecoveredManifest::read(fs.as_ref(), dir)?.unwrap();
    let file = m.edits.iter().flat_map(|e| &e.new_files).next().unwrap();
    let tier_dir = if file.tier == "fast" {
        dir
    } else {
        Path::new("/api/capacity")
    };
    let bytes = fs
        .file_contents(&tier_dir.join(format!("{:06}.sst", file.number)))
        .unwrap();
    let part = |h: BlockHandle| -> Result<Vec<u8>> {
        let end = (h.offset + h.size) as usize + BLOCK_TRAILER_LEN;
        decode_stored_block(&bytes[h.offset as usize..end])
    };

    let footer: TableFooter = decode_footer(&bytes[bytes.len() - 64..])?;
    let props: TableProperties = decode_properties(&part(footer.properties)?)?;
    assert_eq!(props.num_entries, 50);
    let index: Vec<(Vec<u8>, BlockHandle)> = decode_index(part(footer.index)?)?;
    assert_eq!(index.len() as u64, props.num_data_blocks);
    let mut keys = Vec::new();
    for (_, h) in &index {
        let block = BlockView::decode(part(*h)?)?;
        let forward: Vec<BlockEntry> = block.entries()?;
        let mut backward = block.entries_backward()?;
        backward.reverse();
        assert_eq!(forward, backward);
        assert_eq!(block.seek(&forward[0].0)?, Some(forward[0].clone()));
        keys.extend(forward.into_iter().map(|(k, _)| user_key(&k).to_vec()));
    }
    assert_eq!(keys.len(), 50);
    if footer.filter.size > 0 {
        let filter = FilterView::decode(part(footer.filter)?)?;
        assert!(keys.iter().all(|k| filter.may_contain(k)));
    }

    let manifest = dir.join(format!("MANIFEST-{:06}", m.manifest_number));
    let mut log = LogReader::open(fs.as_ref(), &manifest, RecoveryMode::PointInTime)?;
    let mut edits = Vec::new();
    while let Some((_, payload)) = log.next_record()? {
        // NB: an empty record vouches for the edit before it (docs/manifest.md).
        if !payload.is_empty() {
            edits.push(decode_version_edit(payload)?);
        }
    }
    assert_eq!(edits, m.edits);
    match decode_version_edit(&[0x3f, 0]) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, Path::new(IN_MEMORY)),
        other => panic!("an unknown required tag must be corruption: {other:?}"),
    }

    let area: AreaRecovered = read_area(
        fs.as_ref(),
        &dir.join("WAL-AREA"),
        0,
        RecoveryMode::default(),
    )?;
    let _: &[AreaBatch] = &area.batches;
    assert!(area.batches.is_empty() && area.meta.is_none());
    Ok(())
}
