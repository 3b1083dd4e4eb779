//! The resync: every object of a controller's store is reconciled again once per the
//! `syncPeriod` of the cache serving it, jittered and spread, as a trigger stream for
//! kube-runtime's `Controller::reconcile_on`.
//!
//! controller-runtime resyncs in the informer: every `syncPeriod` (jittered once per informer)
//! client-go's shared informer replays its whole store to every handler as updates, and each
//! controller's handler adds every object to its workqueue at that instant. kube-runtime's
//! watcher never resyncs, and informant's informers are shared by every controller and keyed
//! without the period, so the resync lives on the controller's side: it walks the runner's
//! store, which holds exactly the objects the controller reconciles, and asks for each one when
//! it is due. The informers are untouched by it, which is why a `syncPeriod` change needs no
//! new informer and no relist.
//!
//! Each object is due every `period × factor` after the stream started, where `period` is the
//! effective `syncPeriod` of the cache that serves it ([`crate::cache::SyncPeriods`], read from
//! the current tree at each scan, so a reload's new period applies from then on; zero turns it
//! off) and `factor` is drawn in controller-runtime's range, `[0.9, 1.1)`, once per object
//! (upstream draws it once per informer). So the objects listed together are due again spread
//! over a fifth of the period rather than in one burst, and they drift further apart with every
//! round; a controller's queue never receives the whole store at one instant.

use std::hash::{BuildHasher as _, Hash};
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt as _, stream};
use kube::Resource;
use kube::core::GroupVersionKind;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::time::Instant;

use super::series::Series;
use crate::cache::{Cache as _, DEFAULT_SYNC_PERIOD, SharedCache, SyncPeriods};

/// The range of the factor each object's period is multiplied by: `[0.9, 1.1)`.
///
/// controller-runtime pkg/cache/internal/informers.go `calculateResyncPeriod`:
/// `factor := rand.Float64()/5.0 + 0.9`, "so that multiple controllers don't get into
/// lock-step".
pub const RESYNC_JITTER: (f64, f64) = (0.9, 1.1);

/// How many times per (shortest) period the store is scanned for due objects: an object is
/// asked for at most `period / SCANS_PER_PERIOD` after it is due (36 s of the default 10 h).
pub const SCANS_PER_PERIOD: u32 = 1000;

/// The shortest wait between two scans, whatever the period.
const MIN_SCAN_INTERVAL: Duration = Duration::from_millis(10);

/// How long to wait between scans of `periods`.
fn scan_interval(periods: &SyncPeriods) -> Duration {
    // With resync off everywhere, look now and then for a reload that turns it on.
    let shortest = periods.shortest().unwrap_or(DEFAULT_SYNC_PERIOD);
    (shortest / SCANS_PER_PERIOD).max(MIN_SCAN_INTERVAL)
}

struct Scanner<K: Resource + 'static>
where
    K::DynamicType: Eq + Hash,
{
    store: Store<K>,
    cache: Arc<SharedCache>,
    gvk: GroupVersionKind,
    dyntype: K::DynamicType,
    series: Series,
    /// When the stream started: object `o` is due at `started + n × period(o) × factor(o)`.
    started: Instant,
    /// When the last scan ran: what is due after it is due now.
    scanned: Instant,
    salt: u64,
}

impl<K> Scanner<K>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// `obj`'s factor in [`RESYNC_JITTER`], the same on every scan.
    fn factor(&self, obj: &K) -> f64 {
        let meta = obj.meta();
        let hash = foldhash::fast::FixedState::with_seed(self.salt).hash_one((
            &meta.namespace,
            &meta.name,
            &meta.uid,
        ));
        // The top 53 bits as a fraction in [0, 1).
        #[allow(clippy::cast_precision_loss, reason = "53 bits fit an f64 exactly")]
        let unit = (hash >> 11) as f64 / (1_u64 << 53) as f64;
        RESYNC_JITTER.0 + (RESYNC_JITTER.1 - RESYNC_JITTER.0) * unit
    }

    /// Whether `obj` became due between the last scan and `now`.
    fn due(&self, obj: &K, periods: &SyncPeriods, now: Instant) -> bool {
        let Some(period) = periods.of(obj.meta().namespace.as_deref()) else {
            return false;
        };
        let every = period.mul_f64(self.factor(obj)).as_nanos();
        if every == 0 {
            return false;
        }
        let rounds = |at: Instant| (at - self.started).as_nanos() / every;
        rounds(now) > rounds(self.scanned)
    }

    /// Waits for the next scan that finds objects due, and returns them, counted as queue adds.
    async fn next(&mut self) -> Vec<ObjectRef<K>> {
        loop {
            let wait = scan_interval(&self.cache.sync_periods(&self.gvk));
            tokio::time::sleep_until(self.scanned + wait).await;
            let now = Instant::now();
            let periods = self.cache.sync_periods(&self.gvk);
            let due: Vec<ObjectRef<K>> = self
                .store
                .state()
                .iter()
                .filter(|obj| self.due(obj, &periods, now))
                .map(|obj| ObjectRef::from_obj_with(obj.as_ref(), self.dyntype.clone()))
                .collect();
            self.scanned = now;
            if !due.is_empty() {
                tracing::debug!(objects = due.len(), "resync");
                for object in &due {
                    self.series.queue_added(object);
                }
                return due;
            }
        }
    }
}

