//! Host discovery.
