//! What the leader does next with the managed certificates: a pure function of what the
//! Secret holds, the settings and the time ([`plan`]).

use std::time::{Duration, SystemTime};

use super::material::{Certificates, Parsed};
use super::{RENEW_FRACTION, Settings};

/// The leader's next move, one write of the Secret each (but [`Step::Keep`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// No Secret, or one whose signing CA has expired (no overlap can help then): a new CA
    /// and serving certificate.
    Create,
    /// The serving certificate is due (2/3 of its life) or expired: a new one from the same
    /// CA, which clients already trust.
    RenewServing,
    /// The CA is due: a new CA joins the bundle; the serving certificate stays.
    AddCa,
    /// The new CA has been in the bundle for the overlap: the serving certificate is
    /// re-issued by it.
    SwitchServing,
    /// The serving certificate has come from the new CA for the overlap: the old CAs leave
    /// the bundle.
    DropOldCas,
    /// Nothing to do before `until`.
    Keep {
        /// When the next step is due.
        until: SystemTime,
    },
}

/// When `cert` is due for renewal: [`RENEW_FRACTION`] of the way from its making to its end.
fn renew_at(cert: &Parsed) -> SystemTime {
    let life = cert
        .not_after
        .duration_since(cert.issued)
        .unwrap_or(Duration::ZERO);
    let (num, den) = RENEW_FRACTION;
    cert.issued + life * num / den
}

