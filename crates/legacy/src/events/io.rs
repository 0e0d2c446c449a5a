//! Trace files: one JSON object per line (`{"tid":..,"t_ns":..,"kind":..,"nr":..}`),
//! written by `resound legacy trace --out` and read by `detect --trace`.

use super::Event;
use std::io::{BufRead, BufWriter, Write};
use std::path::Path;

/// A trace file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TraceFileError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not an event.
    #[error("{path}:{line}: not a trace event: {msg}")]
    Parse {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The parser's message.
        msg: String,
    },
}

/// Write `events` to `path` as JSON lines.
pub fn write_trace(path: &Path, events: &[Event]) -> Result<(), TraceFileError> {
    let io = |source| TraceFileError::Io {
        path: path.display().to_string(),
        source,
    };
    let mut w = BufWriter::new(std::fs::File::create(path).map_err(io)?);
    for e in events {
        let line = serde_json::to_string(e).expect("an event always serialises");
        writeln!(w, "{line}").map_err(io)?;
    }
    w.flush().map_err(io)
}

/// Read a trace written by [`write_trace`] (blank lines are skipped).
pub fn read_trace(path: &Path) -> Result<Vec<Event>, TraceFileError> {
    let p = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|source| TraceFileError::Io {
        path: p.clone(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|source| TraceFileError::Io {
            path: p.clone(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let e = serde_json::from_str(&line).map_err(|e| TraceFileError::Parse {
            path: p.clone(),
            line: i + 1,
            msg: e.to_string(),
        })?;
        out.push(e);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Kind;

    #[test]
    fn round_trip_and_bad_line() {
        let dir = std::env::temp_dir().join(format!("resound-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.jsonl");
        let ev = vec![
            Event {
                tid: 3,
                t_ns: 5,
                kind: Kind::SysEnter(7),
            },
            Event {
                tid: 3,
                t_ns: 9,
                kind: Kind::SysExit(7),
            },
            Event {
                tid: 4,
                t_ns: 11,
                kind: Kind::Wakeup,
            },
        ];
        write_trace(&p, &ev).unwrap();
        assert_eq!(read_trace(&p).unwrap(), ev);
        std::fs::write(&p, "{\"tid\":1}\n").unwrap();
        let err = read_trace(&p).unwrap_err().to_string();
        assert!(err.contains(":1: not a trace event"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
