//! Placeholder: filled in by the memkind work.
