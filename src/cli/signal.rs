//! Signal handling: the only place that listens for SIGINT and SIGTERM (STYLE.md §6).

use tokio_util::sync::CancellationToken;

/// Cancels `token` on the first SIGINT or SIGTERM. If the SIGTERM handler can not be
/// installed, SIGINT alone still cancels.
pub async fn cancel_on_signal(token: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot install the SIGTERM handler; only SIGINT stops informant");
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutdown requested");
    token.cancel();
}
