//! Fixtures shared by the engine's integration tests, one copy each: tier layouts, option sets,
//! keys and values, bounded waits on handles and threads, and the plumbing of crash tests
//! (freezing and crashing a `FaultFs`, dropping a dead `Db`, file-system images, failure lists).

// Every test binary compiles this module with `mod common;` and uses only some of it.
#![allow(dead_code, unused_imports)]

pub mod crash;
pub mod damage;
pub mod forward;
pub mod kv;
pub mod opts;
pub mod tiers;
pub mod wait;

pub use crash::{crash_now, drop_within, env_u64, Crash, Failures, FsImage, CRASHES, DROP_LIMIT};
pub use damage::{compacted_tables, damage_options, fill_noise, middle_table, noise_value};
pub(crate) use forward::forward_fs;
pub use kv::{
    answered_by_store, assert_same_entries, assert_scan_matches, collect_entries, get_named, key,
    key6, large_value, names, put_named, read_entries, round_value, scan, show_bytes, show_entry,
    small_value, value, versioned_value, write_two_slab_jobs, Entry, Model,
};
pub use opts::{
    hot_slab, hot_slab_options, sized, small, split_collected_on_call, split_small_files, tiny,
    MODES, SPLIT_THRESHOLD, VLOG_FILE_SIZE,
};
pub use tiers::{vlog_files, PmDirs, TierSetup, CAPACITY, FAST};
pub use wait::{
    block_on, block_on_counted, each_mode, poll_for, ready_within, submit, try_submit,
    wait_bounded, wait_for, wait_ready, within, Blocked, HANDLE_LIMIT, TEST_LIMIT,
};
