//! Who makes a request: kube-apiserver's `user.Info`, and the well-known names and groups
//! (`k8s.io/apiserver/pkg/authentication/user/user.go`,
//! `k8s.io/apiserver/pkg/authentication/serviceaccount/util.go`).

use std::collections::BTreeMap;

/// The group every authenticated request has (`user.AllAuthenticated`).
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of anonymous requests (`user.AllUnauthenticated`).
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user of anonymous requests (`user.Anonymous`).
pub const ANONYMOUS: &str = "system:anonymous";
/// The group whose members may do anything (`user.SystemPrivilegedGroup`).
pub const MASTERS: &str = "system:masters";
/// The group of every `ServiceAccount` (`serviceaccount.AllServiceAccountsGroup`).
pub const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// The prefix of a `ServiceAccount`'s user name (`serviceaccount.ServiceAccountUsernamePrefix`).
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";
/// The name of the administrator the server's own kubeconfig authenticates as.
pub const ADMIN: &str = "admin";

/// An authenticated (or anonymous) user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    /// The user name (`system:serviceaccount:ops:inf`).
    pub name: String,
    /// The uid (a `ServiceAccount`'s), "" when none.
    pub uid: String,
    /// The groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// The anonymous user (`system:anonymous` in `system:unauthenticated`).
    #[must_use]
    pub fn anonymous() -> Self {
        Self {
            name: ANONYMOUS.to_string(),
            groups: vec![UNAUTHENTICATED.to_string()],
            ..Self::default()
        }
    }

    /// The administrator: `admin` in `system:masters`.
    #[must_use]
    pub fn admin() -> Self {
        Self {
            name: ADMIN.to_string(),
            groups: vec![MASTERS.to_string(), AUTHENTICATED.to_string()],
            ..Self::default()
        }
    }

    /// The user of `ServiceAccount` `namespace/name` with uid `uid`: its name, and the groups
    /// `system:serviceaccounts`, `system:serviceaccounts:<namespace>`, `system:authenticated`.
    #[must_use]
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> Self {
        Self {
            name: service_account_name(namespace, name),
            uid: uid.to_string(),
            groups: service_account_groups(namespace)
                .into_iter()
                .chain([AUTHENTICATED.to_string()])
                .collect(),
            ..Self::default()
        }
    }

    /// Whether the user is in `group`.
    #[must_use]
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// `system:serviceaccount:<namespace>:<name>` (`serviceaccount.MakeUsername`).
#[must_use]
pub fn service_account_name(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}

/// The groups of every `ServiceAccount` of `namespace` (`serviceaccount.MakeGroupNames`).
#[must_use]
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        SERVICE_ACCOUNTS.to_string(),
        format!("{SERVICE_ACCOUNTS}:{namespace}"),
    ]
}

/// The namespace and name of a `ServiceAccount` user name, when it is one
/// (`serviceaccount.SplitUsername`).
#[must_use]
pub fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_names_split_back_into_their_parts() {
        let user = User::service_account("ops", "inf", "u1");
        assert_eq!(user.name, "system:serviceaccount:ops:inf");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ops",
                "system:authenticated"
            ]
        );
        assert_eq!(split_service_account(&user.name), Some(("ops", "inf")));
        assert_eq!(split_service_account("system:serviceaccount:ops"), None);
        assert_eq!(split_service_account("system:serviceaccount:a:b:c"), None);
        assert_eq!(split_service_account("alice"), None);
    }
}
