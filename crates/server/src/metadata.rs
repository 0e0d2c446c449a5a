//! Metadata properties (JACK's metadata API): key/value/type triples attached
//! to a subject UUID (a client or a port). Kept in server memory for the
//! server's lifetime; the properties of a client or port go with it.
//!
//! Control thread only (under the server's state lock).

use resound_protocol::wire::{property_change, ErrorCode, Property, WireError};
use std::collections::BTreeMap;

/// Longest key in bytes.
pub const MAX_KEY: usize = 1024;
/// Longest value in bytes.
pub const MAX_VALUE: usize = 32 * 1024;
/// Longest type in bytes.
pub const MAX_TYPE: usize = 1024;
/// What the store may hold, in bytes of keys, values and types plus
/// [`OVERHEAD`] per property. Well below the largest reply frame
/// (`limits::MAX_REPLY_BYTES`, 16 MiB), so that `jack_get_all_properties`
/// always fits in one reply, however a client filled the store.
pub const MAX_TOTAL: usize = 8 * 1024 * 1024;
/// Bytes charged per property beyond its strings: more than its encoding
/// costs (subject, lengths), so many tiny properties cannot overflow a reply.
pub const OVERHEAD: usize = 64;

/// The property store.
#[derive(Debug, Default)]
pub struct Metadata {
    props: BTreeMap<u64, Vec<Property>>,
    bytes: usize,
}

fn size(p: &Property) -> usize {
    p.key.len() + p.value.len() + p.type_name.len() + OVERHEAD
}

impl Metadata {
    /// Sets a property; returns the change (created or changed).
    pub fn set(&mut self, subject: u64, p: Property) -> Result<u32, WireError> {
        if subject == 0 {
            return Err(WireError::new(
                ErrorCode::NotFound,
                "property subject 0 is no client or port",
            ));
        }
        if p.key.is_empty()
            || p.key.len() > MAX_KEY
            || p.value.len() > MAX_VALUE
            || p.type_name.len() > MAX_TYPE
        {
            return Err(WireError::new(
                ErrorCode::InvalidName,
                format!("property key must be 1..={MAX_KEY} bytes, value up to {MAX_VALUE}, type up to {MAX_TYPE}"),
            ));
        }
        // Checked before the subject's entry exists: a refusal keeps nothing.
        let old = self
            .props
            .get(&subject)
            .and_then(|list| list.iter().position(|q| q.key == p.key));
        let freed = old.map_or(0, |i| size(&self.props[&subject][i]));
        if self.bytes - freed + size(&p) > MAX_TOTAL {
            return Err(WireError::new(ErrorCode::Full, "metadata store is full"));
        }
        self.bytes = self.bytes - freed + size(&p);
        let list = self.props.entry(subject).or_default();
        Ok(match old {
            Some(i) => {
                list[i] = p;
                property_change::CHANGED
            }
            None => {
                list.push(p);
                property_change::CREATED
            }
        })
    }

    /// One property.
    pub fn get(&self, subject: u64, key: &str) -> Option<Property> {
        self.props
            .get(&subject)?
            .iter()
            .find(|p| p.key == key)
            .cloned()
    }

    /// Every property of a subject.
    pub fn get_all(&self, subject: u64) -> Vec<Property> {
        self.props.get(&subject).cloned().unwrap_or_default()
    }

