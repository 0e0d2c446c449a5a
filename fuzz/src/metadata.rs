//! Target `metadata`: the server's metadata store
//! ([`resound_server::metadata::Metadata`]) under the requests a client can
//! make (jack_set_property, jack_get_property, jack_get_properties,
//! jack_get_all_properties, jack_remove_property, jack_remove_properties,
//! jack_remove_all_properties), with any subjects, keys, values and types,
//! large values included (to fill the store).
//!
//! Checks, against a plain map of what should be there: no panic; every
//! answer is the map's (a property set is read back, one removed is gone, a
//! refused one changed nothing; the whole store is compared at the end);
//! the store's own accounting holds ([`Metadata::check`], at the end and
//! with every all-properties request); the answer to "all properties"
//! always fits in one reply frame.

use arbitrary::{Arbitrary, Unstructured};
use resound_protocol::wire::{encode, property_change, Property, Reply, ServerMsg};
use resound_server::metadata::{Metadata, MAX_KEY, MAX_TYPE, MAX_VALUE};
use resound_shm::limits::MAX_REPLY_BYTES;
use std::collections::BTreeMap;

/// Most requests one input makes.
const MAX_OPS: usize = 256;

/// A subject: one of a few (to collide), or any.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Subject {
    /// One of eight small subjects (0 included, which is refused).
    Few(u8),
    /// Any UUID.
    Any(u64),
}

impl Subject {
    fn get(self) -> u64 {
        match self {
            Subject::Few(n) => (n % 8) as u64,
            Subject::Any(u) => u,
        }
    }
}

/// A string from the client: as given, or one byte repeated (big values
/// from a few input bytes, to reach the store's size limit).
#[derive(Arbitrary, Debug)]
pub enum Text {
    /// As given.
    Given(String),
    /// `len` copies of a character.
    Repeat(char, u16),
}

impl Text {
    fn get(self) -> String {
        match self {
            Text::Given(s) => s,
            Text::Repeat(c, n) => std::iter::repeat_n(c, n as usize).collect(),
        }
    }
}

/// One metadata request.
#[derive(Arbitrary, Debug)]
pub enum Op {
    /// jack_set_property.
    Set(Subject, Text, Text, Text),
    /// jack_get_property.
    Get(Subject, Text),
    /// jack_get_properties.
    GetAll(Subject),
    /// jack_remove_property.
    Remove(Subject, Text),
    /// jack_remove_properties (also what a client's or port's removal does).
    RemoveSubject(Subject),
    /// jack_remove_all_properties.
    RemoveAll,
    /// jack_get_all_properties, encoded as the reply the server sends.
    Reply,
}

/// Applies the requests decoded from `data`, checking after each.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut m = Metadata::default();
    let mut model: BTreeMap<(u64, String), Property> = BTreeMap::new();
    let mut replied = false;
    // Arbitrary yields default values once the input is used up: stop there.
    for _ in 0..MAX_OPS {
        let (true, Ok(op)) = (!u.is_empty(), Op::arbitrary(&mut u)) else {
            break;
        };
        replied |= matches!(op, Op::Reply);
        apply(&mut m, &mut model, op);
    }
    m.check().expect("store accounting");
    check_all(&m, &model);
    if !replied {
        check_reply(&m);
    }
}

fn apply(m: &mut Metadata, model: &mut BTreeMap<(u64, String), Property>, op: Op) {
    match op {
        Op::Set(s, k, v, t) => {
            let (s, key) = (s.get(), k.get());
            let p = Property {
                key: key.clone(),
                value: v.get(),
                type_name: t.get(),
            };
            let valid = s != 0
                && !key.is_empty()
                && key.len() <= MAX_KEY
                && p.value.len() <= MAX_VALUE
                && p.type_name.len() <= MAX_TYPE;
            if let Ok(change) = m.set(s, p.clone()) {
                assert!(valid, "accepted an invalid property");
                let want = match model.insert((s, key), p) {
                    Some(_) => property_change::CHANGED,
                    None => property_change::CREATED,
                };
                assert_eq!(change, want);
            }
        }
        Op::Get(s, k) => {
            let (s, key) = (s.get(), k.get());
            assert_eq!(m.get(s, &key).as_ref(), model.get(&(s, key)));
        }
        Op::GetAll(s) => {
            let s = s.get();
            let mut got = m.get_all(s);
            got.sort_by(|a, b| a.key.cmp(&b.key));
            let want: Vec<Property> = model
                .range((s, String::new())..)
                .take_while(|((x, _), _)| *x == s)
                .map(|(_, p)| p.clone())
                .collect();
            assert_eq!(got, want);
        }
        Op::Remove(s, k) => {
            let (s, key) = (s.get(), k.get());
            assert_eq!(m.remove(s, &key), model.remove(&(s, key)).is_some());
        }
        Op::RemoveSubject(s) => {
            let s = s.get();
            let mut keys = m.remove_subject(s);
            keys.sort();
            let want: Vec<String> = model
                .keys()
                .filter(|(x, _)| *x == s)
                .map(|(_, k)| k.clone())
                .collect();
            model.retain(|(x, _), _| *x != s);
            assert_eq!(keys, want);
        }
        Op::RemoveAll => {
            assert_eq!(m.remove_all(), model.len());
            model.clear();
        }
        Op::Reply => {
            check_reply(m);
            m.check().expect("store accounting");
        }
    }
}

/// The whole store agrees with the model (every subject's properties).
fn check_all(m: &Metadata, model: &BTreeMap<(u64, String), Property>) {
    let total: usize = m.all().iter().map(|(_, v)| v.len()).sum();
    assert_eq!(total, model.len(), "the store and the model differ");
    for ((s, key), p) in model {
        assert_eq!(m.get(*s, key).as_ref(), Some(p));
    }
}

/// The reply to jack_get_all_properties fits in one frame.
fn check_reply(m: &Metadata) {
    let frame = encode(&ServerMsg::Reply {
        seq: u32::MAX,
        reply: Reply::AllProperties(m.all()),
    })
    .expect("encodes");
    assert!(
        frame.len() <= MAX_REPLY_BYTES,
        "reply of {} bytes",
        frame.len()
    );
}
