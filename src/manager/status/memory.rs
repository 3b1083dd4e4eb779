//! The memory part of a `CacheConfig`'s status: the bytes its informers hold, in total, per
//! kind and per namespace scope.

use std::collections::BTreeMap;

use crate::cache::InformerStatus;
use crate::config::{KindMemory, NamespaceMemory};

/// The bytes of a cache tree, summed from its informers' rows.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Memory {
    /// Every counted byte; `None` when no informer counts its bytes.
    pub(super) total: Option<i64>,
    /// Per kind, largest first.
    pub(super) by_kind: Vec<KindMemory>,
    /// Per namespace scope (`""`: every namespace), largest first.
    pub(super) by_namespace: Vec<NamespaceMemory>,
}

impl Memory {
    /// Sums the informers that count their bytes (an informer with `unsafeDisableDeepCopy`
    /// does not).
    pub(super) fn of(informers: &[InformerStatus]) -> Self {
        let mut total = None;
        let mut kinds = BTreeMap::<(&str, &str), (i64, i64)>::new();
        let mut namespaces = BTreeMap::<&str, i64>::new();
        for informer in informers {
            let Some(bytes) = informer.bytes else {
                continue;
            };
            let bytes = bytes.max(0);
            *total.get_or_insert(0) += bytes;
            let kind = kinds
                .entry((informer.api_version.as_str(), informer.kind.as_str()))
                .or_default();
            kind.0 += informer.objects.max(0);
            kind.1 += bytes;
            *namespaces
                .entry(informer.namespace.as_deref().unwrap_or_default())
                .or_default() += bytes;
        }
        let mut by_kind: Vec<KindMemory> = kinds
            .into_iter()
            .map(|((api_version, kind), (objects, bytes))| KindMemory {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
                objects,
                bytes,
            })
            .collect();
        by_kind.sort_by_key(|k| std::cmp::Reverse(k.bytes));
        let mut by_namespace: Vec<NamespaceMemory> = namespaces
            .into_iter()
            .map(|(namespace, bytes)| NamespaceMemory {
                namespace: namespace.to_owned(),
                bytes,
            })
            .collect();
        by_namespace.sort_by_key(|n| std::cmp::Reverse(n.bytes));
        Self {
            total,
            by_kind,
            by_namespace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        objects: i64,
        bytes: Option<i64>,
    ) -> InformerStatus {
        InformerStatus {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
            objects,
            bytes,
            ..InformerStatus::default()
        }
    }

    #[test]
    fn bytes_are_summed_per_kind_and_namespace_largest_first() {
        let memory = Memory::of(&[
            row("v1", "Pod", Some("a"), 2, Some(2000)),
            row("v1", "Pod", Some("b"), 1, Some(500)),
            row("v1", "Secret", Some("a"), 4, Some(4000)),
            row("apps/v1", "Deployment", None, 1, Some(100)),
            // Shared objects are not counted.
            row("v1", "ConfigMap", Some("b"), 9, None),
        ]);
        assert_eq!(memory.total, Some(6600));
        let kinds: Vec<_> = memory
            .by_kind
            .iter()
            .map(|k| (k.kind.as_str(), k.objects, k.bytes))
            .collect();
        assert_eq!(
            kinds,
            [
                ("Secret", 4, 4000),
                ("Pod", 3, 2500),
                ("Deployment", 1, 100)
            ]
        );
        let namespaces: Vec<_> = memory
            .by_namespace
            .iter()
            .map(|n| (n.namespace.as_str(), n.bytes))
            .collect();
        assert_eq!(namespaces, [("a", 6000), ("b", 500), ("", 100)]);
        assert_eq!(
            Memory::of(&[row("v1", "Pod", None, 1, None)]),
            Memory::default()
        );
    }
}
