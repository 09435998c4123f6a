pub mod host_args;
pub mod inspect;
pub mod run;
pub mod topo;
pub mod zoo;
