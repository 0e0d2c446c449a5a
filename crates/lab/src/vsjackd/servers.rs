//! The servers a bench compares: Debian's jackd2, resound with SCHED_FIFO,
//! resound with reservations (`--servers`), named variants of resound
//! with extra resoundd options (`--variant NAME=OPTIONS`), so that two
//! resound settings are measured side by side in one run, and other builds
//! of resound (`--build NAME=DIR`: another checkout's `target/release`), so
//! that two versions of the code are. Parsed on the bench's main thread.

use crate::harness::Bins;
use std::path::{Path, PathBuf};

/// What a server is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// Debian's jackd2 with the distribution's libjack.
    Jackd,
    /// resoundd `--sched fifo` with resound's libjack.so.0.
    Fifo,
    /// resoundd `--sched deadline` (reservations, reclaiming; the default).
    Deadline,
    /// resoundd with its defaults and the variant's options (which may name
    /// `--sched` themselves).
    Variant,
}

/// One server of the comparison, a contender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contender {
    /// What it is built from.
    pub base: Base,
    /// Its label in tables and files (unique in one bench).
    pub label: String,
    /// resoundd options of a variant (empty otherwise).
    pub options: Vec<String>,
    /// The directory of another build's `resoundd` and `libjack.so.0`
    /// (None: this build's).
    pub build: Option<PathBuf>,
}

/// The label of Debian's jackd2, whom the ratios divide by.
pub const JACKD_LABEL: &str = "jackd2";

impl Contender {
    /// A server built from `base` alone.
    pub fn of(base: Base) -> Contender {
        let label = match base {
            Base::Jackd => JACKD_LABEL,
            Base::Fifo => "resound-fifo",
            Base::Deadline => "resound-deadline",
            Base::Variant => "resound-variant",
        };
        Contender {
            base,
            label: label.into(),
            options: Vec::new(),
            build: None,
        }
    }

    /// Parses a `--servers` entry: a label or its short form (`jackd`,
    /// `fifo`, `deadline`).
    pub fn parse(s: &str) -> Result<Contender, String> {
        match s {
            "jackd" | "jackd2" => Ok(Contender::of(Base::Jackd)),
            "fifo" | "resound-fifo" => Ok(Contender::of(Base::Fifo)),
            "deadline" | "resound-deadline" => Ok(Contender::of(Base::Deadline)),
            _ => Err(format!(
                "unknown server {s:?} (expected jackd, fifo or deadline; a resound with other options: --variant NAME=OPTIONS)"
            )),
        }
    }

    /// Parses a `--variant NAME=OPTIONS` entry: resound labelled
    /// `resound-NAME`, started with OPTIONS (split at white space) on top of
    /// its defaults.
    pub fn variant(spec: &str) -> Result<Contender, String> {
        let (name, options) = named(
            "--variant",
            spec,
            "NAME=OPTIONS",
            "nolight='--light-deadline 100'",
        )?;
        let options: Vec<String> = options.split_whitespace().map(String::from).collect();
        if let Some(o) = options
            .iter()
            .find(|o| *o == "-d" || o.starts_with("--driver"))
        {
            return Err(format!(
                "--variant {spec:?}: {o} is the bench's (every server runs the dummy driver)"
            ));
        }
        Ok(Contender {
            base: Base::Variant,
            label: format!("resound-{name}"),
            options,
            build: None,
        })
    }

    /// Parses a `--build NAME=DIR` entry: the `resoundd` and
    /// `libjack.so.0` in DIR (another build of resound), with their
    /// defaults, labelled `resound-NAME`.
    pub fn build(spec: &str) -> Result<Contender, String> {
        let (name, dir) = named("--build", spec, "NAME=DIR", "base=../base/target/release")?;
        let dir = Path::new(dir);
        for file in ["resoundd", "libjack.so.0"] {
            if !dir.join(file).is_file() {
                return Err(format!(
                    "--build {spec:?}: no {file} in {} (build that checkout with cargo build --release --bins)",
                    dir.display()
                ));
            }
        }
        Ok(Contender {
            base: Base::Variant,
            label: format!("resound-{name}"),
            options: Vec::new(),
            build: Some(dir.to_path_buf()),
        })
    }

    /// The binaries this server runs: another build's `resoundd`, or
    /// `default`'s.
    pub fn bins(&self, default: &Bins) -> Bins {
        match &self.build {
            Some(dir) => Bins::new(dir.join("resoundd"), &default.tool),
            None => default.clone(),
        }
    }

    /// Whether this is jackd2.
    pub fn is_jackd(&self) -> bool {
        self.base == Base::Jackd
    }
}

/// `NAME=REST` of an `option` entry, NAME checked (1 to 24 letters,
/// digits, '-' or '_'); `form` and `example` show what is expected in the
/// error.
fn named<'a>(
    option: &str,
    spec: &'a str,
    form: &str,
    example: &str,
) -> Result<(&'a str, &'a str), String> {
    let Some((name, rest)) = spec.split_once('=') else {
        return Err(format!(
            "{option} {spec:?}: expected {form}, e.g. {example}"
        ));
    };
    let name_ok = !name.is_empty()
        && name.len() <= 24
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !name_ok {
        return Err(format!(
            "{option} {spec:?}: NAME must be 1 to 24 letters, digits, '-' or '_'"
        ));
    }
    Ok((name, rest))
}

