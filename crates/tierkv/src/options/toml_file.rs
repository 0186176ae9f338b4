//! Options from TOML: one table per option group (`[memtable]`, `[wal]`, ...), tiers as
//! `[[tier]]`, sizes as integers or strings with a unit (`"64MiB"`).
//!
//! The flat keys of earlier configuration files (`write_buffer_size = ...`, `wal = "parallel"`)
//! are still read: each is moved into its group's table by [`super::OPTION_NAMES`] before the
//! groups are deserialized, and giving one option both ways is an error. Unknown keys are an
//! error naming the key.

use super::{Options, OPTION_NAMES};
use crate::error::{Error, Result};
use serde::Deserialize;

/// Parses options from TOML text; see the module doc.
pub(super) fn parse(text: &str) -> Result<Options> {
    let mut table: toml::Table =
        toml::from_str(text).map_err(|e| Error::invalid(format!("TOML: {e}")))?;
    move_flat_keys(&mut table)?;
    // NB: on one line: the message ends "\nin `group.option`\n" (no source snippet here).
    Options::deserialize(toml::Value::Table(table)).map_err(|e| {
        let message = e.to_string();
        Error::invalid(format!("TOML: {}", message.trim_end().replace('\n', " ")))
    })
}

/// Moves each flat key of an earlier configuration file into its group's table.
pub(super) fn move_flat_keys(table: &mut toml::Table) -> Result<()> {
    for &(flat, group, field) in OPTION_NAMES {
        if group.is_empty() {
            continue;
        }
        // NB: `wal` and `placement` are both a flat key (the mode, a string) and a group
        // (a table); only the string form is the flat key.
        if table.get(flat).is_none_or(toml::Value::is_table) {
            continue;
        }
        let value = table.remove(flat).expect("present");
        let section = table
            .entry(group)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let Some(section) = section.as_table_mut() else {
            return Err(Error::invalid(format!(
                "TOML: `{group}` must be a table of options"
            )));
        };
        if section.contains_key(field) {
            return Err(Error::invalid(format!(
                "TOML: option {flat} is given twice (as `{flat}` and as `{group}.{field}`)"
            )));
        }
        section.insert(field.to_string(), value);
    }
    Ok(())
}

/// Parses a byte size: an integer, or a number with a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB).
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(Error::invalid(format!(
                "size {text:?}: unknown unit {unit:?}"
            )))
        }
    };
    let value: f64 = num.parse().map_err(|_| {
        Error::invalid(format!(
            "size {text:?} is not a number with an optional unit"
        ))
    })?;
    if !value.is_finite() || value < 0.0 {
        return Err(Error::invalid(format!(
            "size {text:?} must be a non-negative number"
        )));
    }
    let bytes = value * mult as f64;
    // `as u64` would saturate silently; 2^64 is the first value it cannot hold.
    if bytes >= 18_446_744_073_709_551_616.0 {
        return Err(Error::invalid(format!(
            "size {text:?} is more than a 64-bit byte count holds"
        )));
    }
    Ok(bytes as u64)
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SizeValue {
    Int(u64),
    Text(String),
}

/// A size: an integer or a string with a unit.
pub(super) fn de_size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match SizeValue::deserialize(d)? {
        SizeValue::Int(v) => Ok(v),
        SizeValue::Text(s) => parse_size(&s).map_err(|e| serde::de::Error::custom(e.detail())),
    }
}

/// A size held in a `usize`.
pub(super) fn de_size_usize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    let v = de_size(d)?;
    usize::try_from(v).map_err(|_| serde::de::Error::custom(format!("size {v} is too large")))
}

/// An optional size: present means `Some`.
pub(super) fn de_opt_size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_size(d).map(Some)
}
