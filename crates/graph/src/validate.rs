//! Validation of names and types: JACK's rules for client and port names,
//! port type names.
//!
//! Threads: the server's control thread, under its state lock.

use crate::error::{err, GraphError, GraphErrorKind};
use crate::Graph;
use resound_shm::limits::{CLIENT_NAME_MAX, PORT_NAME_MAX};
use resound_shm::port_type;

/// Checks a client name against JACK's rules. An empty name is allowed,
/// as jackd allows it (programs built on the Rust `jack` crate rely on it);
/// a second one becomes "-01" like any taken name.
pub fn check_client_name(name: &str) -> Result<(), GraphError> {
    if name.len() > CLIENT_NAME_MAX {
        return Err(err(
            GraphErrorKind::InvalidName,
            format!(
                "client name {name:?} is {} bytes; the limit is {CLIENT_NAME_MAX}",
                name.len()
            ),
        ));
    }
    if name.contains(':') || name.contains('\0') {
        return Err(err(
            GraphErrorKind::InvalidName,
            format!("client name {name:?} must not contain ':' or NUL"),
        ));
    }
    Ok(())
}

/// Maps a JACK port type name to a [`port_type`] value.
pub fn port_type_of(name: &str) -> Option<u32> {
    match name {
        resound_shm::limits::AUDIO_TYPE => Some(port_type::AUDIO),
        resound_shm::limits::MIDI_TYPE => Some(port_type::MIDI),
        _ => None,
    }
}

/// The JACK type name of a [`port_type`] value.
pub fn port_type_name(t: u32) -> &'static str {
    if t == port_type::MIDI {
        resound_shm::limits::MIDI_TYPE
    } else {
        resound_shm::limits::AUDIO_TYPE
    }
}

impl Graph {
    pub(crate) fn check_port_short(&self, owner: u32, short: &str) -> Result<(), GraphError> {
        let cname = &self
            .client(owner)
            .ok_or_else(|| err(GraphErrorKind::NotAllowed, "no such client"))?
            .name;
        if short.is_empty() {
            return Err(err(GraphErrorKind::InvalidName, "port name is empty"));
        }
        if short.contains('\0') {
            return Err(err(GraphErrorKind::InvalidName, "port name contains NUL"));
        }
        let full = cname.len() + 1 + short.len();
        if full > PORT_NAME_MAX {
            return Err(err(
                GraphErrorKind::InvalidName,
                format!("full port name \"{cname}:{short}\" is {full} bytes; the limit is {PORT_NAME_MAX}"),
            ));
        }
        if self
            .ports()
            .any(|(_, p)| p.owner == owner && p.short == short)
        {
            return Err(err(
                GraphErrorKind::NameTaken,
                format!("port \"{cname}:{short}\" already exists"),
            ));
        }
        Ok(())
    }
}
