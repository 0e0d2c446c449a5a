//! The clients open in this process, for the few JACK functions that take no
//! client (jack_get_property & co, jack_get_client_pid): they ask the server
//! through the most recently opened one, or, with none open, through a
//! control session to the default server.

use crate::client::LjClient;
use std::sync::Mutex;

static OPEN: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Records an opened client.
pub fn opened(c: &LjClient) {
    OPEN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(c as *const LjClient as usize);
}

/// Forgets a client (before it is freed).
pub fn closed(c: &LjClient) {
    let a = c as *const LjClient as usize;
    OPEN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&x| x != a);
}

/// Runs `f` with the most recently opened client that is still connected
/// (None if there is none). The registry lock is held meanwhile, so the
/// client cannot be freed under `f`.
pub fn with_client<T>(f: impl FnOnce(Option<&LjClient>) -> T) -> T {
    let open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    let c = open
        .iter()
        .rev()
        // SAFETY: addresses in the registry are live clients (removed under
        // this lock before they are freed).
        .map(|&a| unsafe { &*(a as *const LjClient) })
        .find(|c| !c.client.server_gone());
    f(c)
}
