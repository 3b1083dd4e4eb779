//! The managed [`Certificates`]: read from and written to the Secret's keys, and made with
//! rcgen (ECDSA P-256, as the rest of informant's certificates).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use tokio_rustls::rustls::sign::CertifiedKey;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;

use super::{CA_BUNDLE_KEY, CA_KEY_KEY, CLOCK_SKEW};
use crate::serving::cert::{self, DEFAULT_CERT_NAME, DEFAULT_KEY_NAME};
use crate::serving::error::{Error, Result};

/// One certificate as the rotation reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Parsed {
    /// Its PEM.
    pub(super) pem: String,
    /// Its subject, as text (the CAs' are unique: they carry their making time).
    pub(super) subject: String,
    /// Its issuer, as text.
    pub(super) issuer: String,
    /// When it was made: its start of validity plus [`CLOCK_SKEW`].
    pub(super) issued: SystemTime,
    /// Its end of validity.
    pub(super) not_after: SystemTime,
    /// Its subject alternative names (DNS names, and IP addresses in their canonical text),
    /// in order.
    pub(super) names: Vec<String>,
}

/// The CA bundle and the serving pair kept in the Secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Certificates {
    /// The trusted CAs, oldest first; the last signs.
    pub(super) cas: Vec<Parsed>,
    /// The signing CA's key (PEM).
    pub(super) ca_key: String,
    /// The serving certificate.
    pub(super) serving: Parsed,
    /// Its key (PEM).
    pub(super) serving_key: String,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates")
            .field(
                "cas",
                &self.cas.iter().map(|c| &c.subject).collect::<Vec<_>>(),
            )
            .field("serving.issuer", &self.serving.issuer)
            .finish_non_exhaustive()
    }
}

impl Certificates {
    /// The CA bundle: every trusted CA's PEM, oldest first (what `caBundle` holds).
    #[must_use]
    pub fn bundle_pem(&self) -> String {
        self.cas.iter().map(|c| c.pem.as_str()).collect()
    }

    /// How many CAs the bundle holds: 1, or 2 during a CA rotation.
    #[must_use]
    pub fn ca_count(&self) -> usize {
        self.cas.len()
    }

    /// The serving certificate (PEM).
    #[must_use]
    pub fn serving_pem(&self) -> &str {
        &self.serving.pem
    }

    /// Whether the serving certificate is signed by the newest CA (false between
    /// [`Step::AddCa`](super::Step::AddCa) and [`Step::SwitchServing`](super::Step::SwitchServing)).
    #[must_use]
    pub fn serving_from_newest_ca(&self) -> bool {
        self.cas
            .last()
            .is_some_and(|ca| ca.subject == self.serving.issuer)
    }

    /// The serving pair, ready for rustls.
    ///
    /// # Errors
    ///
    /// What [`cert::from_pem`] says, naming the Secret's keys.
    pub fn certified_key(&self) -> Result<Arc<CertifiedKey>> {
        cert::from_pem(
            self.serving.pem.as_bytes(),
            self.serving_key.as_bytes(),
            Path::new(DEFAULT_CERT_NAME),
            Path::new(DEFAULT_KEY_NAME),
        )
    }

    /// The Secret's data.
    pub(super) fn to_data(&self) -> BTreeMap<String, ByteString> {
        let entry =
            |key: &str, value: &str| (key.to_owned(), ByteString(value.as_bytes().to_vec()));
        BTreeMap::from([
            entry(DEFAULT_CERT_NAME, &self.serving.pem),
            entry(DEFAULT_KEY_NAME, &self.serving_key),
            entry(CA_BUNDLE_KEY, &self.bundle_pem()),
            entry(CA_KEY_KEY, &self.ca_key),
        ])
    }

    /// Reads the Secret `secret`'s data.
    ///
    /// # Errors
    ///
    /// [`Error::SecretContents`] naming the key that is missing or does not parse.
    pub(super) fn from_data(secret: &str, data: &BTreeMap<String, ByteString>) -> Result<Self> {
        let bad = |key: &str, reason: String| Error::SecretContents {
            secret: secret.to_owned(),
            key: key.to_owned(),
            reason,
        };
        let text = |key: &str| -> Result<String> {
            let bytes = data
                .get(key)
                .ok_or_else(|| bad(key, "missing".to_owned()))?;
            String::from_utf8(bytes.0.clone()).map_err(|_| bad(key, "not UTF-8 PEM".to_owned()))
        };
        let bundle = text(CA_BUNDLE_KEY)?;
        let cas = parse_all(&bundle).map_err(|reason| bad(CA_BUNDLE_KEY, reason))?;
        let Some(signing) = cas.last() else {
            return Err(bad(CA_BUNDLE_KEY, "holds no certificate".to_owned()));
        };
        let ca_key = text(CA_KEY_KEY)?;
        let key = KeyPair::from_pem(&ca_key).map_err(|e| bad(CA_KEY_KEY, e.to_string()))?;
        if key.public_key_raw() != public_key(&signing.pem).as_slice() {
            return Err(bad(
                CA_KEY_KEY,
                "is not the key of the last CA in ca.crt".to_owned(),
            ));
        }
        let serving_pem = text(DEFAULT_CERT_NAME)?;
        let serving = parse_all(&serving_pem)
            .map_err(|reason| bad(DEFAULT_CERT_NAME, reason))?
            .into_iter()
            .next()
            .ok_or_else(|| bad(DEFAULT_CERT_NAME, "holds no certificate".to_owned()))?;
        let certificates = Self {
            cas,
            ca_key,
            serving,
            serving_key: text(DEFAULT_KEY_NAME)?,
        };
        certificates
            .certified_key()
            .map_err(|e| bad(DEFAULT_KEY_NAME, e.to_string()))?;
        Ok(certificates)
    }

