//! The owners' defaults, which the sections that span crates read in their `Default`s: each
//! default number is written once, in the struct of the crate that uses it
//! ([`NodeConfig::default`], [`StoreConfig::default_for`]), and the section takes it from there
//! in its own unit type.

use std::num::{NonZeroU64, NonZeroUsize};
use std::time::Duration;

use switchboard_node::units::{NonZeroDuration, Size};
use switchboard_node::NodeConfig;
use switchboard_store::StoreConfig;

/// The node's defaults.
pub(super) fn node() -> NodeConfig {
    NodeConfig::default()
}

/// The store's defaults (the node id is not one: it is set at start-up).
pub(super) fn store() -> StoreConfig {
    StoreConfig::default_for("")
}

/// An owner's default duration as a key that must be positive. Panics when it is zero (a
/// default the config would refuse; a test loads every default).
pub(super) fn positive(duration: Duration) -> NonZeroDuration {
    NonZeroDuration::new(duration).expect("an owner's default duration is not zero")
}

/// An owner's default byte count as a size.
pub(super) fn size(bytes: usize) -> Size {
    Size::bytes(u64::try_from(bytes).unwrap_or(u64::MAX))
}

/// An owner's default count as a key that must be positive.
pub(super) fn count(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).expect("an owner's default count is not zero")
}

/// An owner's default 64-bit count as a key that must be positive.
pub(super) fn count64(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).expect("an owner's default count is not zero")
}
