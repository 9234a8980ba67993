//! A parameter's value once read, what can be wrong with one, and the values chosen by
//! name.

use std::num::ParseIntError;

use tracer_core::units::DurationError;

/// A parameter's value, read from its text once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// A count, a percentage, or nanoseconds.
    Number(u64),
    /// The `n`-th name of the parameter's choice ([`Named::NAMES`]).
    Choice(usize),
}

/// What is wrong with a parameter's value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// A bare number for a duration: seconds elsewhere in tracer, so refused here.
    #[error("a duration needs a unit")]
    NoUnit,
    /// Not a duration.
    #[error("{0}")]
    Duration(DurationError),
    /// A duration past `u64` nanoseconds.
    #[error("out of range")]
    OutOfRange,
    /// Not a whole number.
    #[error("{0}")]
    Number(ParseIntError),
    /// A percentage above 100.
    #[error("above 100")]
    Above100,
    /// Not one of the choice's names.
    #[error("unknown name")]
    UnknownName,
}

/// A value chosen by name.
pub trait Named: Copy + PartialEq + 'static {
    /// Every value with its name, the default first.
    const NAMES: &'static [(&'static str, Self)];
}

impl Named for bool {
    const NAMES: &'static [(&'static str, Self)] = &[("yes", true), ("no", false)];
}
