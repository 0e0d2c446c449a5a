//! Target `wire_frame`: the bytes a client writes on its socket, read the
//! way the server reads them. The input is the stream: frames are read one
//! after the other with the server's size limit
//! ([`resound_shm::limits::MAX_REQUEST_BYTES`], as the session threads do)
//! until it ends or a frame is refused; the first payload goes through the
//! handshake's [`check_hello`], every payload through the session's
//! `decode::<Envelope>`.
//!
//! Checks: no panic; a payload is never longer than the limit; a frame the
//! reader refuses as too long really announced more than the limit; a
//! decoded message encodes again, and that encoding decodes to the same
//! encoding (the server's replies and logs rely on re-encoding what it read).

use resound_protocol::hello::check_hello;
use resound_protocol::wire::{decode, encode, read_frame, Envelope, FrameError};
use resound_shm::limits::MAX_REQUEST_BYTES;
use serde::{de::DeserializeOwned, Serialize};
use std::io::Cursor;

/// Reads and decodes every frame of `data`.
pub fn run(data: &[u8]) {
    let mut cur = Cursor::new(data);
    let mut first = true;
    loop {
        let at = cur.position() as usize;
        let payload = match read_frame(&mut cur, MAX_REQUEST_BYTES) {
            Ok(p) => p,
            Err(FrameError::TooLong(n, max)) => {
                assert!(n > max && max == MAX_REQUEST_BYTES);
                let announced = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                assert_eq!(announced as usize, n);
                break;
            }
            Err(_) => break,
        };
        assert!(payload.len() <= MAX_REQUEST_BYTES);
        assert_eq!(&data[at + 4..at + 4 + payload.len()], &payload[..]);
        if first {
            if let Ok(hello) = check_hello(&payload) {
                round_trip(&hello);
            }
            first = false;
        }
        if let Ok(env) = decode::<Envelope>(&payload) {
            round_trip(&env);
        }
    }
}

/// Encodes `v`, decodes that, and checks the second encoding is the first
/// (byte equality: a message may carry NaNs, which `==` would reject).
fn round_trip<T: Serialize + DeserializeOwned>(v: &T) {
    let a = encode(v).expect("a decoded message encodes");
    let back: T = decode(&a[4..]).expect("an encoded message decodes");
    let b = encode(&back).expect("a decoded message encodes");
    assert_eq!(a, b, "decode/encode is not stable");
}
