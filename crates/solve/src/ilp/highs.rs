//! Handing the model to HiGHS (through good_lp) and reading back what it found.

use super::IlpOptions;
use super::build::{Col, Row};
use crate::SolveError;
use good_lp::{Expression, ProblemVariables, SolverModel, Variable, constraint, variable};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(super) struct HighsResult {
    pub(super) x: Vec<f64>,
    pub(super) status: String,
    pub(super) objective: f64,
    pub(super) bound: f64,
}

/// Runs HiGHS on a thread and waits at most 1.5× its time limit plus 20 s, and never past
/// `deadline`: HiGHS can overrun its own limit (in presolve, or before its first check).
/// `None` when the guard gave up (the thread is left to finish on its own; the process
/// does not wait for it).
pub(super) fn run_guarded(
    cols: &[Col],
    rows: &[Row],
    start: Option<Vec<f64>>,
    abs_gap: f64,
    time_limit: f64,
    deadline: Instant,
    opts: &IlpOptions,
) -> Result<Option<HighsResult>, SolveError> {
    let (tx, rx) = mpsc::channel();
    let (cols, rows) = (cols.to_vec(), rows.to_vec());
    let opts = IlpOptions { time_limit, ..opts.clone() };
    let guard =
        Duration::from_secs_f64(time_limit * 1.5 + 20.0).min(deadline.saturating_duration_since(Instant::now()));
    std::thread::Builder::new()
        .name("placer-highs".into())
        .spawn(move || {
            let _ = tx.send(run_highs(&cols, &rows, start.as_deref(), abs_gap, &opts));
        })
        .map_err(|e| SolveError::Solver { reason: format!("cannot start the solver thread: {e}") })?;
    match rx.recv_timeout(guard) {
        Ok(result) => result.map(Some),
        Err(_) => Ok(None),
    }
}

fn run_highs(
    cols: &[Col],
    rows: &[Row],
    start: Option<&[f64]>,
    abs_gap: f64,
    opts: &IlpOptions,
) -> Result<HighsResult, SolveError> {
    let err = |reason: String| SolveError::Solver { reason };
    let mut vars = ProblemVariables::new();
    let columns: Vec<Variable> = cols
        .iter()
        .map(|c| {
            let def = variable().min(c.lo).max(c.hi);
            vars.add(if c.integer { def.integer() } else { def })
        })
        .collect();
    let objective: Expression =
        cols.iter().zip(&columns).filter(|(c, _)| c.cost != 0.0).map(|(c, &v)| c.cost * v).sum();
    let mut problem = vars.minimise(objective).using(good_lp::solvers::highs::highs);
    for row in rows {
        let e: Expression = row.terms.iter().map(|&(c, a)| a * columns[c]).sum();
        if row.lo == row.hi {
            problem.add_constraint(constraint::eq(e, row.lo));
        } else {
            if row.lo.is_finite() {
                problem.add_constraint(constraint::geq(e.clone(), row.lo));
            }
            if row.hi.is_finite() {
                problem.add_constraint(constraint::leq(e, row.hi));
            }
        }
    }
    let mut model = problem.into_inner();
    let set = |model: &mut highs::Model, name: &str, value: OptionValue<'_>| -> Result<(), SolveError> {
        let r = match value {
            OptionValue::F(v) => model.try_set_option(name, v),
            OptionValue::B(v) => model.try_set_option(name, v),
            OptionValue::S(v) => model.try_set_option(name, v),
        };
        r.map_err(|e| err(format!("HiGHS refused option {name}: {e:?}")))
    };
    set(&mut model, "output_flag", OptionValue::B(true))?;
    set(&mut model, "log_to_console", OptionValue::B(opts.verbose))?;
    if let Some(path) = &opts.log_file {
        set(&mut model, "log_file", OptionValue::S(&path.to_string_lossy()))?;
    }
    set(&mut model, "time_limit", OptionValue::F(opts.time_limit))?;
    set(&mut model, "mip_rel_gap", OptionValue::F(1e-4))?;
    set(&mut model, "mip_abs_gap", OptionValue::F(abs_gap.max(1e-9)))?;
    if let Some(x) = start {
        model.try_set_solution(Some(x), None, None, None).map_err(|e| err(format!("warm start refused: {e:?}")))?;
    }
    let solved = model.try_solve().map_err(|e| err(format!("HiGHS failed: {e:?}")))?;
    let status = solved.status();
    use highs::HighsModelStatus as S;
    let status_text = match status {
        S::Optimal => {
            if solved.mip_gap() > 1e-9 {
                "gap limit"
            } else {
                "optimal"
            }
        }
        S::ReachedTimeLimit => "time limit",
        S::Infeasible | S::UnboundedOrInfeasible => {
            return Err(SolveError::Infeasible {
                reason: "no placement meets the capacities with the moves this formulation allows: the other pools \
                         are too small to take what DRAM cannot (try a larger budget, or sync/async moves)"
                    .into(),
                smallest_feasible: None,
            });
        }
        other => return Err(err(format!("HiGHS stopped with status {other:?}"))),
    };
    if solved.primal_solution_status() != highs::HighsSolutionStatus::Feasible {
        return Err(err(format!("HiGHS found no feasible plan ({status_text})")));
    }
    let objective = solved.objective_value();
    let bound = solved.double_info_value(c"mip_dual_bound").unwrap_or(objective);
    Ok(HighsResult { x: solved.get_solution().columns().to_vec(), status: status_text.to_string(), objective, bound })
}

enum OptionValue<'a> {
    F(f64),
    B(bool),
    S(&'a str),
}

/// Seconds at which HiGHS's branch-and-bound log first shows a finite best solution.
/// HiGHS prints one row per event; the best-solution column follows the best bound, and
/// the time is the last field ("12.3s").
pub(super) fn first_feasible_in_log(path: &std::path::Path) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut in_table = false;
    for line in text.lines() {
        if line.contains("BestBound") && line.contains("BestSol") {
            in_table = true;
            continue;
        }
        if !in_table {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(time) = fields.last().and_then(|f| f.strip_suffix('s')).and_then(|f| f.parse::<f64>().ok()) else {
            if line.trim().is_empty() {
                continue;
            }
            break;
        };
        // Columns: [src] nodes queue leaves expl% bestbound bestsol gap ...
        let numeric: Vec<&str> = fields.iter().copied().skip_while(|f| f.parse::<f64>().is_err()).collect();
        if let Some(best_sol) = numeric.get(5)
            && best_sol.parse::<f64>().is_ok_and(f64::is_finite)
        {
            return Some(time);
        }
    }
    None
}
