//! The built-in kinds of Kubernetes, read from k8s-openapi's types: the one table that config
//! validation and the cache (kinds and scopes, before any API server is reachable) and the
//! embedded API server (what it serves) share.

use k8s_openapi::api::{
    admissionregistration::v1 as admission, apps::v1 as apps, autoscaling::v1 as autoscaling_v1,
    autoscaling::v2 as autoscaling_v2, batch::v1 as batch, certificates::v1 as certificates,
    coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
    events::v1 as events, flowcontrol::v1 as flowcontrol, networking::v1 as networking,
    node::v1 as node, policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling,
    storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope, Resource};

/// Whether k8s-openapi's scope marker type is namespaced.
trait ScopeOf {
    const NAMESPACED: bool;
}

impl ScopeOf for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl ScopeOf for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// One built-in kind, as k8s-openapi describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltinKind {
    /// API group, `""` for the core group.
    pub group: &'static str,
    /// API version within the group.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural resource name, as in URLs (`pods`).
    pub plural: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
}

macro_rules! kinds {
    ($($t:ty),* $(,)?) => {
        &[$(BuiltinKind {
            group: <$t as Resource>::GROUP,
            version: <$t as Resource>::VERSION,
            kind: <$t as Resource>::KIND,
            plural: <$t as Resource>::URL_PATH_SEGMENT,
            namespaced: <<$t as Resource>::Scope as ScopeOf>::NAMESPACED,
        }),*]
    };
}

/// The built-in kinds of Kubernetes 1.33 an operator is likely to cache or serve.
pub const BUILTIN_KINDS: &[BuiltinKind] = kinds![
    core::Binding,
    core::ConfigMap,
    core::Endpoints,
    core::Event,
    core::LimitRange,
    core::Namespace,
    core::Node,
    core::PersistentVolume,
    core::PersistentVolumeClaim,
    core::Pod,
    core::PodTemplate,
    core::ReplicationController,
    core::ResourceQuota,
    core::Secret,
    core::Service,
    core::ServiceAccount,
    core::ComponentStatus,
    apps::ControllerRevision,
    apps::DaemonSet,
    apps::Deployment,
    apps::ReplicaSet,
    apps::StatefulSet,
    batch::CronJob,
    batch::Job,
    autoscaling_v1::HorizontalPodAutoscaler,
    autoscaling_v2::HorizontalPodAutoscaler,
    rbac::ClusterRole,
    rbac::ClusterRoleBinding,
    rbac::Role,
    rbac::RoleBinding,
    networking::Ingress,
    networking::IngressClass,
    networking::NetworkPolicy,
    networking::IPAddress,
    networking::ServiceCIDR,
    policy::PodDisruptionBudget,
    storage::CSIDriver,
    storage::CSINode,
    storage::CSIStorageCapacity,
    storage::StorageClass,
    storage::VolumeAttachment,
    scheduling::PriorityClass,
    node::RuntimeClass,
    coordination::Lease,
    discovery::EndpointSlice,
    events::Event,
    certificates::CertificateSigningRequest,
    flowcontrol::FlowSchema,
    flowcontrol::PriorityLevelConfiguration,
    admission::MutatingWebhookConfiguration,
    admission::ValidatingWebhookConfiguration,
    admission::ValidatingAdmissionPolicy,
    admission::ValidatingAdmissionPolicyBinding,
    apiextensions::CustomResourceDefinition,
];

/// The built-in kind `group`/`version`/`kind`, if it is one.
///
/// ```
/// let node = informant::kinds::builtin("", "v1", "Node").unwrap();
/// assert_eq!((node.plural, node.namespaced), ("nodes", false));
/// assert!(informant::kinds::builtin("example.com", "v1", "Widget").is_none());
/// ```
#[must_use]
pub fn builtin(group: &str, version: &str, kind: &str) -> Option<&'static BuiltinKind> {
    BUILTIN_KINDS
        .iter()
        .find(|k| k.group == group && k.version == version && k.kind == kind)
}

/// Whether `group` is one of the built-in API groups listed here (so a kind unknown in it is
/// a typo, not a custom resource).
#[must_use]
pub fn is_builtin_group(group: &str) -> bool {
    BUILTIN_KINDS.iter().any(|k| k.group == group)
}

/// The built-in kinds of `group`.
pub fn in_group(group: &str) -> impl Iterator<Item = &'static BuiltinKind> + '_ {
    BUILTIN_KINDS.iter().filter(move |k| k.group == group)
}
