//! The load clients' per-cycle records as `loadclient` writes them at exit
//! (`OUT.csv`: a header, one row per cycle, then `#xruns N` and `#full 0|1`).
//! Runs on the bench's main thread.

use std::collections::HashMap;
use std::path::Path;

/// One cycle as one client saw it (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rec {
    /// The server's cycle start (`jack_get_cycle_times`).
    pub start: u64,
    /// Return from `jack_cycle_wait` (the callback's start).
    pub wake: u64,
    /// Thread CPU time spent inside `jack_cycle_wait`.
    pub wait_cpu: u64,
    /// End of the body (the callback's return).
    pub ret: u64,
    /// Return from `jack_cycle_signal` (downstream woken).
    pub sig: u64,
    /// The data stamp read from the input (0: none).
    pub stamp: u64,
    /// The block had no stamp, or the one of the block before (stale).
    pub lost: bool,
    /// The xruns the client's xrun callback had counted by this cycle.
    pub xruns: u64,
}

/// One client's records.
#[derive(Debug, Clone, Default)]
pub struct ClientRecords {
    /// Its cycles in order.
    pub recs: Vec<Rec>,
    /// The xruns its xrun callback saw (the server's own count).
    pub xruns: u64,
    /// Whether its record array filled up (later cycles not recorded).
    pub full: bool,
}

impl ClientRecords {
    /// Its records by the data stamp they carried: the first record with
    /// each stamp (a later one with the same stamp got a stale block).
    pub fn by_stamp(&self) -> HashMap<u64, &Rec> {
        let mut m = HashMap::with_capacity(self.recs.len());
        for r in self.recs.iter().filter(|r| r.stamp != 0) {
            m.entry(r.stamp).or_insert(r);
        }
        m
    }
}

/// Reads a client's `OUT.csv`.
pub fn read_client_csv(path: &Path) -> Result<ClientRecords, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses the text of a client's `OUT.csv`.
pub fn parse(text: &str) -> Result<ClientRecords, String> {
    let mut out = ClientRecords::default();
    let mut lines = text.lines();
    match lines.next() {
        Some(h) if h.starts_with("start_ns,") => {}
        _ => return Err("no header line".into()),
    }
    for (n, line) in lines.enumerate() {
        if let Some(v) = line.strip_prefix("#xruns ") {
            out.xruns = v.trim().parse().map_err(|_| format!("bad line {line:?}"))?;
        } else if let Some(v) = line.strip_prefix("#full ") {
            out.full = v.trim() == "1";
        } else {
            out.recs
                .push(row(line).ok_or_else(|| format!("line {}: {line:?}", n + 2))?);
        }
    }
    out.recs.sort_by_key(|r| r.start);
    Ok(out)
}

fn row(line: &str) -> Option<Rec> {
    let v: Vec<u64> = line
        .split(',')
        .map(|f| f.trim().parse().ok())
        .collect::<Option<_>>()?;
    let [start, wake, wait_cpu, ret, sig, stamp, lost, xruns] = v[..] else {
        return None;
    };
    Some(Rec {
        start,
        wake,
        wait_cpu,
        ret,
        sig,
        stamp,
        lost: lost != 0,
        xruns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "start_ns,wake_ns,wait_cpu_ns,ret_ns,sig_ns,stamp_ns,lost\n\
        2000,2100,10,2200,2210,2100,0,3\n\
        1000,1100,10,1200,1210,0,1,2\n\
        #xruns 3\n#full 1\n";

    #[test]
    fn parses_rows_counts_and_flags() {
        let c = parse(TEXT).unwrap();
        assert_eq!(c.recs.len(), 2);
        assert_eq!(c.recs[0].start, 1000, "sorted by cycle start");
        assert!(c.recs[0].lost && !c.recs[1].lost);
        assert_eq!(c.recs[1].xruns, 3);
        assert_eq!((c.xruns, c.full), (3, true));
    }

    #[test]
    fn finds_a_cycle_by_its_stamp() {
        let c = parse(TEXT).unwrap();
        let m = c.by_stamp();
        assert_eq!(m[&2100].start, 2000);
        assert_eq!(m.len(), 1, "a block without a stamp is not joined");
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(parse("").is_err());
        assert!(parse("start_ns,x\n1,2,3\n").is_err());
        assert!(parse("start_ns,x\n#xruns many\n").is_err());
    }
}
