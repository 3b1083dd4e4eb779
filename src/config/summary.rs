//! A human-readable summary of the options a valid `CacheConfig` builds, after defaulting
//! (what `informant validate` prints).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::duration::format_duration;
use super::load::Validated;
use crate::cache::{Config, NamespaceKey, Namespaces, Scope};

impl Validated {
    /// Describes the defaulted cache options and the recorder options, one setting per line.
    ///
    /// ```
    /// let v = informant::config::load_str(
    ///     "apiVersion: informant.dev/v1alpha1\nkind: CacheConfig\nmetadata: {name: c}\nspec: {}\n",
    /// )?;
    /// assert!(v.summary().contains("namespaces: all"));
    /// # Ok::<(), informant::config::Error>(())
    /// ```
    #[must_use]
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let cache = self
            .cache
            .defaulted()
            .unwrap_or_else(|_| self.cache.clone());
        let meta = &self.resource.metadata;
        let _ = writeln!(
            out,
            "CacheConfig {} is valid",
            match (&meta.namespace, &meta.name) {
                (Some(ns), Some(n)) => format!("{ns}/{n}"),
                (None, Some(n)) => n.clone(),
                _ => "<unnamed>".to_owned(),
            }
        );
        out.push_str("cache:\n");
        let defaults = cache.default_config();
        let _ = writeln!(
            out,
            "  readerFailOnMissingInformer: {}",
            cache.reader_fail_on_missing_informer
        );
        write_default_namespaces(&mut out, &cache, &defaults);
        write_by_object(&mut out, &cache);
        if let Some(sharding) = super::ShardingDescription::of(&cache) {
            let _ = writeln!(
                out,
                "  sharding: ring {}, key {} (each replica caches and reconciles its share of \
                 the namespaced kinds; see informant explain)",
                sharding.ring, sharding.key
            );
        }
        let r = &self.recorder;
        let c = &r.correlator;
        out.push_str("recorder:\n");
        let _ = writeln!(out, "  component: {}", r.component);
        let _ = writeln!(
            out,
            "  queues: incoming {}, per watcher {}",
            r.incoming_queue_length, r.watcher_queue_length
        );
        let fields: Vec<&str> = c.spam_key_fields.iter().map(|f| f.as_str()).collect();
        let _ = writeln!(
            out,
            "  spam filter: key [{}], burst {}, qps {} (one token every {})",
            fields.join(", "),
            c.burst,
            c.qps,
            // Rounded to milliseconds: the float32 default is 299.99999 s.
            std::time::Duration::try_from_secs_f64((1000.0 / c.qps).round() / 1000.0)
                .map_or_else(|_| "never".to_owned(), format_duration)
        );
        let _ = writeln!(
            out,
            "  aggregation: {} similar events within {}, LRU caches of {}",
            c.max_events,
            format_duration(c.max_interval),
            c.lru_cache_size
        );
        let _ = writeln!(
            out,
            "  sink: {} tries, {} apart",
            r.sink.max_retries,
            format_duration(r.sink.retry_interval)
        );
        out
    }
}

/// The `byObject` kinds, each with its namespaces and settings.
fn write_by_object(out: &mut String, cache: &crate::cache::Options) {
    if cache.by_object.is_empty() {
        out.push_str("  byObject: none\n");
    } else {
        out.push_str("  byObject:\n");
        for by in &cache.by_object {
            let av = by.gvk.api_version();
            let scope = match by.scope {
                Scope::Namespaced => "namespaced",
                Scope::Cluster => "cluster-scoped",
            };
            let meta_only = if by.metadata_only {
                ", metadata only"
            } else {
                ""
            };
            let _ = writeln!(out, "    {av} {} ({scope}{meta_only}):", by.gvk.kind);
            match &by.namespaces {
                Namespaces::Only(map) => {
                    write_namespaces(out, map, "      ");
                    if let Some(selector) = &by.namespace_selector {
                        let _ = writeln!(
                            out,
                            "      each namespace matching {selector}: {}",
                            describe(&by.config)
                        );
                    }
                }
                Namespaces::All | Namespaces::Inherit => {
                    let scope = match by.scope {
                        Scope::Namespaced => "all namespaces",
                        Scope::Cluster => "cluster-wide",
                    };
                    let _ = writeln!(out, "      {scope}: {}", describe(&by.config));
                }
            }
        }
    }
}

/// The namespaces of the default cache: all, or the listed ones and those a selector adds.
fn write_default_namespaces(out: &mut String, cache: &crate::cache::Options, defaults: &Config) {
    if cache.default_namespaces.is_empty() && cache.default_namespace_selector.is_none() {
        out.push_str("  namespaces: all (one cluster-wide informer per kind)\n");
        let _ = writeln!(out, "  default: {}", describe(defaults));
        return;
    }
    out.push_str("  namespaces:\n");
    write_namespaces(out, &cache.default_namespaces, "    ");
    if let Some(selector) = &cache.default_namespace_selector {
        let _ = writeln!(
            out,
            "    each namespace matching {selector}: {}",
            describe(defaults)
        );
    }
    let _ = writeln!(out, "  cluster-scoped kinds: {}", describe(defaults));
}

fn write_namespaces(out: &mut String, map: &BTreeMap<NamespaceKey, Config>, indent: &str) {
    for (key, config) in map {
        let _ = writeln!(out, "{indent}{key}: {}", describe(config));
    }
}

/// One line: selectors, transform, sync period, bookmarks, deep copy.
fn describe(c: &Config) -> String {
    let label = c.effective_label_selector().to_string();
    let field = c.effective_field_selector().to_string();
    let mut parts = vec![
        format!("labels {}", if label.is_empty() { "<all>" } else { &label }),
        format!("fields {}", if field.is_empty() { "<all>" } else { &field }),
    ];
    if let Some(t) = c.transform.as_ref().filter(|t| !t.is_identity()) {
        let mut what = Vec::new();
        if t.strip_managed_fields {
            what.push("managedFields".to_owned());
        }
        what.extend(t.drop_annotations.iter().map(|a| format!("annotation {a}")));
        what.extend(t.drop_labels.iter().map(|l| format!("label {l}")));
        parts.push(format!("drops {}", what.join(", ")));
    }
    parts.push(format!(
        "resync {}",
        format_duration(c.effective_sync_period())
    ));
    if !c.effective_enable_watch_bookmarks() {
        parts.push("no bookmarks".to_owned());
    }
    if c.effective_unsafe_disable_deep_copy() {
        parts.push("no deep copy".to_owned());
    }
    parts.join("; ")
}
