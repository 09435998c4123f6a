pub mod compare;
pub mod host_args;
pub mod inspect;
pub mod profile;
pub mod run;
pub mod solve;
pub mod topo;
pub mod zoo;
