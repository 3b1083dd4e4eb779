//! The `CacheConfig` custom resource: wire types, YAML loading, validation and hot reload.
