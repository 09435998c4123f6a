//! Error reporting and exit codes.
//!
//! 0 success; 1 a failure of the tool or the system (cannot write a file, not enough
//! memory for the model);
//! 2 bad input (an invalid model, an unknown name, a bad option value, a checkpoint from
//! another model or host, a malformed budget or one no placement can meet), as clap does
//! for bad arguments; 3 `placer compare` found
//! the profiles disagree beyond `--tolerance`.
//!
//! A broken pipe (the reader of standard output went away: `placer zoo resnet50 | head`)
//! ends the command quietly with 0, as ripgrep does: the reader chose to stop reading,
//! which is not a failure of placer, and a shell's `set -o pipefail` must not fail the
//! pipeline over it. Any other failure to write standard output (a full disk) is 1.

use placer_eval::EvalError;
use placer_exec::ExecError;
use placer_host::HostError;
use placer_ir::IrError;
use placer_onnx::OnnxError;
use placer_pools::PoolError;
use placer_profile::ProfileError;
use placer_solve::SolveError;
use placer_zoo::ZooError;
use std::io::ErrorKind;
use std::process::ExitCode;

pub const BAD_INPUT: u8 = 2;
pub const FAILURE: u8 = 1;
/// `placer compare`: the two profiles were compared and do not agree within tolerance.
pub const DISAGREEMENT: u8 = 3;

/// Returned by a command whose answer is "no" (profiles disagree), so scripts can gate
/// on the exit code.
#[derive(Debug)]
pub struct Disagreement(pub String);

impl std::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Disagreement {}

pub fn report(err: &anyhow::Error) -> ExitCode {
    if broken_pipe(err) {
        return ExitCode::SUCCESS;
    }
    if let Some(IrError::Invalid { path, diagnostics }) = err.downcast_ref::<IrError>() {
        // One line per problem, each prefixed like a compiler's so editors can jump to it.
        for d in diagnostics.iter() {
            match d.location {
                Some(_) => errln!("{}:{d}", path.display()),
                None => errln!("{}: {d}", path.display()),
            }
        }
        errln!("error: {} problem(s) in {}", diagnostics.len(), path.display());
        return ExitCode::from(BAD_INPUT);
    }
    errln!("error: {err:#}");
    ExitCode::from(exit_code(err))
}

/// Whether any cause is a broken pipe: standard output's, or a file's that is one.
fn broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| cause.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == ErrorKind::BrokenPipe))
}

fn exit_code(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if cause.downcast_ref::<Disagreement>().is_some() {
            return DISAGREEMENT;
        }
        if let Some(code) = cause.downcast_ref::<ProfileError>().and_then(profile_code) {
            return code;
        }
        if let Some(code) = cause.downcast_ref::<SolveError>().and_then(solve_code) {
            return code;
        }
        if let Some(e) = cause.downcast_ref::<EvalError>() {
            let code = match e {
                // Transparent: the inner error is not a cause of its own in the chain.
                EvalError::Solve(e) => solve_code(e),
                EvalError::Host(e) => host_code(e),
                EvalError::Profile(e) => profile_code(e),
                EvalError::Run(e) => Some(exec_code(e)),
                EvalError::Usage { .. } => Some(BAD_INPUT),
                EvalError::Report { .. } => Some(FAILURE),
                EvalError::Exec { error, .. } => Some(exec_code(error)),
                // The pool error is the next cause.
                EvalError::Place { .. } => None,
            };
            if let Some(code) = code {
                return code;
            }
        }
        if cause.downcast_ref::<placer_solve::BudgetError>().is_some() {
            return BAD_INPUT;
        }
        if let Some(e) = cause.downcast_ref::<IrError>() {
            return match e {
                IrError::Read { .. } | IrError::Invalid { .. } => BAD_INPUT,
                IrError::Write { .. } => FAILURE,
            };
        }
        if let Some(e) = cause.downcast_ref::<ExecError>() {
            return exec_code(e);
        }
        if let Some(code) = cause.downcast_ref::<HostError>().and_then(host_code) {
            return code;
        }
        if let Some(e) = cause.downcast_ref::<PoolError>() {
            return match e {
                PoolError::UnknownPool { .. } => BAD_INPUT,
                PoolError::Bind { .. }
                | PoolError::Full { .. }
                | PoolError::OutOfMemory { .. }
                | PoolError::BadView { .. }
                | PoolError::BackendUnavailable { .. }
                | PoolError::Arena { .. }
                | PoolError::Copy { .. } => FAILURE,
            };
        }
        if let Some(e) = cause.downcast_ref::<OnnxError>() {
            return match e {
                OnnxError::Invalid(_) => FAILURE,
                OnnxError::Io { .. }
                | OnnxError::NotOnnx { .. }
                | OnnxError::Opset { .. }
                | OnnxError::Cycle { .. }
                | OnnxError::Malformed(_)
                | OnnxError::Unsupported { .. }
                | OnnxError::Node { .. }
                | OnnxError::Input(_) => BAD_INPUT,
            };
        }
        if let Some(e) = cause.downcast_ref::<ZooError>() {
            return match e {
                ZooError::UnknownModel { .. } | ZooError::BadBatch { .. } | ZooError::Shape(_) => BAD_INPUT,
                ZooError::Invalid(_) => FAILURE,
            };
        }
    }
    FAILURE
}

