//! # switchboard-tests
//!
//! The one harness every integration test goes through: it starts a real `redis-server` and real
//! `switchboard` node processes on free loopback ports, and kills them by PID when dropped. Waits
//! go through [`eventually::eventually`], never a bare sleep.
//!
//! Modules:
//! - [`redis_server`]: a private `redis-server` per test on a free port.
//! - [`eventually`]: the bounded polling helper.
//! - [`ports`]: free loopback ports.

pub mod eventually;
pub mod ports;
pub mod redis_server;