/// The next step for `current` (the Secret's certificates, `None` when there is no Secret)
/// at `now`.
#[must_use]
pub fn plan(current: Option<&Certificates>, settings: &Settings, now: SystemTime) -> Step {
    let Some(current) = current else {
        return Step::Create;
    };
    let Some(signing) = current.cas.last() else {
        return Step::Create;
    };
    if now >= signing.not_after {
        return Step::Create;
    }
    let serving_expired = now >= current.serving.not_after;
    if !current.serving_from_newest_ca() {
        // Between AddCa and SwitchServing (or a serving certificate someone else wrote).
        let due = signing.issued + settings.overlap;
        return if serving_expired || now >= due || current.cas.len() == 1 {
            Step::SwitchServing
        } else {
            Step::Keep { until: due }
        };
    }
    if current.cas.len() > 1 {
        let due = current.serving.issued + settings.overlap;
        return if now >= due {
            Step::DropOldCas
        } else {
            Step::Keep { until: due }
        };
    }
    // IP addresses in their canonical text, as they are read back from the certificate (a
    // name that never compares equal would renew at every pass).
    let wanted: Vec<String> = settings
        .dns_names()
        .into_iter()
        .map(|n| n.parse::<std::net::IpAddr>().map_or(n, |ip| ip.to_string()))
        .collect();
    if serving_expired || current.serving.names != wanted {
        return Step::RenewServing;
    }
    let ca_due = renew_at(signing);
    if now >= ca_due {
        return Step::AddCa;
    }
    let serving_due = renew_at(&current.serving);
    if now >= serving_due {
        return Step::RenewServing;
    }
    Step::Keep {
        until: ca_due.min(serving_due),
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    const DAY: Duration = Duration::from_hours(24);
    const HOUR: Duration = Duration::from_hours(1);

    /// Applies `step` as the leader would.
    fn apply(
        step: Step,
        current: Option<&Certificates>,
        s: &Settings,
        now: SystemTime,
    ) -> Certificates {
        let names = s.dns_names();
        let current = current.cloned();
        match (step, current) {
            (Step::Create, _) | (_, None) => {
                Certificates::create(now, s.ca_validity, s.serving_validity, &names).unwrap()
            }
            (Step::RenewServing | Step::SwitchServing, Some(c)) => {
                c.renew_serving(now, s.serving_validity, &names).unwrap()
            }
            (Step::AddCa, Some(c)) => c.add_ca(now, s.ca_validity).unwrap(),
            (Step::DropOldCas, Some(c)) => c.drop_old_cas(),
            (Step::Keep { .. }, Some(c)) => c,
        }
    }

    /// The defaults over two years, checked every hour: which steps happen when, and that at
    /// every moment the served certificate is valid and issued by a CA in the bundle, a
    /// client trusting the bundle of one overlap ago trusts it too, and the serving
    /// certificate of one overlap ago is trusted by the bundle of now.
    #[test]
    fn two_years_of_defaults_rotate_in_order_and_never_serve_an_untrusted_certificate() {
        let settings = Settings::new("hooks", "ops");
        let start = UNIX_EPOCH + Duration::from_secs(1_900_000_000);
        let mut now = start;
        let mut current: Option<Certificates> = None;
        let mut steps = Vec::new();
        // (time, bundle subjects, serving issuer) of each state.
        let mut history: Vec<(SystemTime, Vec<String>, String)> = Vec::new();
        while now < start + 730 * DAY {
            loop {
                let step = plan(current.as_ref(), &settings, now);
                if let Step::Keep { until } = step {
                    assert!(until > now, "keep until {until:?} is not after now");
                    break;
                }
                steps.push((now.duration_since(start).unwrap().as_secs() / 3600, step));
                current = Some(apply(step, current.as_ref(), &settings, now));
                assert!(steps.len() < 100, "{steps:?}");
            }
            let c = current.as_ref().unwrap();
            assert!(now < c.serving.not_after, "serving expired at {now:?}");
            let bundle: Vec<String> = c.cas.iter().map(|ca| ca.subject.clone()).collect();
            assert!(bundle.contains(&c.serving.issuer));
            for (at, old_bundle, old_issuer) in &history {
                if now.duration_since(*at).unwrap() <= settings.overlap {
                    assert!(
                        old_bundle.contains(&c.serving.issuer),
                        "a client with the bundle of {at:?} does not trust the certificate of {now:?}"
                    );
                    assert!(
                        bundle.contains(old_issuer),
                        "the bundle of {now:?} does not trust a replica still serving the certificate of {at:?}"
                    );
                }
            }
            history.retain(|(at, _, _)| now.duration_since(*at).unwrap() <= 2 * settings.overlap);
            history.push((now, bundle, c.serving.issuer.clone()));
            now += HOUR;
        }
        let kinds: Vec<Step> = steps.iter().map(|(_, s)| *s).collect();
        // Serving renewals at days 60, 120, 180, 240 (each 2/3 of 90 days after the last);
        // the CA at 243⅓ days: added, the serving certificate switched an hour later, the
        // old CA dropped an hour after that; then the same from the new CA.
        assert_eq!(kinds[0], Step::Create);
        let ca_rotations = kinds.iter().filter(|s| **s == Step::AddCa).count();
        assert_eq!(ca_rotations, 2, "{steps:?}");
        let at = |step: Step| {
            steps
                .iter()
                .find(|(_, s)| *s == step)
                .map(|(h, _)| *h)
                .unwrap()
        };
        assert_eq!(at(Step::RenewServing), 60 * 24);
        let added = at(Step::AddCa);
        assert_eq!(added, 243 * 24 + 8, "2/3 of 365 days, on the hour after");
        assert_eq!(at(Step::SwitchServing), added + 1);
        assert_eq!(at(Step::DropOldCas), added + 2);
    }

    #[test]
    fn an_expired_ca_is_replaced_and_an_expired_serving_certificate_renewed_at_once() {
        let settings = Settings::new("hooks", "ops");
        let start = UNIX_EPOCH + Duration::from_secs(1_900_000_000);
        let c = apply(Step::Create, None, &settings, start);
        assert_eq!(plan(Some(&c), &settings, start + 366 * DAY), Step::Create);
        assert_eq!(
            plan(Some(&c), &settings, start + 91 * DAY),
            Step::RenewServing
        );
        // Mid-rotation, an expired serving certificate does not wait for the overlap.
        let mid = c.add_ca(start + 89 * DAY, settings.ca_validity).unwrap();
        assert_eq!(
            plan(Some(&mid), &settings, start + 89 * DAY),
            Step::Keep {
                until: start + 89 * DAY + settings.overlap
            }
        );
        assert_eq!(
            plan(Some(&mid), &settings, start + 90 * DAY),
            Step::SwitchServing
        );
        // A name added to the settings re-issues the serving certificate at once, an IP
        // address too; once re-issued (an IPv6 address written long-hand included) nothing
        // more is due.
        for extra in ["hooks.example.com", "10.0.0.1", "0:0:0:0:0:0:0:1"] {
            let mut renamed = settings.clone();
            renamed.extra_names = vec![extra.to_owned()];
            assert_eq!(plan(Some(&c), &renamed, start + DAY), Step::RenewServing);
            let renewed = apply(Step::RenewServing, Some(&c), &renamed, start + DAY);
            assert!(
                matches!(
                    plan(Some(&renewed), &renamed, start + DAY),
                    Step::Keep { .. }
                ),
                "{extra}"
            );
        }
    }
}
