//! Reading a scenario file's text into a [`Scenario`]: the TOML parser and
//! serde do the work, and every error they report becomes a
//! [`ScenarioError`] that names `ORIGIN:LINE:COLUMN`, the key it concerns
//! (`run[2].policy`) and what is wrong in plain words (a TOML syntax error,
//! an unknown field with the fields allowed there, a wrong type, a missing
//! field). Semantic checks come after, in [`mod@super::validate`]. Runs on the
//! command's main thread.

use super::model::Scenario;
use super::spans::SpanMap;

/// A scenario file that cannot be used: where and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ScenarioError {
    /// The file path, or `built-in NAME` for a shipped scenario.
    pub origin: String,
    /// 1-based line of the offending text (0: the error is not about a
    /// place in the text, e.g. the file could not be read).
    pub line: usize,
    /// 1-based column (in characters) of the offending text (0 with line 0).
    pub column: usize,
    /// What is wrong, one line.
    pub message: String,
}

impl ScenarioError {
    /// An error at byte `offset` of `text`.
    pub fn at(origin: &str, text: &str, offset: usize, message: impl Into<String>) -> Self {
        let (line, column) = line_column(text, offset);
        ScenarioError {
            origin: origin.to_string(),
            line,
            column,
            message: message.into(),
        }
    }

    /// An error about the file as a whole (no position).
    pub fn whole(origin: &str, message: impl Into<String>) -> Self {
        ScenarioError {
            origin: origin.to_string(),
            line: 0,
            column: 0,
            message: message.into(),
        }
    }

    fn render(&self) -> String {
        if self.line == 0 {
            format!("{}: {}", self.origin, self.message)
        } else {
            format!(
                "{}:{}:{}: {}",
                self.origin, self.line, self.column, self.message
            )
        }
    }
}

/// The 1-based line and column (characters) of byte `offset` in `text`.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..offset].chars().count() + 1;
    (line, column)
}

/// Parse a scenario file's text. `origin` names it in errors (a path, or
/// `built-in NAME`). Only the schema is checked here (syntax, field names,
/// types, required fields); see [`super::validate::validate`] for the rest.
pub fn parse(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
    // The spanned parse reports syntax errors; it also gives the key path
    // of a schema error's position.
    let spans = match SpanMap::parse(text) {
        Ok(spans) => spans,
        Err(e) => return Err(toml_error(text, origin, &e, None)),
    };
    toml::from_str::<Scenario>(text).map_err(|e| toml_error(text, origin, &e, Some(&spans)))
}

/// A `toml` error as a [`ScenarioError`] with a researcher's wording.
fn toml_error(
    text: &str,
    origin: &str,
    e: &toml::de::Error,
    spans: Option<&SpanMap>,
) -> ScenarioError {
    let offset = e.span().map_or(0, |s| s.start);
    // No span, an empty one at the start or one over the whole text: the
    // error is about the top-level table itself.
    let whole = e
        .span()
        .is_none_or(|s| s.start == 0 && (s.end == 0 || s.end >= text.trim_end().len()));
    let path = spans.filter(|_| !whole).and_then(|s| s.path_at(offset));
    let mut message = explain(e.message(), spans.is_none());
    // An event's action is a flattened enum: serde calls a second action
    // (or a misspelt one) an unknown field without the allowed list.
    let in_event = path.as_deref().is_some_and(|p| p.starts_with("event["));
    if in_event && message.starts_with("unknown field") {
        message = format!("{message}; {EVENT_SHAPE}");
    }
    let message = match path {
        Some(p) if !p.is_empty() => format!("{p}: {message}"),
        _ => message,
    };
    ScenarioError::at(origin, text, offset, message)
}

/// What an `[[event]]` table holds.
const EVENT_SHAPE: &str =
    "an [[event]] needs `at_s` and exactly one action: `buffer_size = FRAMES` or `kill = \"CLIENT\"`";

