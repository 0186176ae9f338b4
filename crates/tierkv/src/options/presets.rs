//! Presets: a builder call that sets the options one system's configuration needs, on top of
//! which the caller adds tiers and may still override any option.

use super::{OptionsBuilder, ValuesMode};

impl OptionsBuilder {
    /// SplitKV's configuration: values of 4 KiB or more in a value log on the capacity tier
    /// (`values = "split"`, `split_threshold = 4 KiB`), 64 MiB value-log files, so garbage
    /// collection rewrites little per file, and a file collected once a third of it is
    /// garbage, which keeps the value log within 1.5x its live bytes
    /// (`docs/value-log.md`, "Garbage collection").
    pub fn splitkv(self) -> Self {
        self.values(ValuesMode::Split)
            .split_threshold(4 << 10)
            .vlog_file_size(64 << 20)
            .vlog_gc_threshold(1.0 / 3.0)
    }
}

#[cfg(test)]
mod tests {
    use crate::options::{Options, OptionsBuilder, TierConfig, ValuesMode};

    fn one_tier() -> OptionsBuilder {
        Options::builder().tier(TierConfig::new("fast", "/unused/fast"))
    }

    #[test]
    fn splitkv_sets_split_values_and_leaves_the_rest_overridable() {
        let o = one_tier()
            .splitkv()
            .vlog_gc_round_bytes(1 << 20)
            .build()
            .unwrap();
        assert_eq!(o.values.mode, ValuesMode::Split);
        assert_eq!(o.values.split_threshold, 4096);
        assert_eq!(o.values.file_size, 64 << 20);
        assert!((o.values.gc_threshold - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(o.values.gc_round_bytes, 1 << 20);
        let later = one_tier().splitkv().split_threshold(1000).build();
        assert_eq!(later.unwrap().values.split_threshold, 1000);
    }
}
