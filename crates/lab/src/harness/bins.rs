//! Where the `resoundd` and `resound-tool` binaries are. Runs on the caller's
//! thread.

use std::path::{Path, PathBuf};

/// Paths of the binaries the harness starts.
#[derive(Debug, Clone)]
pub struct Bins {
    /// The server binary (`resoundd`).
    pub resoundd: PathBuf,
    /// The client tool binary (`resound-tool`).
    pub tool: PathBuf,
}

impl Bins {
    /// The binaries at the given paths (tests pass
    /// `env!("CARGO_BIN_EXE_resoundd")` and `env!("CARGO_BIN_EXE_resound-tool")`).
    pub fn new(resoundd: impl AsRef<Path>, tool: impl AsRef<Path>) -> Bins {
        Bins {
            resoundd: resoundd.as_ref().to_path_buf(),
            tool: tool.as_ref().to_path_buf(),
        }
    }

    /// The binaries next to the current executable (see [`sibling`]).
    pub fn beside_current_exe() -> Result<Bins, String> {
        Ok(Bins {
            resoundd: sibling("resoundd")?,
            tool: sibling("resound-tool")?,
        })
    }
}

/// Finds the binary `bin` in the directory of the current executable or in
/// its parent (where cargo puts binaries relative to a test or bench
/// executable in `deps/`).
pub fn sibling(bin: &str) -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let dir = me.parent().ok_or("the executable has no directory")?;
    for d in [dir.to_path_buf(), dir.join("..")] {
        let p = d.join(bin);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(format!(
        "cannot find {bin} next to {}; build the binaries first (cargo build --release --bins)",
        me.display()
    ))
}