/// Reword serde's and the TOML parser's messages.
fn explain(raw: &str, syntax: bool) -> String {
    let raw = raw.trim().trim_end_matches('.');
    if syntax {
        return format!("TOML syntax error: {raw}");
    }
    if let Some(rest) = raw.strip_prefix("unknown field ") {
        return match rest.split_once(", expected ") {
            Some((field, allowed)) => format!(
                "unknown field {field}; the fields allowed here are {}",
                allowed.trim_start_matches("one of ")
            ),
            None => format!("unknown field {rest}"),
        };
    }
    if let Some(field) = raw.strip_prefix("missing field ") {
        return format!("required field {field} is missing");
    }
    if let Some(rest) = raw.strip_prefix("unknown variant ") {
        return match rest.split_once(", expected ") {
            Some((word, allowed)) => format!(
                "{word} is not an allowed value here; use {}",
                allowed.trim_start_matches("one of ")
            ),
            None => format!("unknown value {rest}"),
        };
    }
    if raw.contains("untagged enum Multiplier") {
        return "period_multiplier must be a whole number of audio periods (1 to 64) or \"auto\""
            .into();
    }
    if raw.contains("enum Action") || raw.contains("variant identifier") {
        return EVENT_SHAPE.into();
    }
    if let Some(rest) = raw
        .strip_prefix("invalid type: ")
        .or_else(|| raw.strip_prefix("invalid value: "))
    {
        return format!("wrong value: found {}", plain_types(rest));
    }
    raw.to_string()
}

/// serde's Rust type names as words.
fn plain_types(s: &str) -> String {
    let s = s.to_string();
    let words = [
        ("expected u32", "expected a whole number >= 0"),
        ("expected u64", "expected a whole number >= 0"),
        ("expected usize", "expected a whole number >= 0"),
        ("expected i32", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a boolean", "expected true or false"),
        ("expected a sequence", "expected an array"),
    ];
    words
        .iter()
        .fold(s, |acc, (from, to)| acc.replace(from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
title = "T"
duration_s = 10
[server]
rate = 48000
frames = 128
[[run]]
name = "a"
policy = "fifo"
"#;

    fn err(text: &str) -> ScenarioError {
        parse(text, "t.toml").expect_err("should fail")
    }

    #[test]
    fn parses_a_minimal_file_with_defaults() {
        let s = parse(GOOD, "t.toml").unwrap();
        assert_eq!(s.runs.len(), 1);
        assert_eq!(s.warmup_s, 1.0);
        assert_eq!(s.server.driver, "dummy");
    }

    #[test]
    fn syntax_error_has_position() {
        let e = err("name = \"t\"\ntitle = \n");
        assert_eq!((e.line, e.origin.as_str()), (2, "t.toml"));
        assert!(e.message.starts_with("TOML syntax error"), "{e}");
        assert!(e.to_string().starts_with("t.toml:2:"), "{e}");
    }

    #[test]
    fn unknown_field_lists_the_allowed_ones() {
        let text = GOOD.replace("policy = \"fifo\"", "policy = \"fifo\"\npolcy = 3");
        let e = err(&text);
        assert_eq!(e.line, 11, "{e}");
        assert!(e.message.contains("unknown field `polcy`"), "{e}");
        assert!(e.message.contains("`period_multiplier`"), "{e}");
        assert!(e.message.starts_with("run[0]"), "{e}");
    }

    #[test]
    fn wrong_type_and_wrong_word_are_explained() {
        let e = err(&GOOD.replace("rate = 48000", "rate = \"fast\""));
        assert_eq!(e.line, 6, "{e}");
        assert!(e.message.contains("expected a whole number"), "{e}");
        let e = err(&GOOD.replace("\"fifo\"", "\"rr\""));
        assert_eq!(e.line, 10, "{e}");
        assert!(e.message.contains("`deadline+reclaim`"), "{e}");
    }

    #[test]
    fn missing_field_is_named() {
        let e = err(&GOOD.replace("policy = \"fifo\"\n", ""));
        assert!(e.message.contains("`policy` is missing"), "{e}");
        assert_eq!(e.line, 8, "{e}");
    }

    #[test]
    fn multiplier_and_event_errors_are_worded() {
        let e = err(&format!("{GOOD}period_multiplier = \"twice\"\n"));
        assert!(e.message.contains("or \"auto\""), "{e}");
        assert_eq!(e.line, 11, "{e}");
        let e = err(&format!("{GOOD}[[event]]\nat_s = 3\n"));
        assert!(e.message.contains("exactly one action"), "{e}");
        let e = err(&format!(
            "{GOOD}[[event]]\nat_s = 3\nkill = \"a1\"\nbuffer_size = 64\n"
        ));
        assert!(e.message.contains("exactly one action"), "{e}");
        assert!(e.message.starts_with("event[0]"), "{e}");
    }

    #[test]
    fn line_column_counts_characters() {
        assert_eq!(line_column("ab\ncé d", 7), (2, 4));
        assert_eq!(line_column("", 5), (1, 1));
    }
}
