//! The options of the `--webhook-*` flags of `informant run`: the manager's own webhook
//! endpoint.

use k8s_openapi::api::admissionregistration::v1::ServiceReference;

use super::super::webhook::WebhookOptions;
#[cfg(feature = "webhook-certificates")]
use crate::serving::managed::Settings;
use crate::serving::{InjectTargets, WebhookCertificates};

impl super::Args {
    /// The endpoint's options, `None` without --webhook-service; each bad flag in `problems`.
    pub(super) fn webhook_options(
        &self,
        fallback_namespace: Option<&str>,
        problems: &mut Vec<String>,
    ) -> Option<WebhookOptions> {
        let Some(service) = &self.webhook_service else {
            for (set, flag) in [
                (self.webhook_cert_dir.is_some(), "--webhook-cert-dir"),
                (self.webhook_cert_secret.is_some(), "--webhook-cert-secret"),
                (
                    self.webhook_configuration.is_some(),
                    "--webhook-configuration",
                ),
                (
                    self.webhook_inject_ca_from.is_some(),
                    "--webhook-inject-ca-from",
                ),
                (!self.webhook_inject.is_empty(), "--webhook-inject"),
                (self.webhook_client_ca.is_some(), "--webhook-client-ca"),
            ] {
                if set {
                    problems.push(format!(
                        "{flag} needs --webhook-service (without it there is no webhook endpoint)"
                    ));
                }
            }
            return None;
        };
        let before = problems.len();
        let namespace = self
            .webhook_service_namespace
            .clone()
            .or_else(super::super::pod_namespace)
            .or_else(|| fallback_namespace.map(str::to_owned))
            .unwrap_or_else(|| "default".to_owned());
        for (flag, name) in [
            ("--webhook-service", Some(service)),
            ("--webhook-service-namespace", Some(&namespace)),
            (
                "--webhook-configuration",
                self.webhook_configuration.as_ref(),
            ),
            ("--webhook-cert-secret", self.webhook_cert_secret.as_ref()),
        ] {
            if let Some(name) = name
                && let Some(why) = not_a_name(name)
            {
                problems.push(format!("invalid {flag}: {name:?} {why}"));
            }
        }
        self.limit_problems(problems);
        if !(1..=65535).contains(&self.webhook_service_port) {
            problems.push(format!(
                "invalid --webhook-service-port: {} is not a port (1 to 65535)",
                self.webhook_service_port
            ));
        }
        let addr = match super::super::parse_bind_address(&self.webhook_addr) {
            Ok(Some(addr)) => Some(addr),
            Ok(None) => {
                problems.push("invalid --webhook-addr: \"0\" cannot disable the webhook endpoint; leave out --webhook-service".to_owned());
                None
            }
            Err(e) => {
                problems.push(format!("invalid --webhook-addr: {e}"));
                None
            }
        };
        let certificates = self.certificates(service, &namespace, problems);
        let inject = self.inject(problems);
        if let Some(from) = &self.webhook_inject_ca_from {
            match from.split_once('/') {
                Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {}
                _ => problems.push(format!(
                    "invalid --webhook-inject-ca-from: {from:?} is not NAMESPACE/NAME"
                )),
            }
        }
        if problems.len() > before {
            return None;
        }
        Some(WebhookOptions {
            addr: addr?,
            certificates,
            service: ServiceReference {
                namespace,
                name: service.clone(),
                path: None,
                port: Some(self.webhook_service_port),
            },
            configuration: self
                .webhook_configuration
                .clone()
                .unwrap_or_else(|| service.clone()),
            inject_ca_from: self.webhook_inject_ca_from.clone(),
            inject,
            max_admission_bytes: self.webhook_max_admission_bytes,
            max_conversion_bytes: self.webhook_max_conversion_bytes,
            max_in_flight: self.webhook_max_in_flight,
            connections: crate::serving::ConnectionLimits {
                max_connections: self.webhook_max_connections,
                header_read_timeout: self.webhook_header_read_timeout,
            },
            client_ca: self.webhook_client_ca.clone(),
        })
    }

    /// The problems of the endpoint's limits: none may be 0.
    fn limit_problems(&self, problems: &mut Vec<String>) {
        for (flag, bytes) in [
            (
                "--webhook-max-admission-bytes",
                self.webhook_max_admission_bytes,
            ),
            (
                "--webhook-max-conversion-bytes",
                self.webhook_max_conversion_bytes,
            ),
            ("--webhook-max-in-flight", self.webhook_max_in_flight),
            ("--webhook-max-connections", self.webhook_max_connections),
        ] {
            if bytes == 0 {
                problems.push(format!("invalid {flag}: 0 would refuse every review"));
            }
        }
        if self.webhook_header_read_timeout.is_zero() {
            problems.push(
                "invalid --webhook-header-read-timeout: 0 would close every connection".to_owned(),
            );
        }
    }

