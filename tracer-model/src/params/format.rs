//! How each kind of parameter is read, shown and described: the formats `params!` names.

#![expect(
    clippy::unnecessary_wraps,
    clippy::extra_unused_type_parameters,
    reason = "every format has the same signatures, so that params! can call whichever a \
              parameter names"
)]

use tracer_core::units;

use super::value::{Named, Value, ValueError};

/// A duration in nanoseconds, written with a unit.
pub struct Ns;
/// A plain count.
pub struct Count;
/// A percentage, 0 to 100.
pub struct Percent;
/// One of a few names.
pub struct Choice;

impl Ns {
    pub fn read<T>(text: &str) -> Result<Value, ValueError> {
        let t = text.trim().replace('_', "");
        if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
            // The binary's one parser reads a bare number as seconds; a parameter in
            // nanoseconds says which it means instead.
            return Err(ValueError::NoUnit);
        }
        let d = units::parse_duration(&t).map_err(ValueError::Duration)?;
        u64::try_from(d.as_nanos())
            .map(Value::Number)
            .map_err(|_| ValueError::OutOfRange)
    }
    pub fn show(v: u64) -> String {
        units::ns(v)
    }
    pub fn number(v: u64) -> Option<u64> {
        Some(v)
    }
    pub fn from_value(v: Value) -> Option<u64> {
        match v {
            Value::Number(n) => Some(n),
            Value::Choice(_) => None,
        }
    }
    pub fn expected<T>() -> String {
        "expected a duration with a unit such as 189ns, 20us, 4ms or 1.5s".into()
    }
}

impl Count {
    pub fn read<T>(text: &str) -> Result<Value, ValueError> {
        text.trim()
            .replace('_', "")
            .parse()
            .map(Value::Number)
            .map_err(ValueError::Number)
    }
    pub fn show(v: u64) -> String {
        v.to_string()
    }
    pub fn number(v: u64) -> Option<u64> {
        Some(v)
    }
    pub fn from_value(v: Value) -> Option<u64> {
        Ns::from_value(v)
    }
    pub fn expected<T>() -> String {
        "expected a whole number such as 5000 or 10_000_000".into()
    }
}

impl Percent {
    pub fn read<T>(text: &str) -> Result<Value, ValueError> {
        match text.trim().trim_end_matches('%').parse::<u64>() {
            Ok(v) if v <= 100 => Ok(Value::Number(v)),
            Ok(_) => Err(ValueError::Above100),
            Err(e) => Err(ValueError::Number(e)),
        }
    }
    pub fn show(v: u64) -> String {
        format!("{v}%")
    }
    pub fn number(v: u64) -> Option<u64> {
        Some(v)
    }
    pub fn from_value(v: Value) -> Option<u64> {
        Ns::from_value(v)
    }
    pub fn expected<T>() -> String {
        "expected a percentage from 0 to 100".into()
    }
}

impl Choice {
    pub fn read<T: Named>(text: &str) -> Result<Value, ValueError> {
        T::NAMES
            .iter()
            .position(|(n, _)| *n == text.trim())
            .map(Value::Choice)
            .ok_or(ValueError::UnknownName)
    }
    pub fn show<T: Named>(v: T) -> String {
        T::NAMES
            .iter()
            .find(|(_, x)| *x == v)
            .map_or("?", |(n, _)| n)
            .to_owned()
    }
    pub fn number<T>(_: T) -> Option<u64> {
        None
    }
    pub fn from_value<T: Named>(v: Value) -> Option<T> {
        match v {
            Value::Choice(i) => T::NAMES.get(i).map(|(_, x)| *x),
            Value::Number(_) => None,
        }
    }
    pub fn expected<T: Named>() -> String {
        let names: Vec<_> = T::NAMES.iter().map(|(n, _)| *n).collect();
        format!("expected one of: {}", names.join(", "))
    }
}
