//! Unique Event names. client-go names an Event `<object name>.<Unix nanoseconds in hex>`
//! (`tools/record/event.go`, `makeEvent`), so two events about one object stamped in the same
//! instant — a virtual clock, a coarse system clock — share a name, and the server refuses the
//! second create with 409 `AlreadyExists`: the event is lost. informant keeps the form and
//! bumps the nanoseconds of a repeated name until it is new.
//!
//! Names are tracked in a fixed table of [`NAME_SLOTS`] slots, indexed by a hash of the
//! Event's namespace and object name; each slot holds the largest nanoseconds it handed
//! out, and a name at or below it gets that value plus one. A name therefore never repeats
//! (within one process), whatever the number of objects: two objects that share a slot only
//! cost one of them a suffix a few nanoseconds off its timestamp when their events come out
//! of order or in the same instant. The table is 32 KiB and never grows.

use std::hash::BuildHasher;

use crate::recorder::clock::Time;
use crate::recorder::event::EventName;

/// Slots of the name table (a power of two); the same as client-go's LRU size, 4096
/// (`tools/record/events_cache.go` `maxLruCacheEntries`), so spurious bumps between objects
/// are rare at that many objects.
pub const NAME_SLOTS: usize = 4096;

const SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// How the correlator names new Events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EventNaming {
    /// `<object name>.<nanoseconds in hex>`, bumped so that no two Events of one namespace
    /// and object name share a name (informant's default).
    #[default]
    Unique,
    /// Exactly client-go's name, duplicates included (what the reference scenarios show;
    /// `informant simulate` uses it).
    ClientGo,
}

/// Hands out Event names (see the module documentation).
#[derive(Debug)]
pub struct Names {
    /// The largest nanoseconds handed out per slot; `None` for [`EventNaming::ClientGo`].
    issued: Option<Box<[i64]>>,
}

impl Names {
    /// A namer following `naming`.
    #[must_use]
    pub fn new(naming: EventNaming) -> Self {
        Self {
            issued: match naming {
                EventNaming::Unique => Some(vec![i64::MIN; NAME_SLOTS].into_boxed_slice()),
                EventNaming::ClientGo => None,
            },
        }
    }

    /// The name to create the Event `name` in `namespace` with: `name` itself, unless a name
    /// at or after its instant was already handed out for its slot.
    pub fn claim(&mut self, namespace: &str, name: EventName) -> EventName {
        let Some(issued) = self.issued.as_mut() else {
            return name;
        };
        let hash =
            foldhash::fast::FixedState::with_seed(SEED).hash_one((namespace, name.object_name()));
        #[allow(clippy::cast_possible_truncation)] // Reason: only the low bits pick the slot.
        let slot = &mut issued[hash as usize & (NAME_SLOTS - 1)];
        let wanted = name.time().unix_nanos();
        if wanted > *slot {
            *slot = wanted;
            return name;
        }
        *slot = slot.saturating_add(1);
        name.at(Time::from_unix_nanos(*slot))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn name(object: &str, nanos: i64) -> EventName {
        EventName::new(Arc::from(object), Time::from_unix_nanos(nanos))
    }

    #[test]
    fn a_repeated_name_gets_the_next_nanosecond() {
        let mut n = Names::new(EventNaming::Unique);
        let t = 1_700_000_000_000_000_000;
        assert_eq!(n.claim("ns", name("web", t)), name("web", t));
        assert_eq!(n.claim("ns", name("web", t)), name("web", t + 1));
        assert_eq!(n.claim("ns", name("web", t)), name("web", t + 2));
        // The next real instant is taken too, so it moves on as well.
        assert_eq!(n.claim("ns", name("web", t + 1)), name("web", t + 3));
        assert_eq!(n.claim("ns", name("web", t + 10)), name("web", t + 10));
        assert_eq!(
            n.claim("ns", name("web", t)).to_string(),
            "web.17979cfe362a000b"
        );
    }

    #[test]
    fn other_objects_and_namespaces_keep_their_own_names() {
        let mut n = Names::new(EventNaming::Unique);
        assert_eq!(n.claim("ns", name("web", 5)), name("web", 5));
        assert_eq!(n.claim("other", name("web", 5)), name("web", 5));
        assert_eq!(n.claim("ns", name("db", 5)), name("db", 5));
    }

    #[test]
    fn client_go_naming_repeats_names() {
        let mut n = Names::new(EventNaming::ClientGo);
        assert_eq!(n.claim("ns", name("web", 5)), name("web", 5));
        assert_eq!(n.claim("ns", name("web", 5)), name("web", 5));
    }

    #[test]
    fn names_never_repeat_across_many_objects_and_instants() {
        let mut n = Names::new(EventNaming::Unique);
        let mut seen = std::collections::HashSet::new();
        // 20,000 objects (five per slot on average), three events each, all in two instants
        // and out of order: every name handed out is new.
        for round in [7, 3, 7] {
            for o in 0..20_000 {
                let object = format!("pod-{o}");
                let got = n.claim("ns", name(&object, round)).to_string();
                assert!(seen.insert(got), "repeated name for {object}");
            }
        }
    }
}
