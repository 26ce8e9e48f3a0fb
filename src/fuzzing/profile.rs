//! Fuzz target `profile`: the profile parser and validator.
//!
//! Invariants checked: any text yields a profile or an `Invalid` error (never a panic); the error
//! names a line and column that exist in the text (1-based, the column at most one past the
//! line's last character), a non-empty message, and prints as `origin:line:column: message`;
//! parsing is deterministic.

use crate::profile::{self, ProfileError};

use super::Input;

/// The target.
pub fn fuzz(data: &[u8]) {
    let text = String::from_utf8_lossy(Input::new(data).payload);
    let first = profile::parse(&text, "fuzz.toml");
    let again = profile::parse(&text, "fuzz.toml");
    match (&first, &again) {
        (Ok(_), Ok(_)) => {}
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "parsing is deterministic"),
        _ => panic!("parsing is deterministic: {first:?} vs {again:?}"),
    }
    let Err(e) = first else {
        return;
    };
    let ProfileError::Invalid {
        origin,
        line,
        column,
        message,
        ..
    } = &e
    else {
        panic!("parsing text cannot fail to read a file: {e}");
    };
    assert_eq!(origin, "fuzz.toml");
    assert!(!message.trim().is_empty(), "empty error message");
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(
        *line >= 1 && *line <= lines.len(),
        "line {line} of a {}-line text: {e}",
        lines.len()
    );
    let width = lines[*line - 1].chars().count();
    assert!(
        *column >= 1 && *column <= width + 1,
        "column {column} of a {width}-character line: {e}"
    );
    assert!(
        e.to_string()
            .starts_with(&format!("fuzz.toml:{line}:{column}: ")),
        "error does not start with its location: {e}"
    );
}
