//! The value types of config keys that carry a unit: durations written as human strings
//! (`"30s"`, `"30m"`, `"250ms"`, through `humantime`) and byte sizes (`"4MiB"`, `"16KiB"` or a
//! plain byte count, through `bytesize`). Both refuse zero, so a key that must be positive says so
//! at deserialization, with its dotted path.
//!
//! Settings structs that keep plain `Duration`/`usize` fields (the node reads them as such) put
//! these spellings on a field with `#[serde(with = "...")]`: [`positive_duration`],
//! [`size_bytes`], [`positive_count`].

use std::fmt;
use std::num::NonZeroU64;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A duration greater than zero, written as a `humantime` string (`"1s"`, `"1500ms"`, `"1h"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NonZeroDuration(Duration);

impl NonZeroDuration {
    /// `duration`, or `None` when it is zero.
    pub const fn new(duration: Duration) -> Option<NonZeroDuration> {
        if duration.is_zero() {
            None
        } else {
            Some(NonZeroDuration(duration))
        }
    }

    /// `secs` seconds. Panics (at compile time in a `const`) when zero.
    pub const fn secs(secs: u64) -> NonZeroDuration {
        NonZeroDuration::millis(secs * 1000)
    }

    /// `ms` milliseconds. Panics (at compile time in a `const`) when zero.
    pub const fn millis(ms: u64) -> NonZeroDuration {
        match NonZeroDuration::new(Duration::from_millis(ms)) {
            Some(d) => d,
            None => panic!("a NonZeroDuration is not zero"),
        }
    }

    /// The duration.
    pub const fn get(self) -> Duration {
        self.0
    }
}

impl fmt::Display for NonZeroDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}",
            humantime_serde::re::humantime::format_duration(self.0)
        )
    }
}

impl Serialize for NonZeroDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        humantime_serde::serialize(&self.0, serializer)
    }
}

impl<'de> Deserialize<'de> for NonZeroDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let duration: Duration = humantime_serde::deserialize(deserializer)?;
        NonZeroDuration::new(duration).ok_or_else(|| {
            de::Error::invalid_value(de::Unexpected::Str("0s"), &"a duration greater than 0")
        })
    }
}

/// A byte size greater than zero: `"4MiB"`, `"16KiB"`, `"64kB"` (1000s) or a plain byte count.
/// Written back exactly: in the largest binary unit that divides it, else in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(NonZeroU64);

impl Size {
    /// `bytes` bytes. Panics (at compile time in a `const`) when zero.
    pub const fn bytes(bytes: u64) -> Size {
        match NonZeroU64::new(bytes) {
            Some(n) => Size(n),
            None => panic!("a Size is not zero"),
        }
    }

    /// `n` KiB.
    pub const fn kib(n: u64) -> Size {
        Size::bytes(n * 1024)
    }

    /// `n` MiB.
    pub const fn mib(n: u64) -> Size {
        Size::bytes(n * 1024 * 1024)
    }

    /// The size in bytes.
    pub const fn get(self) -> u64 {
        self.0.get()
    }

    /// The size in bytes as a `usize`, saturating (a size past the address space is no limit).
    pub fn as_usize(self) -> usize {
        usize::try_from(self.get()).unwrap_or(usize::MAX)
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        let n = self.get();
        match UNITS.iter().find(|(unit, _)| n.is_multiple_of(*unit)) {
            Some((unit, name)) => write!(f, "{}{name}", n / unit),
            None => write!(f, "{n}B"),
        }
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SizeVisitor)
    }
}

struct SizeVisitor;

impl SizeVisitor {
    fn nonzero<E: de::Error>(bytes: u64) -> Result<Size, E> {
        NonZeroU64::new(bytes)
            .map(Size)
            .ok_or_else(|| E::invalid_value(de::Unexpected::Unsigned(0), &"a size greater than 0"))
    }
}

impl Visitor<'_> for SizeVisitor {
    type Value = Size;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a size like \"4MiB\", \"16KiB\" or a byte count")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
        SizeVisitor::nonzero(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
        let v = u64::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))?;
        SizeVisitor::nonzero(v)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
        let parsed: bytesize::ByteSize = v
            .trim()
            .parse()
            .map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))?;
        SizeVisitor::nonzero(parsed.as_u64())
    }
}

/// `#[serde(with = "positive_duration")]` on a `Duration` field: written and read as a
/// [`NonZeroDuration`] (`"10m"`), so zero is refused when read.
pub mod positive_duration {
    use super::*;

    /// Writes `duration` as a `humantime` string.
    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        humantime_serde::serialize(duration, serializer)
    }

    /// Reads a `humantime` string greater than zero.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        NonZeroDuration::deserialize(deserializer).map(NonZeroDuration::get)
    }
}

