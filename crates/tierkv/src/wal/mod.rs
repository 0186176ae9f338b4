//! Write-ahead logging: the checksummed record format (`log`, shared with the MANIFEST) and
//! the set of WAL files of an open database (`set`). The WAL knows records and files, not
//! memtables or levels.

pub mod log;
pub mod set;

pub use set::WalSet;
pub mod parallel;
pub mod uring;