    /// A new CA and a serving certificate it signs.
    pub(super) fn create(
        now: SystemTime,
        ca_validity: Duration,
        serving_validity: Duration,
        names: &[String],
    ) -> Result<Self> {
        let (ca, ca_key) = new_ca(now, ca_validity)?;
        let (serving, serving_key) = issue(now, serving_validity, &ca, &ca_key, names)?;
        Ok(Self {
            cas: vec![ca],
            ca_key,
            serving,
            serving_key,
        })
    }

    /// These certificates with a new serving certificate from the signing CA.
    pub(super) fn renew_serving(
        &self,
        now: SystemTime,
        validity: Duration,
        names: &[String],
    ) -> Result<Self> {
        let Some(signing) = self.cas.last() else {
            return Self::create(now, validity, validity, names);
        };
        let (serving, serving_key) = issue(now, validity, signing, &self.ca_key, names)?;
        Ok(Self {
            serving,
            serving_key,
            ..self.clone()
        })
    }

    /// These certificates with a new CA at the end of the bundle (it signs from now on).
    pub(super) fn add_ca(&self, now: SystemTime, validity: Duration) -> Result<Self> {
        let (ca, ca_key) = new_ca(now, validity)?;
        let mut cas = self.cas.clone();
        cas.push(ca);
        Ok(Self {
            cas,
            ca_key,
            ..self.clone()
        })
    }

    /// These certificates with only the signing CA in the bundle.
    pub(super) fn drop_old_cas(&self) -> Self {
        Self {
            cas: self.cas.last().cloned().into_iter().collect(),
            ..self.clone()
        }
    }
}

/// Every certificate of a PEM text, or why one does not parse.
fn parse_all(pem: &str) -> std::result::Result<Vec<Parsed>, String> {
    let mut out = Vec::new();
    for block in Pem::iter_from_buffer(pem.as_bytes()) {
        let block = block.map_err(|e| e.to_string())?;
        let cert = block.parse_x509().map_err(|e| e.to_string())?;
        let time = |t: x509_parser::time::ASN1Time| {
            u64::try_from(t.timestamp())
                .ok()
                .map(|secs| UNIX_EPOCH + Duration::from_secs(secs))
                .ok_or_else(|| "a validity date before 1970".to_owned())
        };
        let validity = cert.validity();
        let names = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .filter_map(|name| match name {
                        GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                        GeneralName::IPAddress(ip) => ip_text(ip),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.push(Parsed {
            pem: pem_text(&block.contents),
            subject: cert.subject().to_string(),
            issuer: cert.issuer().to_string(),
            issued: time(validity.not_before)? + CLOCK_SKEW,
            not_after: time(validity.not_after)?,
            names,
        });
    }
    Ok(out)
}

/// The canonical text of an IP address in a certificate (4 or 16 bytes).
fn ip_text(bytes: &[u8]) -> Option<String> {
    let ip = match bytes.len() {
        4 => std::net::IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?),
        16 => std::net::IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?),
        _ => return None,
    };
    Some(ip.to_string())
}

/// The PEM text of one DER certificate.
fn pem_text(der: &[u8]) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in encoded.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// The raw public key (the subject public key's bits) of a PEM certificate, empty when it
/// does not parse.
fn public_key(pem: &str) -> Vec<u8> {
    Pem::iter_from_buffer(pem.as_bytes())
        .next()
        .and_then(std::result::Result::ok)
        .and_then(|block| {
            block
                .parse_x509()
                .ok()
                .map(|c| c.public_key().subject_public_key.data.to_vec())
        })
        .unwrap_or_default()
}

/// `params` valid from [`CLOCK_SKEW`] before `now` for `validity`, ending no later than
/// `cap`.
fn dated(
    mut params: CertificateParams,
    now: SystemTime,
    validity: Duration,
    cap: Option<SystemTime>,
) -> Result<CertificateParams> {
    let start = now.checked_sub(CLOCK_SKEW).unwrap_or(now);
    let mut end = now.checked_add(validity).ok_or(Error::Clock)?;
    if let Some(cap) = cap {
        end = end.min(cap);
    }
    params.not_before = time::OffsetDateTime::from(start);
    params.not_after = time::OffsetDateTime::from(end);
    Ok(params)
}

