//! The pipeline report (written below).
