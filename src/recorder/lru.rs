//! A fixed-capacity least-recently-used map over an index-linked slab (the role of
//! k8s.io/utils `lru.Cache` in client-go's correlator): `get` and `insert` refresh an entry,
//! inserting past capacity evicts the least recently used one. No allocation once full.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

const NIL: u32 = u32::MAX;

#[derive(Debug)]
struct Node<K, V> {
    key: K,
    value: V,
    prev: u32,
    next: u32,
}

/// A least-recently-used map holding at most `capacity` entries.
#[derive(Debug)]
pub struct Lru<K, V, S = std::hash::RandomState> {
    map: HashMap<K, u32, S>,
    nodes: Vec<Node<K, V>>,
    head: u32,
    tail: u32,
    capacity: usize,
}

impl<K: Hash + Eq + Copy, V, S: BuildHasher + Default> Lru<K, V, S> {
    /// An empty cache of `capacity` entries (at least 1, at most `u32::MAX - 1`).
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, (NIL - 1) as usize);
        let prealloc = capacity.min(1 << 16);
        Self {
            map: HashMap::with_capacity_and_hasher(prealloc, S::default()),
            nodes: Vec::with_capacity(prealloc),
            head: NIL,
            tail: NIL,
            capacity,
        }
    }
}

impl<K: Hash + Eq + Copy, V, S: BuildHasher> Lru<K, V, S> {
    /// Number of entries.
    #[cfg(test)]
    #[must_use]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The value of `key`, marking it most recently used.
    #[cfg(test)]
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let idx = *self.map.get(key)?;
        self.move_to_front(idx);
        Some(&mut self.nodes[idx as usize].value)
    }

    /// The value of `key` without touching the recency order.
    #[cfg(test)]
    #[must_use]
    pub fn peek(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|&i| &self.nodes[i as usize].value)
    }

    /// Sets `key` to `value`, marking it most recently used; evicts the least recently used
    /// entry if the cache was full, returning it.
    pub fn insert(&mut self, key: K, value: V) -> Option<(K, V)> {
        if let Some(&idx) = self.map.get(&key) {
            self.nodes[idx as usize].value = value;
            self.move_to_front(idx);
            return None;
        }
        if self.nodes.len() < self.capacity {
            #[allow(clippy::cast_possible_truncation)] // Reason: capacity < u32::MAX.
            let idx = self.nodes.len() as u32;
            self.nodes.push(Node {
                key,
                value,
                prev: NIL,
                next: NIL,
            });
            self.map.insert(key, idx);
            self.push_front(idx);
            return None;
        }
        // Full: reuse the tail slot for the new entry.
        let idx = self.tail;
        self.unlink(idx);
        let node = &mut self.nodes[idx as usize];
        let old_key = std::mem::replace(&mut node.key, key);
        let old_value = std::mem::replace(&mut node.value, value);
        self.map.remove(&old_key);
        self.map.insert(key, idx);
        self.push_front(idx);
        Some((old_key, old_value))
    }

    /// The value of `key` (most recently used), inserting `make()` first if absent; returns
    /// the value and whether it was inserted.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> (&mut V, bool) {
        let inserted = if let Some(&idx) = self.map.get(&key) {
            self.move_to_front(idx);
            false
        } else {
            self.insert(key, make());
            true
        };
        let idx = self.head as usize;
        (&mut self.nodes[idx].value, inserted)
    }

    fn unlink(&mut self, idx: u32) {
        let (prev, next) = {
            let n = &self.nodes[idx as usize];
            (n.prev, n.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
    }

    fn push_front(&mut self, idx: u32) {
        let old_head = self.head;
        {
            let n = &mut self.nodes[idx as usize];
            n.prev = NIL;
            n.next = old_head;
        }
        if old_head == NIL {
            self.tail = idx;
        } else {
            self.nodes[old_head as usize].prev = idx;
        }
        self.head = idx;
    }

    fn move_to_front(&mut self, idx: u32) {
        if self.head != idx {
            self.unlink(idx);
            self.push_front(idx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type L = Lru<u32, &'static str>;

    #[test]
    fn inserting_past_capacity_evicts_the_least_recently_used() {
        let mut l = L::new(2);
        l.insert(1, "a");
        l.insert(2, "b");
        assert!(l.get_mut(&1).is_some());
        assert_eq!(l.insert(3, "c"), Some((2, "b")));
        assert_eq!(l.peek(&2), None);
        assert_eq!(l.peek(&1), Some(&"a"));
        assert_eq!(l.len(), 2);
    }

    #[test]
    fn reinserting_a_key_refreshes_it_without_evicting() {
        let mut l = L::new(2);
        l.insert(1, "a");
        l.insert(2, "b");
        assert_eq!(l.insert(1, "a2"), None);
        assert_eq!(l.insert(3, "c"), Some((2, "b")));
        assert_eq!(l.peek(&1), Some(&"a2"));
    }

    #[test]
    fn peek_does_not_refresh() {
        let mut l = L::new(2);
        l.insert(1, "a");
        l.insert(2, "b");
        let _ = l.peek(&1);
        assert_eq!(l.insert(3, "c"), Some((1, "a")));
    }

    #[test]
    fn get_or_insert_with_inserts_once() {
        let mut l = L::new(1);
        let (v, ins) = l.get_or_insert_with(7, || "x");
        assert!(ins);
        *v = "y";
        let (v, ins) = l.get_or_insert_with(7, || "z");
        assert!(!ins);
        assert_eq!(*v, "y");
        let (_, ins) = l.get_or_insert_with(8, || "w");
        assert!(ins);
        assert_eq!(l.peek(&7), None);
    }

    #[test]
    fn capacity_one_keeps_only_the_last() {
        let mut l = L::new(0);
        l.insert(1, "a");
        l.insert(2, "b");
        assert_eq!(l.len(), 1);
        assert_eq!(l.peek(&2), Some(&"b"));
    }
}
