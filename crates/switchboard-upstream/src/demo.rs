//! The built-in demo server.
