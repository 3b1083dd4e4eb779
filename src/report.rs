//! How the CLI reports errors: each error's `Display` covers only its own layer (STYLE.md §5),
//! so a command prints the whole `source()` chain.

/// Formats an error with its whole `source()` chain, joined with `: ` (`a: b: c`).
///
/// ```
/// #[derive(Debug, thiserror::Error)]
/// #[error("cannot read config.yaml")]
/// struct ReadConfig(#[source] std::io::Error);
///
/// let error = ReadConfig(std::io::Error::other("permission denied"));
/// assert_eq!(
///     informant::report::error_chain(&error),
///     "cannot read config.yaml: permission denied"
/// );
/// ```
#[must_use]
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}
