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
    #[must_use]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The most entries the cache holds.
    #[cfg(test)]
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Removes every entry, keeping the capacity.
    pub fn clear(&mut self) {
        self.map.clear();
        self.nodes.clear();
        self.head = NIL;
        self.tail = NIL;
    }

    /// Every value, in no particular order, without touching the recency order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.nodes.iter_mut().map(|n| &mut n.value)
    }

    /// Sets the capacity (at least 1, at most `u32::MAX - 1`), evicting the least recently
    /// used entries that no longer fit; the others keep their order.
    pub fn set_capacity(&mut self, capacity: usize) {
        let capacity = capacity.clamp(1, (NIL - 1) as usize);
        while self.nodes.len() > capacity {
            self.remove_lru();
        }
        self.capacity = capacity;
    }

    /// Removes the least recently used entry, moving the last slab slot into its place.
    fn remove_lru(&mut self) {
        let idx = self.tail;
        if idx == NIL {
            return;
        }
        self.unlink(idx);
        let node = self.nodes.swap_remove(idx as usize);
        self.map.remove(&node.key);
        if (idx as usize) < self.nodes.len() {
            // The node that was last in the slab now sits at `idx`: relink it there.
            let (prev, next, key) = {
                let n = &self.nodes[idx as usize];
                (n.prev, n.next, n.key)
            };
            if prev == NIL {
                self.head = idx;
            } else {
                self.nodes[prev as usize].next = idx;
            }
            if next == NIL {
                self.tail = idx;
            } else {
                self.nodes[next as usize].prev = idx;
            }
            self.map.insert(key, idx);
        }
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

    #[test]
    fn shrinking_evicts_the_least_recently_used_and_keeps_the_order_of_the_rest() {
        let mut l = L::new(5);
        for k in 1..=5 {
            l.insert(k, "v");
        }
        assert!(l.get_mut(&1).is_some()); // order, most recent first: 1 5 4 3 2
        l.set_capacity(3);
        assert_eq!((l.len(), l.capacity()), (3, 3));
        assert_eq!(l.peek(&2), None);
        assert_eq!(l.peek(&3), None);
        // The survivors are still linked in order: inserting evicts 4, then 5, then 1.
        assert_eq!(l.insert(6, "v"), Some((4, "v")));
        assert_eq!(l.insert(7, "v"), Some((5, "v")));
        assert_eq!(l.insert(8, "v"), Some((1, "v")));
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn growing_keeps_every_entry_and_room_for_more() {
        let mut l = L::new(2);
        l.insert(1, "a");
        l.insert(2, "b");
        l.set_capacity(3);
        assert_eq!(l.insert(3, "c"), None);
        assert_eq!(l.insert(4, "d"), Some((1, "a")));
    }

    #[test]
    fn clear_empties_and_values_mut_reaches_every_value() {
        let mut l = Lru::<u32, u32>::new(3);
        for k in 0..3 {
            l.insert(k, k);
        }
        for v in l.values_mut() {
            *v += 10;
        }
        assert_eq!(l.peek(&2), Some(&12));
        l.clear();
        assert_eq!(l.len(), 0);
        l.insert(9, 9);
        assert_eq!(l.peek(&9), Some(&9));
    }
}
