//! Terminal rendering shared by more than one verb.

pub mod plans;
pub mod progress;
