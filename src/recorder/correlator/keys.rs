//! The correlator's keys: `Hash`-deriving structs over an event's fields (never joined
//! strings), stored in the caches as 128-bit fingerprints so no key allocates.
//!
//! client-go joins the fields with `""` (`getEventKey`, `EventAggregatorByReasonFunc`,
//! `getSpamKey` in `tools/record/events_cache.go`), so `("ab","c")` and `("a","bc")` collide
//! there; hashing each field with its terminator does not. Two fingerprints collide with
//! probability about 2⁻¹²⁸ per pair.

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};

use crate::recorder::event::{Event, EventType};
use crate::recorder::options::SpamKeyField;

/// Prefix of the message of an aggregate event.
///
/// client-go `tools/record/events_cache.go` `EventAggregatorByReasonMessageFunc`.
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// A 128-bit fingerprint of a key struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(u128);

const SEED_LO: u64 = 0x243f_6a88_85a3_08d3;
const SEED_HI: u64 = 0x1319_8a2e_0370_7344;

impl Fingerprint {
    /// The fingerprint of `key`: two independently seeded 64-bit hashes.
    #[must_use]
    pub fn of<T: Hash + ?Sized>(key: &T) -> Self {
        let lo = foldhash::quality::FixedState::with_seed(SEED_LO).hash_one(key);
        let hi = foldhash::quality::FixedState::with_seed(SEED_HI).hash_one(key);
        Fingerprint(u128::from(hi) << 64 | u128::from(lo))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// A `BuildHasher` for maps keyed by fingerprints: they are already uniformly distributed,
/// so the map uses their low bits unchanged.
#[derive(Clone, Copy, Debug, Default)]
pub struct FingerprintHasher(u64);

impl Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    #[allow(clippy::cast_possible_truncation)] // Reason: folding 128 bits into 64 on purpose.
    fn write_u128(&mut self, i: u128) {
        self.0 = (i as u64) ^ ((i >> 64) as u64);
    }
}

impl BuildHasher for FingerprintHasher {
    type Hasher = FingerprintHasher;
    fn build_hasher(&self) -> FingerprintHasher {
        FingerprintHasher(0)
    }
}

/// An event's message, possibly as the aggregate's `(combined from similar events): …`.
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    /// The message the event was recorded with.
    pub text: &'a str,
    /// Whether it is the message of an aggregate event.
    pub combined: bool,
}

impl fmt::Display for Message<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.combined {
            f.write_str(COMBINED_PREFIX)?;
        }
        f.write_str(self.text)
    }
}

/// An event as a correlator stage sees it: the recorded one, or the aggregate built from it
/// (whose message is prefixed and whose reporting controller and instance are empty, exactly
/// as client-go's `EventAggregate` builds it).
#[derive(Clone, Copy, Debug)]
pub struct EventView<'a> {
    /// The recorded event.
    pub event: &'a Event,
    /// Whether this is the aggregate event.
    pub combined: bool,
}

impl<'a> EventView<'a> {
    /// The message of this view.
    #[must_use]
    pub fn message(&self) -> Message<'a> {
        Message {
            text: &self.event.message,
            combined: self.combined,
        }
    }

    /// The reporting controller (empty for an aggregate).
    #[must_use]
    pub fn reporting_controller(&self) -> &'a str {
        if self.combined {
            ""
        } else {
            &self.event.reporting_controller
        }
    }

    /// The reporting instance (empty for an aggregate).
    #[must_use]
    pub fn reporting_instance(&self) -> &'a str {
        if self.combined {
            ""
        } else {
            &self.event.reporting_instance
        }
    }
}

/// Fingerprints of the parts of an event that several keys share, computed once per event
/// so each key hashes 16 bytes per part instead of the strings again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventHashes {
    source: Fingerprint,
    object: Fingerprint,
    message: Fingerprint,
}