/// Every object of `store` (the runner's store of a controller of `gvk`), again once per the
/// `syncPeriod` of the cache in `cache` that serves it, jittered and spread (see the module
/// docs); each request is counted in `series` as a queue add. Feed it to kube-runtime's
/// `Controller::reconcile_on`.
pub fn resync<K>(
    store: Store<K>,
    cache: Arc<SharedCache>,
    gvk: GroupVersionKind,
    dyntype: K::DynamicType,
    series: Series,
) -> impl Stream<Item = ObjectRef<K>> + Send
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Clone + Eq + Hash + Send + Sync + 'static,
{
    let started = Instant::now();
    let scanner = Scanner {
        store,
        cache,
        gvk,
        dyntype,
        series,
        started,
        scanned: started,
        salt: rand::random(),
    };
    stream::unfold(scanner, |mut scanner| async move {
        let due = scanner.next().await;
        Some((stream::iter(due), scanner))
    })
    .flatten()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::api::ObjectMeta;
    use kube::runtime::{reflector, watcher};

    use super::*;
    use crate::cache::typed::gvk_of;
    use crate::controller::ControllerMetrics;

    fn tree(yaml: &str) -> Arc<SharedCache> {
        let options = crate::config::load_str(yaml).unwrap().cache;
        let tree = crate::cache::Plan::new(&options)
            .unwrap()
            .instantiate(&crate::cache::Context::offline(false));
        Arc::new(SharedCache::new(tree))
    }

    fn config(spec: &str) -> String {
        format!(
            "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\n\
             metadata: {{name: test, namespace: default}}\nspec:\n{spec}"
        )
    }

    fn meta(namespace: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{namespace}-{name}")),
            ..ObjectMeta::default()
        }
    }

    /// A store of `K`s named `{prefix}-{i}` in `namespace`.
    fn store<K: Resource<DynamicType = ()> + Clone>(
        objects: impl IntoIterator<Item = K>,
    ) -> Store<K> {
        let (store, mut writer) = reflector::store::<K>();
        for obj in objects {
            writer.apply_watcher_event(&watcher::Event::Apply(obj));
        }
        store
    }

    fn configmaps(namespace: &str, n: usize) -> impl Iterator<Item = ConfigMap> {
        let namespace = namespace.to_owned();
        (0..n).map(move |i| ConfigMap {
            metadata: meta(&namespace, &format!("cm-{i}")),
            ..ConfigMap::default()
        })
    }

    /// The stream's requests until `until` after it started: each object's name (with its
    /// namespace) and when it was asked for, measured from the start.
    async fn requests<K>(
        stream: impl Stream<Item = ObjectRef<K>>,
        until: Duration,
    ) -> Vec<(String, Duration)>
    where
        K: Resource,
        K::DynamicType: Clone,
    {
        let started = Instant::now();
        let mut stream = std::pin::pin!(stream);
        let mut seen = Vec::new();
        while let Ok(Some(object)) = tokio::time::timeout_at(started + until, stream.next()).await {
            let namespace = object.namespace.clone().unwrap_or_default();
            seen.push((format!("{namespace}/{}", object.name), started.elapsed()));
        }
        seen
    }

    fn by_object(seen: &[(String, Duration)]) -> BTreeMap<&str, Vec<Duration>> {
        let mut by_object: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
        for (name, at) in seen {
            by_object.entry(name).or_default().push(*at);
        }
        by_object
    }

    #[tokio::test(start_paused = true)]
    async fn each_object_is_asked_for_again_once_per_jittered_period_spread_and_counted() {
        const OBJECTS: usize = 200;
        let period = Duration::from_hours(1);
        let tick = period / SCANS_PER_PERIOD;
        let cache = tree(&config("  syncPeriod: 1h\n"));
        let metrics = ControllerMetrics::new();
        let series = Series::new(Some(&metrics), "resync", 1);
        let stream = resync(
            store(configmaps("default", OBJECTS)),
            cache,
            gvk_of::<ConfigMap>(),
            (),
            series,
        );

        // Two rounds: the second ends before 2 × 1.1 periods and a few scans.
        let seen = requests(stream, period.mul_f64(2.5)).await;
        let rounds = by_object(&seen);
        assert_eq!(rounds.len(), OBJECTS, "every object is asked for");
        let (low, high) = (
            period.mul_f64(RESYNC_JITTER.0),
            period.mul_f64(RESYNC_JITTER.1),
        );
        for (name, at) in &rounds {
            assert_eq!(at.len(), 2, "{name} is asked for once per period: {at:?}");
            assert!(
                at[0] >= low && at[0] <= high + tick,
                "{name}'s first resync at {:?} is within [0.9, 1.1) periods of the start",
                at[0]
            );
            let again = at[1].saturating_sub(at[0]);
            assert!(
                again + tick >= low && again <= high + tick,
                "{name} is asked for again {again:?} after its first resync"
            );
        }

        // Spread: the first round covers most of its fifth of the period, a few per scan.
        let first: Vec<Duration> = rounds.values().map(|at| at[0]).collect();
        let (earliest, latest) = (first.iter().min().unwrap(), first.iter().max().unwrap());
        assert!(
            latest.saturating_sub(*earliest) >= period / 10,
            "the first round is spread from {earliest:?} to {latest:?}"
        );
        let mut per_instant: BTreeMap<Duration, usize> = BTreeMap::new();
        for at in &first {
            *per_instant.entry(*at).or_default() += 1;
        }
        let burst = per_instant.values().max().copied().unwrap_or_default();
        assert!(
            burst <= OBJECTS / 10,
            "at most {} objects at one instant, found {burst}",
            OBJECTS / 10
        );

        let adds = metrics.controller("resync", 1).adds();
        assert_eq!(adds, seen.len() as u64, "each request is a workqueue add");
        assert_eq!(adds, 2 * OBJECTS as u64);
    }

    #[tokio::test(start_paused = true)]
    async fn a_by_object_sync_period_applies_to_its_kind_and_a_namespace_one_to_its_namespace() {
        let minute = Duration::from_mins(1);
        let cache = tree(&config(
            "  syncPeriod: 10h\n  byObject:\n    - {apiVersion: v1, kind: ConfigMap, syncPeriod: 1m}\n\
             \x20   - apiVersion: v1\n      kind: Secret\n      namespaces:\n\
             \x20       fast: {syncPeriod: 2m}\n        slow: {}\n",
        ));
        let configmaps = resync(
            store(configmaps("default", 20)),
            Arc::clone(&cache),
            gvk_of::<ConfigMap>(),
            (),
            Series::default(),
        );
        let secrets = ["fast", "slow"].into_iter().flat_map(|namespace| {
            (0..10).map(move |i| Secret {
                metadata: meta(namespace, &format!("s-{i}")),
                ..Secret::default()
            })
        });
        let secrets = resync(
            store(secrets),
            cache,
            gvk_of::<Secret>(),
            (),
            Series::default(),
        );

        let window = minute * 3;
        let (configmaps, secrets) =
            tokio::join!(requests(configmaps, window), requests(secrets, window));
        for (name, at) in by_object(&configmaps) {
            assert!(
                at.len() >= 2 && at[0] >= minute.mul_f64(0.9) && at[0] <= minute.mul_f64(1.11),
                "ConfigMap {name} resyncs every minute (byObject), not every 10h: {at:?}"
            );
        }
        let secrets = by_object(&secrets);
        assert_eq!(
            secrets.keys().filter(|k| k.starts_with("fast/")).count(),
            10,
            "every Secret in fast resyncs: {secrets:?}"
        );
        for (name, at) in &secrets {
            assert!(name.starts_with("fast/"), "{name} (10h) resynced: {at:?}");
            assert!(
                at[0] >= (minute * 2).mul_f64(0.9) && at[0] <= (minute * 2).mul_f64(1.11),
                "Secret {name} resyncs every 2 minutes (its namespace's period): {at:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_sync_period_turns_resync_off() {
        let cache = tree(&config("  syncPeriod: 0s\n"));
        let stream = resync(
            store(configmaps("default", 5)),
            cache,
            gvk_of::<ConfigMap>(),
            (),
            Series::default(),
        );
        assert_eq!(requests(stream, Duration::from_hours(30)).await, vec![]);
    }
}
