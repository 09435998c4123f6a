pub mod inspect;
pub mod run;
pub mod zoo;
