//! Where things are in a scenario file's text: the file parsed again into
//! `toml`'s spanned tables, so that an error found after deserialising can
//! name the line of the offending key (`run[2].policy`), and a parser error
//! at a byte offset can name the key it falls in. Runs on the command's main
//! thread.

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// The spanned parse of one scenario text.
pub struct SpanMap<'a> {
    root: Spanned<DeValue<'a>>,
}

impl<'a> SpanMap<'a> {
    /// Parse `text` (a TOML syntax error is returned as is).
    pub fn parse(text: &'a str) -> Result<Self, toml::de::Error> {
        let table = DeTable::parse(text)?;
        let span = table.span();
        Ok(SpanMap {
            root: Spanned::new(span, DeValue::Table(table.into_inner())),
        })
    }

    /// Byte offset of the key at `path` (`"run[2].policy"`, `"server.rate"`,
    /// `"event[0]"`); when it is absent, the offset of the nearest present
    /// ancestor (the start of the file at worst).
    pub fn offset(&self, path: &str) -> usize {
        let mut node = &self.root;
        let mut at = 0;
        for seg in segments(path) {
            let next = match seg {
                Seg::Key(name) => node.get_ref().as_table().and_then(|t| {
                    t.iter()
                        .find(|(k, _)| k.get_ref() == name)
                        .map(|(k, v)| (k.span().start, v))
                }),
                Seg::Index(i) => node
                    .get_ref()
                    .as_array()
                    .and_then(|a| a.get(i))
                    .map(|v| (v.span().start, v)),
            };
            match next {
                Some((start, value)) => {
                    at = start;
                    node = value;
                }
                None => break,
            }
        }
        at
    }

    /// The key path (`run[0].polcy`) of the innermost key or value that
    /// contains byte `offset`, if any (a table's span is its header).
    pub fn path_at(&self, offset: usize) -> Option<String> {
        find(&self.root, offset).filter(|p| !p.is_empty())
    }
}

/// The path below `node` of the key or value containing `offset`.
fn find(node: &Spanned<DeValue<'_>>, offset: usize) -> Option<String> {
    let children: Vec<(String, &Spanned<DeValue<'_>>, bool)> = match node.get_ref() {
        DeValue::Table(table) => table
            .iter()
            .map(|(k, v)| (format!(".{}", k.get_ref()), v, k.span().contains(&offset)))
            .collect(),
        DeValue::Array(array) => array
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("[{i}]"), v, false))
            .collect(),
        _ => return None,
    };
    for (step, value, in_key) in children {
        let step = step.trim_start_matches('.').to_string();
        if in_key {
            return Some(step);
        }
        if let Some(rest) = find(value, offset) {
            let sep = if rest.is_empty() || rest.starts_with('[') {
                ""
            } else {
                "."
            };
            return Some(format!("{step}{sep}{rest}"));
        }
        if value.span().contains(&offset) {
            return Some(step);
        }
    }
    None
}

/// One step of a key path.
enum Seg<'p> {
    Key(&'p str),
    Index(usize),
}

/// `"run[2].policy"` -> Key(run), Index(2), Key(policy).
fn segments(path: &str) -> Vec<Seg<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        if !name.is_empty() {
            out.push(Seg::Key(name));
        }
        for index in rest.split('[') {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                out.push(Seg::Index(i));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::scenario::parse::line_column;

    const TEXT: &str = "name = \"x\"\n[server]\nrate = 1\n\n[[run]]\nname = \"a\"\n\n[[run]]\nname = \"b\"\npolicy = \"fifo\"\n";

    fn line(path: &str) -> usize {
        let map = SpanMap::parse(TEXT).unwrap();
        line_column(TEXT, map.offset(path)).0
    }

    #[test]
    fn finds_keys_and_falls_back_to_the_nearest_ancestor() {
        assert_eq!(line("server.rate"), 3);
        assert_eq!(line("run[1].policy"), 10);
        assert_eq!(line("run[1].name"), 9);
        assert_eq!(line("run[1].priority"), 8, "absent key: its table");
        assert_eq!(line("name"), 1);
    }

    #[test]
    fn names_the_key_at_an_offset() {
        let map = SpanMap::parse(TEXT).unwrap();
        let at = TEXT.find("\"fifo\"").unwrap();
        assert_eq!(map.path_at(at).as_deref(), Some("run[1].policy"));
    }
}