    /// Every subject with its properties.
    pub fn all(&self) -> Vec<(u64, Vec<Property>)> {
        self.props
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(s, v)| (*s, v.clone()))
            .collect()
    }

    /// Removes one property; false if it was not set.
    pub fn remove(&mut self, subject: u64, key: &str) -> bool {
        let Some(list) = self.props.get_mut(&subject) else {
            return false;
        };
        let Some(i) = list.iter().position(|p| p.key == key) else {
            return false;
        };
        self.bytes -= size(&list.remove(i));
        if list.is_empty() {
            self.props.remove(&subject);
        }
        true
    }

    /// Removes every property of a subject; returns the removed keys.
    pub fn remove_subject(&mut self, subject: u64) -> Vec<String> {
        let list = self.props.remove(&subject).unwrap_or_default();
        self.bytes -= list.iter().map(size).sum::<usize>();
        list.into_iter().map(|p| p.key).collect()
    }

    /// Checks the store's own bookkeeping: the byte count is what the
    /// properties take, within [`MAX_TOTAL`]; no subject 0, no subject
    /// without properties, no key twice for one subject. For tests and the
    /// `metadata` fuzz target; the store keeps these by construction.
    pub fn check(&self) -> Result<(), String> {
        let bytes: usize = self.props.values().flatten().map(size).sum();
        if bytes != self.bytes || bytes > MAX_TOTAL {
            return Err(format!(
                "{} bytes counted, {bytes} stored (limit {MAX_TOTAL})",
                self.bytes
            ));
        }
        for (subject, list) in &self.props {
            if *subject == 0 || list.is_empty() {
                return Err(format!(
                    "subject {subject} kept with {} properties",
                    list.len()
                ));
            }
            for (i, p) in list.iter().enumerate() {
                if list[..i].iter().any(|q| q.key == p.key) {
                    return Err(format!("subject {subject} has key {:?} twice", p.key));
                }
            }
        }
        Ok(())
    }

    /// Removes everything; returns how many properties there were.
    pub fn remove_all(&mut self) -> usize {
        let n = self.props.values().map(Vec::len).sum();
        self.props.clear();
        self.bytes = 0;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(k: &str, v: &str) -> Property {
        Property {
            key: k.into(),
            value: v.into(),
            type_name: String::new(),
        }
    }

    #[test]
    fn set_get_remove() {
        let mut m = Metadata::default();
        assert_eq!(m.set(7, p("a", "1")).unwrap(), property_change::CREATED);
        assert_eq!(m.set(7, p("a", "2")).unwrap(), property_change::CHANGED);
        m.set(7, p("b", "3")).unwrap();
        m.set(9, p("a", "x")).unwrap();
        assert_eq!(m.get(7, "a").unwrap().value, "2");
        assert_eq!(m.get_all(7).len(), 2);
        assert_eq!(m.all().len(), 2);
        assert!(m.remove(7, "a"));
        assert!(!m.remove(7, "a"));
        assert_eq!(m.remove_subject(7), vec!["b".to_string()]);
        assert_eq!(m.remove_all(), 1);
        assert_eq!(m.bytes, 0);
        assert!(m.set(0, p("a", "1")).is_err());
        assert!(m.set(1, p("", "1")).is_err());
        m.check().unwrap();
    }

    /// A set refused because the store is full leaves nothing behind: before
    /// the fix each refusal for a new subject kept an empty entry, so a
    /// client could grow the server's memory without bound once the store
    /// was full (seen while writing the `metadata` fuzz target, whose
    /// [`Metadata::check`] after every step catches it).
    #[test]
    fn a_refused_set_leaves_no_empty_subject() {
        let mut m = Metadata::default();
        let big = "v".repeat(MAX_VALUE);
        let mut n = 1u64;
        while m.set(n, p("k", &big)).is_ok() {
            n += 1;
        }
        m.check().unwrap();
        for s in n..n + 1000 {
            assert_eq!(m.set(s, p("k", &big)).unwrap_err().code, ErrorCode::Full);
        }
        m.check().unwrap();
        assert_eq!(m.props.len() as u64, n - 1);
    }

    /// A client filling the store with tiny properties (the worst case for
    /// encoding overhead) or with big ones cannot make the answer to
    /// "all properties" larger than a reply frame may be.
    #[test]
    fn a_full_store_still_fits_in_one_reply() {
        use resound_protocol::wire::{encode, Reply, ServerMsg};
        use resound_shm::limits::MAX_REPLY_BYTES;
        for value in [String::new(), "v".repeat(MAX_VALUE)] {
            let mut m = Metadata::default();
            let mut n = 0u64;
            loop {
                let prop = Property {
                    key: format!("{n:x}"),
                    value: value.clone(),
                    type_name: String::new(),
                };
                match m.set(u64::MAX - (n % 1000), prop) {
                    Ok(_) => n += 1,
                    Err(e) => {
                        assert_eq!(e.code, ErrorCode::Full);
                        break;
                    }
                }
            }
            let frame = encode(&ServerMsg::Reply {
                seq: u32::MAX - 1,
                reply: Reply::AllProperties(m.all()),
            })
            .unwrap();
            assert!(
                frame.len() < MAX_REPLY_BYTES,
                "{n} properties encode to {} bytes",
                frame.len()
            );
        }
    }
}