/// `#[serde(with = "size_bytes")]` on a `usize` byte count: written and read as a [`Size`]
/// (`"64KiB"` or a byte count), so zero is refused when read.
pub mod size_bytes {
    use super::*;

    /// Writes `bytes` as a [`Size`] (a plain `0` for zero, which only code can set).
    pub fn serialize<S: Serializer>(bytes: &usize, serializer: S) -> Result<S::Ok, S::Error> {
        match NonZeroU64::new(u64::try_from(*bytes).unwrap_or(u64::MAX)) {
            Some(n) => Size(n).serialize(serializer),
            None => serializer.serialize_u64(0),
        }
    }

    /// Reads a [`Size`] greater than zero, saturating at `usize::MAX`.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<usize, D::Error> {
        Size::deserialize(deserializer).map(Size::as_usize)
    }
}

/// `#[serde(with = "positive_count")]` on a `usize` count: read as an integer greater than zero.
pub mod positive_count {
    use std::num::NonZeroUsize;

    use super::*;

    /// Writes `count` as an integer.
    pub fn serialize<S: Serializer>(count: &usize, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(*count).unwrap_or(u64::MAX))
    }

    /// Reads an integer greater than zero.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<usize, D::Error> {
        NonZeroUsize::deserialize(deserializer).map(NonZeroUsize::get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    struct Both {
        size: Size,
        every: NonZeroDuration,
    }

    fn parse(text: &str) -> Result<Both, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn sizes_and_durations_read_units_and_write_them_back_exactly() {
        let both = parse("size = \"4MiB\"\nevery = \"1500ms\"").unwrap();
        assert_eq!(both.size.get(), 4 * 1024 * 1024);
        assert_eq!(both.every.get(), Duration::from_millis(1500));
        assert_eq!(parse(&toml::to_string(&both).unwrap()).unwrap(), both);
        for (text, bytes) in [("4096", 4096), ("\"16KiB\"", 16384), ("\"64kB\"", 64_000)] {
            let both = parse(&format!("size = {text}\nevery = \"1s\"")).unwrap();
            assert_eq!(both.size.get(), bytes, "{text}");
            assert_eq!(parse(&toml::to_string(&both).unwrap()).unwrap(), both);
        }
        assert_eq!(Size::bytes(1500).to_string(), "1500B");
        assert_eq!(Size::kib(16).to_string(), "16KiB");
    }

    #[test]
    fn zero_and_nonsense_are_refused() {
        for text in [
            "size = 0\nevery = \"1s\"",
            "size = \"0B\"\nevery = \"1s\"",
            "size = 1\nevery = \"0s\"",
            "size = \"lots\"\nevery = \"1s\"",
            "size = 1\nevery = \"soon\"",
            "size = 1\nevery = 5",
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
    }

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    struct Plain {
        #[serde(with = "positive_duration")]
        every: Duration,
        #[serde(with = "size_bytes")]
        size: usize,
        #[serde(with = "positive_count")]
        count: usize,
    }

    #[test]
    fn plain_fields_take_the_same_spellings_and_refuse_zero() {
        let text = "every = \"10m\"\nsize = \"64KiB\"\ncount = 1000";
        let plain: Plain = toml::from_str(text).unwrap();
        assert_eq!(
            plain,
            Plain {
                every: Duration::from_secs(600),
                size: 65_536,
                count: 1000
            }
        );
        assert_eq!(toml::to_string(&plain).unwrap().trim(), text);
        for bad in [
            "every = \"0s\"\nsize = 1\ncount = 1",
            "every = \"1s\"\nsize = 0\ncount = 1",
            "every = \"1s\"\nsize = 1\ncount = 0",
        ] {
            assert!(toml::from_str::<Plain>(bad).is_err(), "{bad}");
        }
    }
}
