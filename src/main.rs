//! `placer`: the command-line front end. It parses arguments, calls the library crates
//! and prints; all analysis lives in crates/.

// First: every module below prints with its macros (`out!`, `outln!`, `errln!`), never
// with `print!`, which panics when standard output fails.
#[macro_use]
mod out;

mod args;
mod cmd;
mod exit;
mod render;
mod table;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(name = "placer", version, about = "Place the tensors of a DNN training step across memory tiers")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compare two profiles of the same model: single against simultaneous, or any two.
    Compare(cmd::compare::Args),
    /// Bring in an ONNX model (forward or onnxruntime-training graph) as model.json.
    Import(cmd::import::Args),
    /// Summarise a model: sizes, live memory, largest tensors, configurations per node.
    Inspect(cmd::inspect::Args),
    /// The main job: profile, solve, run the plan beside the baselines, write a report.
    Pipeline(cmd::pipeline::Args),
    /// Measure every kernel in every memory configuration, in simultaneous passes.
    Profile(cmd::profile::Args),
    /// Choose where every tensor lives, and when it moves, under a DRAM budget.
    Solve(cmd::solve::Args),
    /// Run training steps for real and time every kernel, or execute a plan.
    Run(cmd::run::Args),
    /// List this host's memory pools (or another host's, from hwloc XML); --probe measures them.
    Topo(cmd::topo::Args),
    /// Generate the training graph of a well-known network.
    Zoo(cmd::zoo::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Compare(args) => cmd::compare::run(args),
        Command::Import(args) => cmd::import::run(args),
        Command::Inspect(args) => cmd::inspect::run(args),
        Command::Pipeline(args) => cmd::pipeline::run(args),
        Command::Profile(args) => cmd::profile::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Solve(args) => cmd::solve::run(args),
        Command::Topo(args) => cmd::topo::run(args),
        Command::Zoo(args) => cmd::zoo::run(args),
    };
    // What a verb leaves buffered must fail here, where it is reported, if it fails.
    match result.and_then(|()| Ok(out::flush()?)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => exit::report(&err),
    }
}
