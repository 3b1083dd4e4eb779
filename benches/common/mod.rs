//! What several benches share (`#[path = "common/mod.rs"] mod common;`): a deterministic PRNG,
//! so every run replays the same mix, and the Pods their events are about.

use std::sync::Arc;

use informant::recorder::ObjectRef;

/// xorshift64*: deterministic, so every run of a bench replays the same sequence.
pub struct Rng(pub u64);

impl Rng {
    #[allow(dead_code, reason = "not every bench draws raw numbers")]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    #[allow(dead_code, reason = "not every bench draws")]
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `n` Pods `ns/<prefix>-<i>` with uid `uid-<prefix>-<i>`.
#[allow(dead_code, reason = "not every bench records events")]
pub fn pods(prefix: &str, n: usize) -> Vec<Arc<ObjectRef>> {
    (0..n)
        .map(|i| {
            let name = format!("{prefix}-{i}");
            Arc::new(ObjectRef::new(
                "v1",
                "Pod",
                "ns",
                &name,
                &format!("uid-{name}"),
            ))
        })
        .collect()
}
