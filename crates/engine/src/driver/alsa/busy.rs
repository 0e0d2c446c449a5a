//! Who holds a busy sound device: the `owner_pid` alsa reports in
//! `/proc/asound/cardN/pcmDx/subS/status`, else a scan of every process's
//! open files for the card's `/dev/snd/pcmC*` nodes.
//!
//! Runs on the thread that opens the device (not real time).

use alsa::Direction;
use std::fs;

/// "hw:0 (playback) is busy: held by pid 1234 (pulseaudio)" or, if nobody
/// can be found, "... is busy (used by another program)".
pub fn busy_message(name: &str, dir: Direction) -> String {
    let what = super::params::dir_name(dir);
    let card = card_of(name);
    let holders = owner_pids(card, dir)
        .into_iter()
        .chain(fd_holders(card))
        .fold(Vec::<u32>::new(), |mut v, p| {
            if !v.contains(&p) && p != std::process::id() {
                v.push(p);
            }
            v
        });
    if holders.is_empty() {
        return format!("{name} ({what}) is busy (used by another program)");
    }
    let list: Vec<String> = holders
        .iter()
        .map(|p| format!("pid {p} ({})", process_name(*p)))
        .collect();
    format!("{name} ({what}) is busy: held by {}", list.join(", "))
}

/// The card number of `hw:N`, `hw:N,M`, `plughw:N` or `hw:CARD=N`.
fn card_of(name: &str) -> Option<u32> {
    let rest = name.split_once(':')?.1;
    let first = rest.split(',').next()?;
    let first = first.strip_prefix("CARD=").unwrap_or(first);
    first.parse().ok()
}

/// Owners alsa reports for the card's substreams of that direction.
fn owner_pids(card: Option<u32>, dir: Direction) -> Vec<u32> {
    let suffix = match dir {
        Direction::Capture => 'c',
        Direction::Playback => 'p',
    };
    let cards = match card {
        Some(c) => vec![format!("/proc/asound/card{c}")],
        None => list("/proc/asound")
            .into_iter()
            .filter(|n| n.starts_with("card"))
            .map(|n| format!("/proc/asound/{n}"))
            .collect(),
    };
    let mut pids = Vec::new();
    for c in cards {
        for pcm in list(&c)
            .into_iter()
            .filter(|n| n.starts_with("pcm") && n.ends_with(suffix))
        {
            for sub in list(&format!("{c}/{pcm}"))
                .into_iter()
                .filter(|n| n.starts_with("sub"))
            {
                let status =
                    fs::read_to_string(format!("{c}/{pcm}/{sub}/status")).unwrap_or_default();
                pids.extend(status.lines().filter_map(|l| {
                    l.strip_prefix("owner_pid").and_then(|v| {
                        v.trim_start_matches([' ', '\t', ':'])
                            .trim()
                            .parse::<u32>()
                            .ok()
                    })
                }));
            }
        }
    }
    pids
}

/// Processes with a `/dev/snd/pcmC<card>...` node open (any card if None).
fn fd_holders(card: Option<u32>) -> Vec<u32> {
    let prefix = match card {
        Some(c) => format!("/dev/snd/pcmC{c}D"),
        None => "/dev/snd/pcmC".to_string(),
    };
    list("/proc")
        .into_iter()
        .filter_map(|p| p.parse::<u32>().ok())
        .filter(|pid| {
            list(&format!("/proc/{pid}/fd")).into_iter().any(|fd| {
                fs::read_link(format!("/proc/{pid}/fd/{fd}"))
                    .is_ok_and(|t| t.to_string_lossy().starts_with(&prefix))
            })
        })
        .collect()
}

fn process_name(pid: u32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

fn list(dir: &str) -> Vec<String> {
    fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_numbers_from_names() {
        assert_eq!(card_of("hw:0"), Some(0));
        assert_eq!(card_of("hw:2,1"), Some(2));
        assert_eq!(card_of("plughw:CARD=3,DEV=0"), Some(3));
        assert_eq!(card_of("default"), None);
        assert_eq!(card_of("hw:USB"), None);
    }

    #[test]
    fn says_busy_without_a_card() {
        let m = busy_message("hw:7", Direction::Playback);
        assert!(m.starts_with("hw:7 (playback) is busy"), "{m}");
    }
}
