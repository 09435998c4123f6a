pub mod inspect;
pub mod zoo;