/// The servers of a bench, in the order runs alternate: `--servers`, then
/// every `--variant`, then every `--build`; labels are unique.
pub fn parse_all(
    servers: &[String],
    variants: &[String],
    builds: &[String],
) -> Result<Vec<Contender>, String> {
    let mut all = servers
        .iter()
        .map(|s| Contender::parse(s.trim()))
        .chain(variants.iter().map(|v| Contender::variant(v.trim())))
        .chain(builds.iter().map(|b| Contender::build(b.trim())))
        .collect::<Result<Vec<_>, _>>()?;
    if all.is_empty() {
        return Err("--servers, --variant and --build name no server".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    all.retain(|s| seen.insert(s.label.clone()));
    Ok(all)
}

/// `--server-arg` may not choose the scheduling policy while the `fifo` or
/// `deadline` server runs: choosing it is what those servers stand for
/// (and resoundd refuses a second `--sched`, so each of their runs would
/// fail). Two builds or settings under one policy are compared with
/// `--servers jackd` and `--build`/`--variant`.
pub fn check_server_args(contenders: &[Contender], server_args: &[String]) -> Result<(), String> {
    let sets_sched = server_args
        .iter()
        .any(|a| a == "--sched" || a.starts_with("--sched="));
    let fixed = contenders
        .iter()
        .find(|c| matches!(c.base, Base::Fifo | Base::Deadline));
    match (sets_sched, fixed) {
        (true, Some(c)) => Err(format!(
            "--server-arg sets --sched, which {} sets itself: leave fifo and deadline out of --servers (e.g. --servers jackd with --build or --variant), or drop that --server-arg",
            c.label
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn servers_then_variants_in_order_without_repeats() {
        let all = parse_all(
            &strings(&["jackd", "deadline", "resound-deadline"]),
            &strings(&["nolight=--light-deadline 100  --percentile 95"]),
            &[],
        )
        .unwrap();
        let labels: Vec<&str> = all.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["jackd2", "resound-deadline", "resound-nolight"]);
        assert_eq!(
            all[2].options,
            strings(&["--light-deadline", "100", "--percentile", "95"])
        );
        assert!(all[0].is_jackd() && !all[2].is_jackd());
    }

    #[test]
    fn bad_servers_and_variants_say_what_is_expected() {
        let e = parse_all(&strings(&["jack"]), &[], &[]).unwrap_err();
        assert!(e.contains("unknown server \"jack\""), "{e}");
        for (bad, says) in [
            ("nolight", "NAME=OPTIONS"),
            ("=--light-deadline 100", "NAME must be"),
            ("a b=--x", "NAME must be"),
            ("alsa=-d alsa", "-d is the bench's"),
        ] {
            let e = parse_all(&[], &strings(&[bad]), &[]).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(parse_all(&[], &[], &[]).is_err());
    }

    #[test]
    fn a_variant_with_no_options_is_the_defaults() {
        let all = parse_all(&[], &strings(&["plain="]), &[]).unwrap();
        assert_eq!(all[0].base, Base::Variant);
        assert!(all[0].options.is_empty());
    }

    #[test]
    fn a_build_runs_the_server_and_libjack_of_its_directory() {
        let dir = std::env::temp_dir().join(format!("resound-build-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let spec = format!("base={}", dir.display());
        let e = parse_all(&[], &[], &strings(&[&spec])).unwrap_err();
        assert!(e.contains("no resoundd in"), "{e}");
        for f in ["resoundd", "libjack.so.0"] {
            std::fs::write(dir.join(f), b"").unwrap();
        }
        let all = parse_all(&strings(&["jackd"]), &[], &strings(&[&spec])).unwrap();
        assert_eq!(all[1].label, "resound-base");
        let default = Bins::new("/here/resoundd", "/here/resound-tool");
        assert_eq!(all[1].bins(&default).resoundd, dir.join("resoundd"));
        assert_eq!(all[1].bins(&default).tool, default.tool);
        assert_eq!(all[0].bins(&default).resoundd, default.resoundd);
        let e = parse_all(&[], &[], &strings(&["base"])).unwrap_err();
        assert!(e.contains("expected NAME=DIR"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_server_arg_choosing_the_policy_is_refused_beside_the_fifo_and_deadline_servers() {
        let both = parse_all(&strings(&["jackd", "fifo", "deadline"]), &[], &[]).unwrap();
        for arg in [&["--sched=fifo"][..], &["--sched", "fifo"][..]] {
            let e = check_server_args(&both, &strings(arg)).unwrap_err();
            assert!(e.contains("resound-fifo sets itself"), "{e}");
        }
        let builds_only = parse_all(&strings(&["jackd"]), &[], &[]).unwrap();
        assert!(check_server_args(&builds_only, &strings(&["--sched=fifo"])).is_ok());
        assert!(check_server_args(&both, &strings(&["--early-wake=0", "--schedx"])).is_ok());
    }
}