fn parsed(der: &[u8]) -> Result<Parsed> {
    parse_all(&pem_text(der))
        .ok()
        .and_then(|mut all| all.pop())
        .ok_or(Error::Clock)
}

/// A new CA, named after the moment it is made so each CA's subject is its own.
fn new_ca(now: SystemTime, validity: Duration) -> Result<(Parsed, String)> {
    let made = now.duration_since(UNIX_EPOCH).map_err(|_| Error::Clock)?;
    let mut params = CertificateParams::default();
    let mut subject = DistinguishedName::new();
    subject.push(DnType::OrganizationName, "informant");
    subject.push(
        DnType::CommonName,
        format!(
            "informant webhook CA {}.{:09}",
            made.as_secs(),
            made.subsec_nanos()
        ),
    );
    params.distinguished_name = subject;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let params = dated(params, now, validity, None)?;
    let key = KeyPair::generate().map_err(Error::Generate)?;
    let cert = params.self_signed(&key).map_err(Error::Generate)?;
    Ok((parsed(cert.der())?, key.serialize_pem()))
}

/// A serving certificate for `names` signed by `ca`, ending no later than it.
fn issue(
    now: SystemTime,
    validity: Duration,
    ca: &Parsed,
    ca_key: &str,
    names: &[String],
) -> Result<(Parsed, String)> {
    let ca_key = KeyPair::from_pem(ca_key).map_err(Error::Generate)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.pem, ca_key).map_err(Error::Generate)?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(Error::Generate)?;
    let mut subject = DistinguishedName::new();
    subject.push(
        DnType::CommonName,
        names.first().map_or("informant-webhook", String::as_str),
    );
    params.distinguished_name = subject;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let params = dated(params, now, validity, Some(ca.not_after))?;
    let key = KeyPair::generate().map_err(Error::Generate)?;
    let cert = params.signed_by(&key, &issuer).map_err(Error::Generate)?;
    Ok((parsed(cert.der())?, key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["hooks.ops.svc".to_owned(), "127.0.0.1".to_owned()]
    }

    #[test]
    fn created_certificates_survive_the_secret_and_carry_their_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(1_900_000_000);
        let day = Duration::from_hours(24);
        let created = Certificates::create(now, 365 * day, 90 * day, &names()).unwrap();
        assert_eq!(created.cas[0].issued, now);
        assert_eq!(created.cas[0].not_after, now + 365 * day);
        assert_eq!(created.serving.not_after, now + 90 * day);
        assert!(created.serving_from_newest_ca());
        let read = Certificates::from_data("s", &created.to_data()).unwrap();
        assert_eq!(read, created);

        // A serving certificate never outlives its CA.
        let late = created
            .renew_serving(now + 300 * day, 90 * day, &names())
            .unwrap();
        assert_eq!(late.serving.not_after, now + 365 * day);

        let rotated = created.add_ca(now + day, 365 * day).unwrap();
        assert_eq!(rotated.ca_count(), 2);
        assert!(!rotated.serving_from_newest_ca());
        assert_eq!(
            Certificates::from_data("s", &rotated.to_data()).unwrap(),
            rotated
        );
        let switched = rotated
            .renew_serving(now + day, 90 * day, &names())
            .unwrap();
        assert!(switched.serving_from_newest_ca());
        assert_eq!(switched.drop_old_cas().ca_count(), 1);
    }

    #[test]
    fn a_garbled_or_mismatched_secret_names_its_key() {
        let now = UNIX_EPOCH + Duration::from_secs(1_900_000_000);
        let day = Duration::from_hours(24);
        let one = Certificates::create(now, 365 * day, 90 * day, &names()).unwrap();
        let other = Certificates::create(now, 365 * day, 90 * day, &names()).unwrap();
        let mut data = one.to_data();
        data.remove(CA_KEY_KEY);
        let missing = Certificates::from_data("s", &data).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "the Secret s's ca.key is unusable: missing"
        );
        data.insert(CA_KEY_KEY.to_owned(), ByteString(other.ca_key.into_bytes()));
        let wrong = Certificates::from_data("s", &data).unwrap_err();
        assert_eq!(
            wrong.to_string(),
            "the Secret s's ca.key is unusable: is not the key of the last CA in ca.crt"
        );
        let mut data = one.to_data();
        data.insert(CA_BUNDLE_KEY.to_owned(), ByteString(b"garbage".to_vec()));
        let garbled = Certificates::from_data("s", &data).unwrap_err();
        assert_eq!(
            garbled.to_string(),
            "the Secret s's ca.crt is unusable: holds no certificate"
        );
    }
}