impl EventHashes {
    /// The fingerprints of `e`'s source, involved object identity and message.
    #[must_use]
    pub fn of(e: &Event) -> Self {
        Self {
            source: Fingerprint::of(&(Domain::Source, &*e.source)),
            object: Fingerprint::of(&(Domain::Object, ObjectIdentity::of(e))),
            message: Fingerprint::of(&(Domain::Local, &*e.message)),
        }
    }

    /// `(combined, message)`: the aggregate's message is the prefix plus the message.
    fn message(&self, combined: bool) -> (bool, Fingerprint) {
        (combined, self.message)
    }
}

/// Identity of the involved object: kind, namespace, name, uid, apiVersion (no fieldPath).
#[derive(Hash)]
struct ObjectIdentity<'a> {
    kind: &'a str,
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
    api_version: &'a str,
}

impl<'a> ObjectIdentity<'a> {
    fn of(e: &'a Event) -> Self {
        let o = &*e.involved_object;
        Self {
            kind: &o.kind,
            namespace: &o.namespace,
            name: &o.name,
            uid: &o.uid,
            api_version: &o.api_version,
        }
    }
}

/// Which cache a key belongs to; hashed first so keys of different stages never meet.
#[derive(Hash)]
enum Domain {
    Source,
    Object,
    Count,
    Aggregate,
    Local,
    Spam,
}

/// client-go's `getEventKey`: every field of an event that identifies a repeat of it.
#[derive(Hash)]
struct CountKeyFields<'a> {
    domain: Domain,
    source: Fingerprint,
    object: Fingerprint,
    field_path: &'a str,
    event_type: EventType,
    reason: &'a str,
    message: (bool, Fingerprint),
}

/// The logger's (dedupe) key: all of an event's identifying fields including fieldPath
/// and message (client-go `getEventKey`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CountKey(pub Fingerprint);

impl CountKey {
    /// The count key of `view`, whose event has the fingerprints `h`.
    #[must_use]
    pub fn of(view: EventView<'_>, h: &EventHashes) -> Self {
        let e = view.event;
        CountKey(Fingerprint::of(&CountKeyFields {
            domain: Domain::Count,
            source: h.source,
            object: h.object,
            field_path: &e.involved_object.field_path,
            event_type: e.event_type,
            reason: &e.reason,
            message: h.message(view.combined),
        }))
    }
}

#[derive(Hash)]
struct AggregateKeyFields<'a> {
    domain: Domain,
    source: Fingerprint,
    object: Fingerprint,
    event_type: EventType,
    reason: &'a str,
    reporting_controller: &'a str,
    reporting_instance: &'a str,
}

/// The aggregator's key: source, object (no fieldPath), type, reason, reporting controller
/// and instance (client-go `EventAggregatorByReasonFunc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AggregateKey(pub Fingerprint);

impl AggregateKey {
    /// The aggregate key of a recorded event with the fingerprints `h`.
    #[must_use]
    pub fn of(e: &Event, h: &EventHashes) -> Self {
        AggregateKey(Fingerprint::of(&AggregateKeyFields {
            domain: Domain::Aggregate,
            source: h.source,
            object: h.object,
            event_type: e.event_type,
            reason: &e.reason,
            reporting_controller: &e.reporting_controller,
            reporting_instance: &e.reporting_instance,
        }))
    }
}

/// The aggregator's local key: the message (client-go `EventAggregatorByReasonFunc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalKey(pub Fingerprint);

impl LocalKey {
    /// The local key of a recorded event with the fingerprints `h`.
    #[must_use]
    pub fn of(h: &EventHashes) -> Self {
        LocalKey(h.message)
    }
}

#[derive(Hash)]
struct SpamKeyFields<'a> {
    domain: Domain,
    source: Option<Fingerprint>,
    object: Option<Fingerprint>,
    event_type: Option<EventType>,
    reason: Option<&'a str>,
    message: Option<(bool, Fingerprint)>,
}

/// The spam filter's key: the fields chosen by `spamKeyFields` (client-go ≥ v0.32
/// `getSpamKey`: source, involved object, type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpamKey(pub Fingerprint);

