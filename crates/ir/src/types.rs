//! The vocabulary of the IR: element types, tensor roles, attributes, ids.

use std::collections::BTreeMap;
use std::fmt;

/// Index of a tensor in [`crate::Model::tensors`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TensorId(pub u32);

/// Index of a node in [`crate::Model::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

impl TensorId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }

            pub(crate) fn names() -> String {
                [$($text),+].join(", ")
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use named_enum;

named_enum! {
    /// Element type of a tensor.
    DType {
        F32 = "f32",
        F16 = "f16",
        Bf16 = "bf16",
        I32 = "i32",
        I64 = "i64",
        U8 = "u8",
    }
}

impl DType {
    pub fn size_bytes(self) -> u64 {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::Bf16 => 2,
            DType::I64 => 8,
            DType::U8 => 1,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::Bf16)
    }

    pub fn is_index(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }
}

named_enum! {
    /// What a tensor is for. Roles decide lifetimes (weights and optimizer state persist
    /// across steps) and let users pin whole classes of tensors to a pool.
    Role {
        Input = "input",
        Weight = "weight",
        OptimizerState = "optimizer_state",
        Activation = "activation",
        Workspace = "workspace",
        Gradient = "gradient",
        WeightGradient = "weight_gradient",
    }
}

impl Role {
    /// Tensors with these roles exist before the step starts: no node produces them.
    pub fn is_external(self) -> bool {
        matches!(self, Role::Input | Role::Weight | Role::OptimizerState)
    }

    /// Tensors with these roles outlive the step, so they are live at every step.
    pub fn is_persistent(self) -> bool {
        matches!(self, Role::Weight | Role::OptimizerState)
    }
}

/// An attribute value. JSON integers become `Int`, numbers with a fraction or an
/// exponent become `Float`, arrays of integers become `Ints`.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Ints(Vec<i64>),
}

impl AttrValue {
    pub fn kind(&self) -> &'static str {
        match self {
            AttrValue::Int(_) => "an integer",
            AttrValue::Float(_) => "a number",
            AttrValue::Bool(_) => "a boolean",
            AttrValue::Str(_) => "a string",
            AttrValue::Ints(_) => "a list of integers",
        }
    }
}

/// Attributes by name; ordered so that hashing and writing are deterministic.
pub type Attrs = BTreeMap<String, AttrValue>;

/// Formats a shape as `[2, 3, 4]`.
pub fn shape_str(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}
