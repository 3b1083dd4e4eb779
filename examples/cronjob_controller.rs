//! The sample `CronJob` controller ([`informant::samples::cronjob`]) run by the manager: it
//! reads through the manager's cache tree, records through its recorder, and is counted on its
//! `/metrics` (controller-runtime's series). Ctrl-C stops it.
//!
//! ```text
//! cargo run --example cronjob_controller -- --kubeconfig PATH [--config cacheconfig.yaml]
//! ```
//!
//! Without `--kubeconfig`: `$KUBECONFIG`, `~/.kube/config`, or in-cluster. Without `--config`:
//! the `CacheConfig` `default/informant` in the cluster (controller-runtime's defaults while
//! it is absent). `informant demo` runs the same controller on the embedded API server.

use std::error::Error;
use std::path::PathBuf;

use informant::manager::{self, ConfigSource, Manager};
use informant::samples::cronjob;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let (mut kubeconfig, mut config) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--kubeconfig" => kubeconfig = args.next().map(PathBuf::from),
            "--config" => config = args.next().map(PathBuf::from),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let client = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
            let options = kube::config::KubeConfigOptions::default();
            kube::Client::try_from(
                kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?,
            )?
        }
        None => kube::Client::try_default().await?,
    };
    let source = match config {
        Some(path) => ConfigSource::File(path),
        None => ConfigSource::Resource {
            namespace: "default".into(),
            name: "informant".into(),
        },
    };

    let mut manager = Manager::new(client, manager::Options::new(source)).await?;
    cronjob::add_to(&mut manager);

    let shutdown = CancellationToken::new();
    let mut running = std::pin::pin!(manager.run(shutdown.clone()));
    tokio::select! {
        result = &mut running => return Ok(result?),
        _ = tokio::signal::ctrl_c() => shutdown.cancel(),
    }
    Ok(running.await?)
}
