//! The scope (namespaced or cluster) of Kubernetes' built-in kinds, read from k8s-openapi's
//! types, so options can be checked before any API server is reachable.

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
use kube::core::GroupVersionKind;

use super::Scope;

/// Maps k8s-openapi's scope marker types to [`Scope`].
trait ScopeOf {
    const SCOPE: Scope;
}

impl ScopeOf for NamespaceResourceScope {
    const SCOPE: Scope = Scope::Namespaced;
}

impl ScopeOf for ClusterResourceScope {
    const SCOPE: Scope = Scope::Cluster;
}

/// One built-in kind: group, version, kind, scope.
pub(crate) type BuiltinKind = (&'static str, &'static str, &'static str, Scope);

macro_rules! kinds {
    ($($t:ty),* $(,)?) => {
        &[$((
            <$t as Resource>::GROUP,
            <$t as Resource>::VERSION,
            <$t as Resource>::KIND,
            <<$t as Resource>::Scope as ScopeOf>::SCOPE,
        )),*]
    };
}

/// The built-in kinds of Kubernetes 1.33 a cache is likely to be configured for.
pub(crate) const BUILTIN_KINDS: &[BuiltinKind] = kinds![
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

/// The scope of a built-in kind, or `None` if `gvk` is not one (a custom resource, whose scope
/// only discovery knows).
///
/// ```
/// use informant::cache::options::{builtin_scope, Scope};
/// use kube::core::GroupVersionKind;
/// assert_eq!(builtin_scope(&GroupVersionKind::gvk("", "v1", "Node")), Some(Scope::Cluster));
/// assert_eq!(builtin_scope(&GroupVersionKind::gvk("apps", "v1", "Deployment")), Some(Scope::Namespaced));
/// assert_eq!(builtin_scope(&GroupVersionKind::gvk("example.com", "v1", "Widget")), None);
/// ```
#[must_use]
pub fn builtin_scope(gvk: &GroupVersionKind) -> Option<Scope> {
    BUILTIN_KINDS
        .iter()
        .find(|(g, v, k, _)| *g == gvk.group && *v == gvk.version && *k == gvk.kind)
        .map(|(_, _, _, scope)| *scope)
}

/// Whether `group` is one of the built-in API groups listed here (so a kind unknown in it is
/// a typo, not a custom resource).
pub(crate) fn is_builtin_group(group: &str) -> bool {
    BUILTIN_KINDS.iter().any(|(g, ..)| *g == group)
}

/// The built-in kinds of `group`.
pub(crate) fn builtin_kinds_in(group: &str) -> impl Iterator<Item = &'static BuiltinKind> + '_ {
    BUILTIN_KINDS.iter().filter(move |(g, ..)| *g == group)
}
