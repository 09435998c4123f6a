//! Diagnostics: every problem found in a model, with where it is and what it concerns.

use std::fmt;

/// What kind of problem a diagnostic reports, for programs that react to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiagnosticKind {
    Syntax,
    UnknownField,
    MissingField,
    BadValue,
    DuplicateName,
    UnknownName,
    NeverProduced,
    ProducedTwice,
    Role,
    Cycle,
    ScheduleOrder,
    Arity,
    Attribute,
    Shape,
    Size,
}

/// The graph element a diagnostic is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Model,
    Tensor(String),
    Node(String),
}

/// A 1-based line and column in the model file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub kind: DiagnosticKind,
    /// Absent for models built in memory rather than read from a file.
    pub location: Option<Location>,
    pub subject: Subject,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(loc) = self.location {
            write!(f, "{}:{}: ", loc.line, loc.column)?;
        }
        match &self.subject {
            Subject::Model => {}
            Subject::Tensor(name) => write!(f, "tensor '{name}': ")?,
            Subject::Node(name) => write!(f, "node '{name}': ")?,
        }
        f.write_str(&self.message)
    }
}

/// All problems found while loading one model, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }

    pub fn has(&self, kind: DiagnosticKind) -> bool {
        self.0.iter().any(|d| d.kind == kind)
    }

    pub(crate) fn push(
        &mut self,
        kind: DiagnosticKind,
        location: Option<Location>,
        subject: Subject,
        message: impl Into<String>,
    ) {
        self.0.push(Diagnostic { kind, location, subject, message: message.into() });
    }

    pub(crate) fn sort(&mut self) {
        // Problems without a location (graph-wide ones such as cycles) go last.
        self.0.sort_by_key(|d| d.location.map_or((usize::MAX, 0), |l| (l.line, l.column)));
    }
}

impl fmt::Display for Diagnostics {
    /// One problem per line, each complete on its own.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}
