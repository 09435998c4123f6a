//! `--pin` rules as the user writes them, checked for their form when parsed. The names
//! in them (a tensor, a pool) are checked against a model and a host where a rule is
//! applied (`Pin::resolve`). A profile records its rules by their text.

use placer_ir::Role;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A rule fixing some tensors to one pool: `role=weight:dram` or `tensor=conv1.w:pmem`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct PinRule {
    pub target: PinRuleTarget,
    /// The pool's name, as the host names it.
    pub pool: String,
}

/// What a [`PinRule`] fixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinRuleTarget {
    /// Every tensor of a role.
    Role(Role),
    /// One tensor, by its name in the model.
    Tensor(String),
}

impl FromStr for PinRule {
    type Err = String;

    /// Parses `role=ROLE:POOL` or `tensor=NAME:POOL`; the error says what is wrong, for
    /// a message that names the rule.
    fn from_str(text: &str) -> Result<PinRule, String> {
        let (what, rest) = text.split_once('=').ok_or("expected role=ROLE:POOL or tensor=NAME:POOL")?;
        let (name, pool) = rest.rsplit_once(':').ok_or("expected ...:POOL at the end")?;
        let target = match what {
            "role" => PinRuleTarget::Role(Role::parse(name).ok_or_else(|| {
                let roles: Vec<&str> = Role::ALL.iter().map(|r| r.as_str()).collect();
                format!("unknown role '{name}'; roles: {}", roles.join(", "))
            })?),
            "tensor" => PinRuleTarget::Tensor(name.to_string()),
            other => return Err(format!("cannot pin '{other}'; pin a role or a tensor")),
        };
        Ok(PinRule { target, pool: pool.to_string() })
    }
}

impl fmt::Display for PinRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            PinRuleTarget::Role(r) => write!(f, "role={}:{}", r.as_str(), self.pool),
            PinRuleTarget::Tensor(t) => write!(f, "tensor={t}:{}", self.pool),
        }
    }
}

impl From<PinRule> for String {
    fn from(rule: PinRule) -> String {
        rule.to_string()
    }
}

impl TryFrom<String> for PinRule {
    type Error = String;

    fn try_from(text: String) -> Result<PinRule, String> {
        text.parse().map_err(|reason| format!("pin rule '{text}': {reason}"))
    }
}
