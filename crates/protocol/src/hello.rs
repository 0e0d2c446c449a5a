//! The server's check of a client's first frame: the [`Hello`] decoded from
//! the frame's payload and its protocol version compared with ours. Pure
//! (no I/O), so the handshake and the `wire_frame` fuzz target run the same
//! code on what a client sent.
//!
//! Threads: a new connection's session thread in the server.

use crate::wire::{decode, ErrorCode, Hello, WireError, PROTOCOL_VERSION};

/// Decodes the payload of a client's first frame and checks its protocol
/// version: a malformed payload is an [`ErrorCode::Protocol`] error, another
/// version an [`ErrorCode::Version`] error that says what to do. The error
/// is what the server sends back in `Welcome::Refused`.
pub fn check_hello(payload: &[u8]) -> Result<Hello, WireError> {
    let hello = decode::<Hello>(payload)?;
    if hello.protocol != PROTOCOL_VERSION {
        return Err(WireError::new(
            ErrorCode::Version,
            format!(
                "client speaks protocol {}, server {PROTOCOL_VERSION}; rebuild the client against this resound",
                hello.protocol
            ),
        ));
    }
    Ok(hello)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{encode, HelloKind};

    #[test]
    fn good_bad_and_other_version() {
        let hello = Hello {
            protocol: PROTOCOL_VERSION,
            kind: HelloKind::Control,
        };
        let frame = encode(&hello).unwrap();
        assert_eq!(check_hello(&frame[4..]).unwrap(), hello);
        assert_eq!(
            check_hello(&[0xff; 3]).unwrap_err().code,
            ErrorCode::Protocol
        );
        let old = encode(&Hello {
            protocol: PROTOCOL_VERSION + 1,
            ..hello
        })
        .unwrap();
        let e = check_hello(&old[4..]).unwrap_err();
        assert_eq!(e.code, ErrorCode::Version);
        assert!(e.message.contains("rebuild the client"), "{}", e.message);
    }
}