    /// The certificate: mounted with --webhook-cert-dir, else managed.
    fn certificates(
        &self,
        service: &str,
        namespace: &str,
        problems: &mut Vec<String>,
    ) -> WebhookCertificates {
        if let Some(dir) = &self.webhook_cert_dir {
            if self.webhook_cert_secret.is_some() {
                problems.push("--webhook-cert-secret names the managed certificates' Secret; with --webhook-cert-dir the certificate is mounted: give one of them".to_owned());
            }
            if !self.webhook_inject.is_empty() {
                problems.push("--webhook-inject writes the managed CA bundle; with --webhook-cert-dir cert-manager's cainjector writes it (--webhook-inject-ca-from)".to_owned());
            }
            return WebhookCertificates::Mounted {
                dir: dir.clone(),
                cert_name: self.webhook_cert_name.clone(),
                key_name: self.webhook_cert_key.clone(),
            };
        }
        if self.webhook_inject_ca_from.is_some() {
            problems.push("--webhook-inject-ca-from is for a mounted cert-manager certificate (--webhook-cert-dir); managed certificates are injected by the manager".to_owned());
        }
        self.managed(service, namespace, problems)
    }

    /// Managed certificates in the Secret of --webhook-cert-secret (`<service>-cert`).
    #[cfg(feature = "webhook-certificates")]
    fn managed(
        &self,
        service: &str,
        namespace: &str,
        _problems: &mut Vec<String>,
    ) -> WebhookCertificates {
        let mut settings = Settings::new(service, namespace);
        if let Some(secret) = &self.webhook_cert_secret {
            settings.secret.clone_from(secret);
        }
        WebhookCertificates::Managed(settings)
    }

    /// Without the `webhook-certificates` feature the manager makes no certificate: the
    /// problem says so, and the mounted directory of controller-runtime's webhook server
    /// (`<temp-dir>/k8s-webhook-server/serving-certs`) stands in so the other flags are checked too.
    #[cfg(not(feature = "webhook-certificates"))]
    #[allow(
        clippy::unused_self,
        reason = "the signature of the feature's version, which reads --webhook-cert-secret"
    )]
    fn managed(
        &self,
        _service: &str,
        _namespace: &str,
        problems: &mut Vec<String>,
    ) -> WebhookCertificates {
        problems.push("--webhook-service without --webhook-cert-dir asks for certificates the manager makes, which this build leaves out (informant's `webhook-certificates` feature): mount a certificate and give --webhook-cert-dir, or build with the feature".to_owned());
        // controller-runtime's `pkg/webhook/server.go`: `CertDir` defaults to
        // `<temp-dir>/k8s-webhook-server/serving-certs`.
        WebhookCertificates::mounted(std::env::temp_dir().join("k8s-webhook-server/serving-certs"))
    }

    /// The objects of --webhook-inject.
    fn inject(&self, problems: &mut Vec<String>) -> InjectTargets {
        let mut targets = InjectTargets::default();
        for text in &self.webhook_inject {
            let list = match text.split_once('/') {
                Some(("validatingwebhookconfiguration", _)) => &mut targets.validating,
                Some(("mutatingwebhookconfiguration", _)) => &mut targets.mutating,
                Some(("customresourcedefinition", _)) => &mut targets.crds,
                _ => {
                    problems.push(format!(
                        "invalid --webhook-inject: {text:?} is not KIND/NAME with KIND validatingwebhookconfiguration, mutatingwebhookconfiguration or customresourcedefinition"
                    ));
                    continue;
                }
            };
            let name = text.split_once('/').map_or("", |(_, name)| name);
            if let Some(why) = not_a_name(name) {
                problems.push(format!("invalid --webhook-inject: {name:?} {why}"));
                continue;
            }
            list.push(name.to_owned());
        }
        targets
    }
}

/// Why `name` is not an object name (a DNS-1123 subdomain), or `None`.
fn not_a_name(name: &str) -> Option<&'static str> {
    let label_ok = |label: &str| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        return Some("is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')");
    }
    None
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::serving::WebhookCertificates;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        manager: super::super::Args,
    }

    fn options(extra: &[&str]) -> Result<crate::manager::Options, super::super::ArgsError> {
        let mut argv = vec![
            "op",
            "--config",
            "cacheconfig.yaml",
            "--webhook-service",
            "hooks",
        ];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).unwrap().manager.options()
    }

    #[test]
    fn a_mounted_certificate_needs_no_feature() {
        let options = options(&["--webhook-cert-dir", "/certs"]).unwrap();
        let webhook = options.webhook.unwrap();
        assert_eq!(webhook.certificates, WebhookCertificates::mounted("/certs"));
        assert_eq!(webhook.service.port, Some(443));
    }

    /// Without --webhook-cert-dir the manager makes the certificates, or says that this build
    /// cannot, naming the feature (and keeps checking the other flags).
    #[test]
    fn certificates_the_manager_makes_need_the_feature() {
        let made = options(&[]);
        #[cfg(feature = "webhook-certificates")]
        assert!(
            made.unwrap()
                .webhook
                .unwrap()
                .certificates
                .injects_ca_bundle()
        );
        #[cfg(not(feature = "webhook-certificates"))]
        {
            let problems = made.unwrap_err().problems;
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(
                problems[0].contains("`webhook-certificates` feature")
                    && problems[0].contains("--webhook-cert-dir"),
                "{problems:?}"
            );
            let both = options(&["--webhook-inject-ca-from", "ns/c"]).unwrap_err();
            assert_eq!(both.problems.len(), 2, "{:?}", both.problems);
        }
    }
}
