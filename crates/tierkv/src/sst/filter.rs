//! The table's bloom filter over user keys.
//!
//! Filter block contents: `bits: [u8; m/8] | num_probes: u8`. Bit `i` is bit `i % 8` of byte
//! `i / 8`. A key sets (and a query tests) `num_probes` bits at positions
//! `(h + j * delta) mod m` for `j = 0..num_probes`, where `h = hash64(user_key)` and
//! `delta = h.rotate_left(21) | 1` (double hashing from one 64-bit hash).
//!
//! INVARIANT: [`hash64`] is part of the on-disk format: changing it makes every stored filter
//! give false negatives, so it may only change together with the table format version.

/// Most probes a filter may use.
pub const MAX_PROBES: u8 = 30;

/// Fewest bits in a filter, so tiny tables still get a useful false-positive rate.
const MIN_BITS: u64 = 64;

const MUL: u64 = 0x9E37_79B9_7F4A_7C15;

/// A stable 64-bit hash of a byte string (8-byte words, multiply-xorshift, final avalanche).
pub fn hash64(data: &[u8]) -> u64 {
    let mut h = 0x7469_6572_6b76_6266 ^ (data.len() as u64).wrapping_mul(MUL);
    for chunk in data.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(MUL);
        h ^= h >> 29;
    }
    avalanche(h)
}

fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The probe count that minimises the false-positive rate: `bits_per_key * ln 2`, in 1..=30.
pub fn probes_for(bits_per_key: u32) -> u8 {
    let k = (f64::from(bits_per_key) * std::f64::consts::LN_2).round();
    k.clamp(1.0, f64::from(MAX_PROBES)) as u8
}

fn probe_positions(h: u64, m: u64, k: u8) -> impl Iterator<Item = u64> {
    let delta = h.rotate_left(21) | 1;
    (0..u64::from(k)).map(move |j| h.wrapping_add(j.wrapping_mul(delta)) % m)
}

/// Collects key hashes and builds the filter block contents.
#[derive(Debug)]
pub struct FilterBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl FilterBuilder {
    /// A builder spending about `bits_per_key` (> 0) bits per added key.
    pub fn new(bits_per_key: u32) -> Self {
        FilterBuilder {
            bits_per_key,
            hashes: Vec::new(),
        }
    }

    /// Adds a user key (adding the same key twice in a row is wasteful but harmless).
    pub fn add(&mut self, user_key: &[u8]) {
        self.hashes.push(hash64(user_key));
    }

    /// Builds the filter block contents.
    pub fn finish(&self) -> Vec<u8> {
        let want = (self.hashes.len() as u64).saturating_mul(u64::from(self.bits_per_key));
        let bytes = want.max(MIN_BITS).div_ceil(8);
        let m = bytes * 8;
        let k = probes_for(self.bits_per_key);
        let mut out = vec![0u8; bytes as usize];
        for &h in &self.hashes {
            for bit in probe_positions(h, m, k) {
                out[(bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
        out.push(k);
        out
    }
}

/// A decoded filter block.
#[derive(Debug)]
pub struct BloomFilter {
    bits: Vec<u8>,
    probes: u8,
}

impl BloomFilter {
    /// Decodes filter block contents; `Err` says what is wrong.
    pub fn decode(mut contents: Vec<u8>) -> Result<BloomFilter, String> {
        let probes = contents.pop().ok_or("empty filter block")?;
        if contents.is_empty() {
            return Err("filter block has no bits".into());
        }
        if probes == 0 || probes > MAX_PROBES {
            return Err(format!("filter probe count {probes} out of range"));
        }
        Ok(BloomFilter {
            bits: contents,
            probes,
        })
    }

    /// False only if `user_key` was certainly never added.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        let m = self.bits.len() as u64 * 8;
        probe_positions(hash64(user_key), m, self.probes)
            .all(|bit| self.bits[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(keys: impl Iterator<Item = Vec<u8>>, bits_per_key: u32) -> BloomFilter {
        let mut b = FilterBuilder::new(bits_per_key);
        keys.for_each(|k| b.add(&k));
        BloomFilter::decode(b.finish()).unwrap()
    }

    #[test]
    fn hash_golden_values() {
        // Pins hash64: stored filters depend on it.
        assert_eq!(hash64(b""), 0x0bab_1004_19f5_748c);
        assert_eq!(hash64(b"tierkv"), 0x47cb_b682_6ab5_5450);
        assert_ne!(hash64(b"a"), hash64(b"a\0"));
    }

    #[test]
    fn probes_follow_bits_per_key() {
        assert_eq!(probes_for(1), 1);
        assert_eq!(probes_for(10), 7);
        assert_eq!(probes_for(100), 30);
    }

    #[test]
    fn no_false_negatives_and_rate_near_theory() {
        let n = 20_000u32;
        let f = build((0..n).map(|i| format!("user{i}").into_bytes()), 10);
        for i in 0..n {
            assert!(f.may_contain(format!("user{i}").as_bytes()));
        }
        let trials = 100_000u32;
        let fp = (0..trials)
            .filter(|i| f.may_contain(format!("other{i}").as_bytes()))
            .count();
        let rate = fp as f64 / f64::from(trials);
        // Theory for m/n = 10, k = 7: (1 - e^(-0.7))^7 ~= 0.0082.
        assert!(
            (0.004..0.0125).contains(&rate),
            "false-positive rate {rate}"
        );
    }

    #[test]
    fn empty_filter_rejects_and_bad_blocks_fail() {
        let f = build(std::iter::empty(), 10);
        assert!(!f.may_contain(b"x"));
        assert!(BloomFilter::decode(vec![]).is_err());
        assert!(BloomFilter::decode(vec![7]).is_err());
        assert!(BloomFilter::decode(vec![0xff, 0]).is_err());
        assert!(BloomFilter::decode(vec![0xff, 31]).is_err());
    }
}
