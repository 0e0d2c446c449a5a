//! The reproductions shipped with resound: the scenario files in
//! `experiments/` at the repository root, compiled into the binary with
//! `include_str!` so that an installed `resound` has them, and the lookup
//! `resound experiment` uses for a name or a path. Runs on the command's
//! main thread.

use super::model::Scenario;
use super::parse::ScenarioError;
use super::validate::check;

/// One shipped scenario: (name, file under `experiments/`, text).
type Shipped = (&'static str, &'static str, &'static str);

macro_rules! shipped {
    ($($name:literal),* $(,)?) => {
        &[$((
            $name,
            concat!("experiments/", $name, ".toml"),
            include_str!(concat!("../../../../../experiments/", $name, ".toml")),
        )),*]
    };
}

/// Every shipped scenario, in the order `experiment list` shows them.
const SHIPPED: &[Shipped] = shipped![
    "driver-timing",
    "sync-async",
    "driver-regularity",
    "jack-rtapp",
    "staircase",
    "staircase-rtapp",
    "min-latency",
    "table2-1333",
    "table2-2666",
    "jackdmp-activation",
];

/// A shipped scenario, as `experiment list` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its name (`experiment run NAME`).
    pub name: &'static str,
    /// Its one-line title.
    pub title: String,
    /// Its file in the source tree (`experiments/NAME.toml`).
    pub file: &'static str,
}

/// Every shipped scenario with its title.
pub fn list() -> Vec<Entry> {
    SHIPPED
        .iter()
        .map(|&(name, file, text)| Entry {
            name,
            title: super::parse::parse(text, file)
                .map(|s| s.title)
                .unwrap_or_default(),
            file,
        })
        .collect()
}

/// The text and file of the shipped scenario `name`.
pub fn find(name: &str) -> Option<(&'static str, &'static str)> {
    SHIPPED
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|&(_, file, text)| (text, file))
}

/// The scenario `name_or_path` names: a shipped one by name, else a file
/// path; parsed and validated. Returns it with its source (`built-in NAME`
/// or the path).
pub fn load(name_or_path: &str) -> Result<(Scenario, String), ScenarioError> {
    if let Some((text, _)) = find(name_or_path) {
        let source = format!("built-in {name_or_path}");
        return Ok((check(text, &source)?, source));
    }
    let text = std::fs::read_to_string(name_or_path).map_err(|e| {
        let names: Vec<&str> = SHIPPED.iter().map(|(n, _, _)| *n).collect();
        ScenarioError::whole(
            name_or_path,
            format!(
                "cannot read it ({e}), and it is not a built-in scenario ({})",
                names.join(", ")
            ),
        )
    })?;
    Ok((check(&text, name_or_path)?, name_or_path.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::scenario::model::AudioPolicy;

    #[test]
    fn every_shipped_file_parses_validates_and_is_named_after_its_file() {
        for &(name, file, text) in SHIPPED {
            let s = check(text, file).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(s.name, name, "{file}: name differs from the file name");
            let published = s.published.as_ref().expect("a reproduction says its setup");
            assert!(!published.setup.is_empty() && !published.differences.is_empty());
            assert!(!s.title.is_empty() && !s.description.is_empty(), "{file}");
            let quick = s.quick_duration_s.expect("quick_duration_s set");
            let scale = quick / s.duration_s;
            for g in &s.clients {
                if g.count > 1 && g.join_every_s > 0.0 {
                    assert!(
                        g.join_every_s * scale >= 0.99,
                        "{file}: quick joins too close"
                    );
                }
            }
        }
    }

    /// Runs with --quick: configurations x servers, each its quick
    /// duration plus ~4 s of start-up; all files within ~15 minutes.
    #[test]
    fn all_quick_runs_fit_in_fifteen_minutes() {
        let mut total = 0.0;
        for &(_, file, text) in SHIPPED {
            let s = check(text, file).unwrap();
            let runs: usize = s.runs.iter().map(servers_of).sum();
            total += runs as f64 * (s.quick_duration_s.unwrap() + 4.0);
        }
        eprintln!("all shipped scenarios with --quick: about {total:.0} s");
        assert!(total <= 15.0 * 60.0, "quick total {total} s");
    }

    fn servers_of(run: &crate::experiment::scenario::RunConfig) -> usize {
        match &run.servers {
            Some(s) => s.len(),
            None if matches!(run.policy, AudioPolicy::Other | AudioPolicy::Fifo) => 2,
            None => 1,
        }
    }

    #[test]
    fn load_finds_names_and_paths_and_explains_neither() {
        let (s, source) = load("driver-timing").unwrap();
        assert_eq!(
            (s.name.as_str(), source.as_str()),
            ("driver-timing", "built-in driver-timing")
        );
        assert!(s
            .runs
            .iter()
            .any(|r| r.servers.is_none() && r.policy == AudioPolicy::Fifo));
        let dir = std::env::temp_dir().join(format!("resound-scen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mine.toml");
        let text = find("staircase")
            .unwrap()
            .0
            .replace("name = \"staircase\"", "name = \"mine\"");
        std::fs::write(&path, text).unwrap();
        let (s, source) = load(path.to_str().unwrap()).unwrap();
        assert_eq!(
            (s.name.as_str(), source.as_str()),
            ("mine", path.to_str().unwrap())
        );
        std::fs::write(&path, "name = \"mine\"\nrate = \n").unwrap();
        let e = load(path.to_str().unwrap()).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        let e = load("no-such-scenario").unwrap_err();
        assert!(
            e.to_string()
                .contains("not a built-in scenario (driver-timing,"),
            "{e}"
        );
        assert_eq!(list().len(), SHIPPED.len());
        assert!(list().iter().all(|e| !e.title.is_empty()));
    }
}
