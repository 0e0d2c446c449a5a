//! Name limits (JACK's) and capacity defaults (resound's).

/// Longest client name in bytes, without the terminating NUL (JACK: `jack_client_name_size() - 1`).
pub const CLIENT_NAME_MAX: usize = 63;
/// Longest full port name `client:port` in bytes, without NUL (JACK: `jack_port_name_size() - 1`).
pub const PORT_NAME_MAX: usize = 319;
/// Longest port type name in bytes, without NUL (JACK: `jack_port_type_size() - 1`).
pub const PORT_TYPE_MAX: usize = 31;

/// Type name of audio ports, as in JACK.
pub const AUDIO_TYPE: &str = "32 bit float mono audio";
/// Type name of MIDI ports, as in JACK.
pub const MIDI_TYPE: &str = "8 bit raw midi";

/// Default number of client slots (slot 0 is the driver, so this many minus one clients).
pub const DEFAULT_MAX_CLIENTS: u32 = 64;
/// Default number of port slots (the driver's system ports included).
pub const DEFAULT_MAX_PORTS: u32 = 512;
/// Default capacity of the connection table (port-to-port connections).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 2048;
/// Hard upper bounds on the configurable capacities (keeps indices in u16/u32 and memory sane).
pub const HARD_MAX_CLIENTS: u32 = 1024;
/// See [`HARD_MAX_CLIENTS`].
pub const HARD_MAX_PORTS: u32 = 16384;
/// See [`HARD_MAX_CLIENTS`].
pub const HARD_MAX_CONNECTIONS: u32 = 65536;
/// Largest period in frames the server accepts; port buffers are preallocated at this size.
pub const MAX_BUFFER_FRAMES: u32 = 8192;
/// Smallest period the server accepts.
pub const MIN_BUFFER_FRAMES: u32 = 16;

/// Largest frame a client may send on its socket (bytes of payload).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// Largest frame the server sends (status and port lists of a big graph).
pub const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;
/// Notifications queued for one client before it is considered unresponsive and dropped.
pub const NOTIFY_QUEUE: usize = 4096;
