//! A small operator on informant as a library, in full: every `ConfigMap` labelled `app=demo`
//! gets a `Secret` of the same name with the same keys, server-side applied and owned by the
//! `ConfigMap` (deleting the `Secret` brings it back; deleting the `ConfigMap` deletes it), a
//! `Synced` Event, and a reconcile again after 5 minutes (`--requeue-secs`, the operator's own
//! state, [`Settings`], read in the reconcile through `ctx.data()`). The process is `informant run`'s
//! manager with `informant run`'s flags ([`manager::Args`]): a `CacheConfig` file or resource,
//! leader election (`--leader-elect`), health (`:8081`) and metrics (`:8080`).
//!
//! ```text
//! cargo run --example configmap_secret -- --config examples/configmap_secret.yaml \
//!     [--kubeconfig PATH] [--leader-elect]
//! ```
//!
//! Its RBAC: `--print-rules` prints what the controller reads and writes, for `informant rbac
//! --config examples/configmap_secret.yaml --extra-rules FILE` to add to the manager's own.
//!
//! `tests/manager/example_configmap_secret.rs` runs it against the embedded API server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use informant::controller::{Action, Context, Controller, WriteError, default_error_policy};
use informant::manager::{self, Manager};
use informant::recorder::EventType;
use informant::selector::{LabelSelector, ParseError};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::ObjectMeta;
use tokio_util::sync::CancellationToken;

/// The controller's name: its metrics label, span field and field manager.
pub const NAME: &str = "demo-secrets";

/// The operator's flags: the manager's, as `informant run` has them.
#[derive(Parser, Debug)]
pub struct Cli {
    /// The manager's flags and `INFORMANT_*` variables.
    #[command(flatten)]
    pub manager: manager::Args,
    /// Print the controller's RBAC rules (YAML, for `informant rbac --extra-rules`) and exit.
    #[arg(long)]
    pub print_rules: bool,
    /// Seconds after which each `ConfigMap` is reconciled again, changed or not.
    #[arg(long, default_value_t = 300)]
    pub requeue_secs: u64,
}

/// The operator's own state, given once to the controller (`add_to_with`) and read by every
/// reconcile with `ctx.data()`: kube-rs's `Context<T>`.
#[derive(Debug)]
pub struct Settings {
    /// When to reconcile a `ConfigMap` again.
    pub requeue: Duration,
}

impl Cli {
    /// The controller's state from the flags.
    #[must_use]
    pub fn settings(&self) -> Settings {
        Settings {
            requeue: Duration::from_secs(self.requeue_secs),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // Logs first: without a subscriber the manager and the controller log nothing.
    let _logs = informant::telemetry::init_default()?;
    let cli = Cli::parse();
    if cli.print_rules {
        print!("{}", informant::yaml::to_string(&controller()?.rules())?);
        return Ok(());
    }
    let options = cli.manager.options()?;
    let client = cli.manager.client().await?;
    let shutdown = CancellationToken::new();
    let settings = cli.settings();
    let mut running = std::pin::pin!(run(client, options, settings, shutdown.clone()));
    tokio::select! {
        result = &mut running => return result,
        _ = tokio::signal::ctrl_c() => shutdown.cancel(),
    }
    running.await
}

/// Runs the manager with the controller, whose reconciles read `settings`, until `shutdown`.
///
/// # Errors
/// Why the manager could not start, or stopped with an error.
pub async fn run(
    client: kube::Client,
    options: manager::Options,
    settings: Settings,
    shutdown: CancellationToken,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let controller = controller()?;
    let mut manager = Manager::new(client, options).await?;
    controller.add_to_with(&mut manager, settings, reconcile, default_error_policy);
    Ok(manager.run(shutdown).await?)
}

/// The controller: the `ConfigMap`s labelled `app=demo` (whatever else the cache holds),
/// owning the `Secret`s it applies (`patch`: server-side apply).
///
/// # Errors
/// None in practice: the selector is a constant.
pub fn controller() -> Result<Controller<ConfigMap>, ParseError> {
    Ok(Controller::<ConfigMap>::new(NAME)
        .labels(LabelSelector::parse("app=demo")?)
        .owns::<Secret>()
        .writes::<Secret>(&["patch"]))
}

/// Applies the `Secret` of `configmap`, records `Synced`, and comes back after the settings'
/// `requeue`.
async fn reconcile(
    configmap: Arc<ConfigMap>,
    ctx: Arc<Context<Settings>>,
) -> Result<Action, WriteError> {
    // Only app=demo ConfigMaps come here, whatever the CacheConfig (editable at run time)
    // holds: the builder's label selector says so.
    let namespace = configmap.namespace().unwrap_or_default();
    let mut data: BTreeMap<String, ByteString> = BTreeMap::new();
    for (key, value) in configmap.data.iter().flatten() {
        data.insert(key.clone(), ByteString(value.clone().into_bytes()));
    }
    for (key, value) in configmap.binary_data.iter().flatten() {
        data.insert(key.clone(), value.clone());
    }
    let keys = data.len();
    // Server-side applied as the controller (field manager "demo-secrets"), with the
    // ConfigMap's controller owner reference: `owns::<Secret>()` brings a deleted one back.
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(configmap.name_any()),
            namespace: Some(namespace),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..Secret::default()
    };
    ctx.apply_owned(configmap.as_ref(), &secret).await?;
    ctx.record(
        configmap.as_ref(),
        EventType::Normal,
        "Synced",
        &format!("Secret {} has the {keys} keys", configmap.name_any()),
    );
    Ok(Action::requeue(ctx.data().requeue))
}