/// A plan that does not fit the model is bad input; anything going wrong while running
/// (a full pool, an arena refusing overlapping bytes) is a failure.
fn exec_code(e: &ExecError) -> u8 {
    match e {
        ExecError::UnsupportedType { .. } | ExecError::NoIterations | ExecError::Plan { .. } => BAD_INPUT,
        _ => FAILURE,
    }
}

/// `None` for a pool error, which is classified as its own cause.
fn host_code(e: &HostError) -> Option<u8> {
    match e {
        HostError::Topology { .. }
        | HostError::HostFile { .. }
        | HostError::Device { .. }
        | HostError::UnknownDevice { .. }
        | HostError::UnknownWaitModel { .. }
        | HostError::NotThisHost { .. }
        | HostError::Usage { .. }
        | HostError::NotQuiet { .. } => Some(BAD_INPUT),
        HostError::Pool(_) => None,
        HostError::Hwloc { .. } | HostError::NoDram | HostError::Probe { .. } | HostError::Cache { .. } => {
            Some(FAILURE)
        }
    }
}

/// `None` for errors classified as their own causes further down the chain.
fn profile_code(e: &ProfileError) -> Option<u8> {
    match e {
        ProfileError::Checkpoint { .. }
        | ProfileError::Mismatch { .. }
        | ProfileError::InSitu { .. }
        | ProfileError::Usage { .. }
        | ProfileError::Merge { .. }
        | ProfileError::Busy { .. }
        | ProfileError::NoCheckpoint { .. }
        | ProfileError::ModelSource { .. } => Some(BAD_INPUT),
        ProfileError::CreateDir { .. } | ProfileError::WholeStep { .. } => Some(FAILURE),
        ProfileError::Exec(_) => None,
        // Transparent: the inner error is not a cause of its own in the chain.
        ProfileError::Host(e) => host_code(e),
    }
}

/// `None` for errors classified as their own causes further down the chain.
fn solve_code(e: &SolveError) -> Option<u8> {
    match e {
        SolveError::Budget(_)
        | SolveError::Infeasible { .. }
        | SolveError::Mismatch { .. }
        | SolveError::PlanFile { .. }
        | SolveError::Usage { .. } => Some(BAD_INPUT),
        SolveError::Solver { .. } | SolveError::PlanCheck { .. } => Some(FAILURE),
        // Transparent: the inner error is not a cause of its own in the chain.
        SolveError::Profile(e) => profile_code(e),
        SolveError::Host(e) => host_code(e),
        // The host's error is the next cause.
        SolveError::Probe(_) => None,
    }
}
