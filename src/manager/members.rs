//! The members of a shard ring as someone outside it sees them (`informant explain
//! --kubeconfig`): the Leases labelled `informant.dev/ring=<ring>` in the lease namespace whose
//! `renewTime + leaseDurationSeconds` is still ahead, and the share of the hash space the ring
//! of their holders gives each.
//!
//! A member itself counts another as gone a lease duration after it last saw its Lease change,
//! on its own clock ([`super::Member`]); an observer has only the Lease's `renewTime` and its
//! own clock, so near an expiry the two may disagree for a clock skew's worth of time.
//!
//! # RBAC
//!
//! `list` on `leases` in group `coordination.k8s.io`, in the lease namespace.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::ListParams;

use super::shard::{RING_LABEL, Ring};

/// One live member of a ring.
#[derive(Clone, Debug, PartialEq)]
pub struct RingMember {
    /// Its identity (the Lease's holder).
    pub identity: String,
    /// Its Lease's name.
    pub lease: String,
    /// When it last renewed its Lease.
    pub renewed: jiff::Timestamp,
    /// How long after a renewal its Lease expires.
    pub lease_duration: Duration,
    /// Its share of the hash space on the ring of the live members, from 0 to 1.
    pub share: f64,
}

/// The live members of `ring`: the Leases of `namespace` labelled with it, unexpired at `now`,
/// sorted by identity.
///
/// # Errors
///
/// The LIST's error.
pub async fn ring_members(
    client: &kube::Client,
    namespace: &str,
    ring: &str,
    now: jiff::Timestamp,
) -> Result<Vec<RingMember>, kube::Error> {
    let leases = Api::<Lease>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&format!("{RING_LABEL}={ring}")))
        .await?;
    Ok(live_members(leases.items, now))
}

/// The members the `leases` hold at `now`: each Lease with a holder and a renewal less than its
/// duration ago; each one's share on the ring of them all.
#[must_use]
pub(crate) fn live_members(
    leases: impl IntoIterator<Item = Lease>,
    now: jiff::Timestamp,
) -> Vec<RingMember> {
    let mut members: Vec<RingMember> = leases
        .into_iter()
        .filter_map(|lease| {
            let spec = lease.spec?;
            let identity = spec.holder_identity.filter(|h| !h.is_empty())?;
            let renewed = spec.renew_time.or(spec.acquire_time)?.0;
            let seconds = u64::try_from(spec.lease_duration_seconds?).ok()?;
            let lease_duration = Duration::from_secs(seconds);
            let expires = renewed.checked_add(lease_duration).ok()?;
            (expires > now).then(|| RingMember {
                identity,
                lease: lease.metadata.name.unwrap_or_default(),
                renewed,
                lease_duration,
                share: 0.0,
            })
        })
        .collect();
    members.sort_by(|a, b| a.identity.cmp(&b.identity));
    let ring = Ring::new(members.iter().map(|m| m.identity.as_str()));
    let shares: Vec<f64> = members.iter().map(|m| ring.share(&m.identity)).collect();
    for (member, share) in members.iter_mut().zip(shares) {
        member.share = share;
    }
    members
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

    use super::*;

    fn lease(name: &str, holder: Option<&str>, renewed: &str, seconds: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: Some(MicroTime(renewed.parse().unwrap())),
                lease_duration_seconds: Some(seconds),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn expired_and_unheld_leases_are_not_members_and_the_others_share_the_space() {
        let now: jiff::Timestamp = "2026-01-01T00:00:20Z".parse().unwrap();
        let members = live_members(
            [
                lease("shop-b", Some("b"), "2026-01-01T00:00:10Z", 15),
                lease("shop-a", Some("a"), "2026-01-01T00:00:19Z", 15),
                lease("shop-c", Some("c"), "2026-01-01T00:00:05Z", 15),
                lease("shop-d", None, "2026-01-01T00:00:19Z", 15),
            ],
            now,
        );
        let names: Vec<&str> = members.iter().map(|m| m.identity.as_str()).collect();
        assert_eq!(
            names,
            ["a", "b"],
            "c expired at :20 exactly, d is held by nobody"
        );
        assert_eq!(members[1].lease, "shop-b");
        let total: f64 = members.iter().map(|m| m.share).sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
        assert!(members.iter().all(|m| m.share > 0.2), "{members:?}");
        assert!(live_members([], now).is_empty());
    }
}
