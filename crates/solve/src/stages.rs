//! Where a solve's time goes, stage by stage: what `placer solve --verbose` prints and
//! each plan records (`SolverReport::stages`), so that a slow solve says which stage was
//! slow, and a benchmark can read it back.

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// One kind of work a solve does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    /// Every baseline placed by its heuristic and scored (one evaluation each).
    Place,
    /// A placement's DRAM arena packed into the budget (repaired when it sticks out).
    LayOut,
    /// A plan built from a laid-out placement, and checked.
    Check,
    /// An ILP's rows and columns built, and its start written.
    Build,
    /// The Lagrangian bound, before and after the windows (large async models).
    Bound,
    /// A plan built from the Lagrangian bound's prices, repaired to fit.
    Priced,
    /// The windows that improve a large async model's start.
    Windows,
    /// HiGHS on the whole model.
    Highs,
}

impl Stage {
    pub fn label(self) -> &'static str {
        match self {
            Stage::Place => "placed and scored",
            Stage::LayOut => "laid out",
            Stage::Check => "planned and checked",
            Stage::Build => "built",
            Stage::Bound => "bound",
            Stage::Priced => "priced plan",
            Stage::Windows => "windows",
            Stage::Highs => "HiGHS",
        }
    }
}

/// How long one stage took, and what it worked on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageTime {
    pub stage: Stage,
    /// A baseline's name, a formulation's, "baselines" (all of them) or "plan" (the plan
    /// returned).
    pub of: String,
    pub seconds: f64,
}

/// The stages of one solve, in the order they ran.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stages(pub Vec<StageTime>);

impl Stages {
    /// Records `stage` of `of` as having run from `since` until now.
    pub fn since(&mut self, stage: Stage, of: &str, since: Instant) {
        self.add(stage, of, since.elapsed().as_secs_f64());
    }

    pub fn add(&mut self, stage: Stage, of: &str, seconds: f64) {
        self.0.push(StageTime { stage, of: of.to_string(), seconds });
    }

    /// The seconds spent in `stage`, on anything.
    pub fn total(&self, stage: Stage) -> f64 {
        self.0.iter().filter(|s| s.stage == stage).map(|s| s.seconds).sum()
    }
}
