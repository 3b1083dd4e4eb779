//! Process exit codes of the `informant` binary, from BSD `sysexits.h` (as linkerd2-proxy uses
//! them: 64 for bad configuration, 1 for a failure at run time).

/// Success.
pub const OK: u8 = 0;
/// A failure at run time (startup failed, the server went away, ...).
pub const FAILURE: u8 = 1;
/// The input is invalid: a bad config, a bad flag value (`EX_USAGE`).
pub const USAGE: u8 = 64;
/// An input file is missing or unreadable (`EX_NOINPUT`).
pub const NO_INPUT: u8 = 66;
/// The command is not implemented yet, or an internal error (`EX_SOFTWARE`).
pub const SOFTWARE: u8 = 70;
