//! Argument structs more than one verb shares: the host options every command that
//! touches memory pools takes (which host, which layout, what to emulate, where the probe
//! cache lives), and the solver's formulation.

use anyhow::Context;
use placer_host::{EmulateChoice, Host, HostOptions};
use placer_profile::{Design, Steps};
use placer_solve::Formulation;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct HostArgs {
    /// Plan for the host described by this hwloc XML export (`lstopo --of xml`) instead
    /// of this machine. Its pools can be listed, not allocated.
    #[arg(long, value_name = "FILE.xml")]
    pub topology: Option<PathBuf>,
    /// Use the pool layout in this host file (see configs/hosts/) instead of one pool per
    /// discovered tier.
    #[arg(long, value_name = "FILE.json")]
    pub host: Option<PathBuf>,
    /// Slow tiers to emulate in DRAM: device model names or files, comma-separated, or
    /// `none`. Default: `optane-dcpmm` when this machine has nothing but DRAM. Each may
    /// end in a wait model, `:additive` (the default) or `:overlap` (reads hidden behind
    /// the kernel's compute; docs/hosts.md), then in `@POOL` to give a pool this host
    /// really has the device's timing instead of adding a pool (its data stays bound
    /// where it is: `optane-dcpmm@pmem` in a VM).
    #[arg(long, value_name = "DEVICE[:MODEL][@POOL],...", conflicts_with = "host")]
    pub emulate: Option<String>,
    /// Where measured host figures are cached [default: $PLACER_CACHE_DIR, else
    /// $XDG_CACHE_HOME/placer, else ~/.cache/placer].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
}

impl HostArgs {
    pub fn open(&self) -> anyhow::Result<Host> {
        let emulate = match self.emulate.as_deref() {
            None => EmulateChoice::Default,
            Some(list) => EmulateChoice::parse(list)?,
        };
        let options = HostOptions {
            topology_xml: self.topology.clone(),
            host_file: self.host.clone(),
            emulate,
            cache_dir: self.cache_dir.clone().unwrap_or_else(placer_host::cache::default_dir),
        };
        Host::open(&options).context("cannot determine the memory pools")
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum FormulationArg {
    Static,
    Sync,
    Async,
}

impl FormulationArg {
    /// The library's default, so that `solve` and `pipeline` cannot disagree.
    pub fn library_default() -> Self {
        match placer_solve::IlpOptions::default().formulation {
            Formulation::Static => FormulationArg::Static,
            Formulation::Sync => FormulationArg::Sync,
            Formulation::Async => FormulationArg::Async,
        }
    }

    pub fn formulation(self) -> Formulation {
        match self {
            FormulationArg::Static => Formulation::Static,
            FormulationArg::Sync => Formulation::Sync,
            FormulationArg::Async => Formulation::Async,
        }
    }
}

/// `--steps`: what a timed profiling step runs; `auto` leaves it to the model.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum StepsArg {
    Auto,
    Picked,
    Whole,
    Live,
    Isolated,
}

impl StepsArg {
    /// The steps named, or for `auto` what the profiler picks for `model`.
    pub fn steps(self, model: &placer_ir::Model) -> Steps {
        match self {
            StepsArg::Auto => placer_profile::default_steps(model),
            StepsArg::Picked => Steps::Picked,
            StepsArg::Whole => Steps::Whole,
            StepsArg::Live => Steps::Live,
            StepsArg::Isolated => Steps::Isolated,
        }
    }
}

/// `--design`: which configurations a profile measures.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum DesignArg {
    Screen,
    Full,
}

impl DesignArg {
    pub fn design(self) -> Design {
        match self {
            DesignArg::Screen => Design::Screen,
            DesignArg::Full => Design::Full,
        }
    }
}

/// `--export`: how a profile's measurements are printed.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum ExportFormat {
    Csv,
    Json,
}