/// Which fields make up the spam key, as flags (built once from the options).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)] // Reason: one flag per `SpamKeyField`.
pub struct SpamKeySelection {
    source: bool,
    object: bool,
    event_type: bool,
    reason: bool,
    message: bool,
}

impl SpamKeySelection {
    /// The selection of `fields`.
    #[must_use]
    pub fn new(fields: &[SpamKeyField]) -> Self {
        let mut s = Self::default();
        for f in fields {
            match f {
                SpamKeyField::Source => s.source = true,
                SpamKeyField::InvolvedObject => s.object = true,
                SpamKeyField::Type => s.event_type = true,
                SpamKeyField::Reason => s.reason = true,
                SpamKeyField::Message => s.message = true,
            }
        }
        s
    }

    /// The spam key of `view`, whose event has the fingerprints `h`.
    #[must_use]
    pub fn key(self, view: EventView<'_>, h: &EventHashes) -> SpamKey {
        let e = view.event;
        SpamKey(Fingerprint::of(&SpamKeyFields {
            domain: Domain::Spam,
            source: self.source.then_some(h.source),
            object: self.object.then_some(h.object),
            event_type: self.event_type.then_some(e.event_type),
            reason: self.reason.then_some(&*e.reason),
            message: self.message.then(|| h.message(view.combined)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::recorder::clock::Time;
    use crate::recorder::event::{ObjectRef, Source};

    fn ev(name: &str, field_path: &str, reason: &str, message: &str) -> Event {
        let mut o = ObjectRef::new("v1", "Pod", "ns", name, "uid");
        o.field_path = field_path.into();
        Event::new(
            Arc::new(o),
            Arc::new(Source::new("kubelet", "node")),
            EventType::Normal,
            reason,
            message,
            Time::EPOCH,
        )
    }

    fn plain(e: &Event) -> EventView<'_> {
        EventView {
            event: e,
            combined: false,
        }
    }

    #[test]
    fn count_key_includes_field_path_but_aggregate_key_does_not() {
        let a = ev("p", "spec.containers{a}", "R", "m");
        let b = ev("p", "spec.containers{b}", "R", "m");
        let (ha, hb) = (EventHashes::of(&a), EventHashes::of(&b));
        assert_ne!(CountKey::of(plain(&a), &ha), CountKey::of(plain(&b), &hb));
        assert_eq!(AggregateKey::of(&a, &ha), AggregateKey::of(&b, &hb));
    }

    #[test]
    fn fields_do_not_run_into_each_other_as_joined_strings_do() {
        let a = ev("ab", "", "cR", "m");
        let b = ev("abc", "", "R", "m");
        let (ha, hb) = (EventHashes::of(&a), EventHashes::of(&b));
        assert_ne!(AggregateKey::of(&a, &ha), AggregateKey::of(&b, &hb));
    }

    #[test]
    fn default_spam_key_ignores_reason_and_message() {
        let sel = SpamKeySelection::new(&SpamKeyField::DEFAULT);
        let a = ev("p", "", "A", "m1");
        let b = ev("p", "x", "B", "m2");
        let (ha, hb) = (EventHashes::of(&a), EventHashes::of(&b));
        assert_eq!(sel.key(plain(&a), &ha), sel.key(plain(&b), &hb));
        let sel = SpamKeySelection::new(&[
            SpamKeyField::Source,
            SpamKeyField::InvolvedObject,
            SpamKeyField::Reason,
        ]);
        assert_ne!(sel.key(plain(&a), &ha), sel.key(plain(&b), &hb));
    }

    #[test]
    fn combined_message_is_prefixed_and_keyed_apart() {
        let a = ev("p", "", "R", "m");
        let c = EventView {
            event: &a,
            combined: true,
        };
        assert_eq!(c.message().to_string(), "(combined from similar events): m");
        let h = EventHashes::of(&a);
        assert_ne!(CountKey::of(c, &h), CountKey::of(plain(&a), &h));
    }
}
