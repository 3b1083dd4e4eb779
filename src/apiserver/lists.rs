//! The LIST answers the server gave, most recent last: which collection, under which shard
//! selector, which page, how many objects and bytes. Tests read it to see what each client was
//! sent (a sharded member's LIST holds its share only), benches to count LIST bytes.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use serde::Serialize;

/// How many answers are kept: the oldest go first.
pub const KEPT: usize = 10_000;

/// One LIST answer (one page of a paginated list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListAnswer {
    /// API group ("" for core).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// The namespace the list was limited to, if any.
    pub namespace: Option<String>,
    /// The `shardSelector` the answer applied (echoed in `metadata.shardInfo`); `None` when
    /// the request sent none, or the `ShardedListAndWatch` gate is off and it was ignored.
    pub shard_selector: Option<String>,
    /// The request's `labelSelector` and `fieldSelector`, if any.
    pub label_selector: Option<String>,
    /// See [`ListAnswer::label_selector`].
    pub field_selector: Option<String>,
    /// The `continue` token the request carried (`None`: the first page of a list), which is
    /// the [`next`](Self::next) of the page before: the pages of one list form a chain.
    pub continued: Option<String>,
    /// The `continue` token the answer carried (`None`: the last page of its list).
    pub next: Option<String>,
    /// The resource version the answer is a snapshot of (a later page of a list: the first
    /// page's).
    pub resource_version: u64,
    /// Objects in the answer.
    pub items: usize,
    /// Bytes of the answer's body.
    pub bytes: usize,
}

impl ListAnswer {
    /// Whether this is the first page of its list.
    #[must_use]
    pub fn first_page(&self) -> bool {
        self.continued.is_none()
    }

    /// Whether this is the last page of its list.
    #[must_use]
    pub fn last_page(&self) -> bool {
        self.next.is_none()
    }
}

/// The last [`KEPT`] LIST answers.
#[derive(Debug, Default)]
pub struct ListLog {
    answers: Mutex<VecDeque<ListAnswer>>,
}

impl ListLog {
    /// Notes `answer`.
    pub fn record(&self, answer: ListAnswer) {
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        if answers.len() == KEPT {
            answers.pop_front();
        }
        answers.push_back(answer);
    }

    /// The answers kept, oldest first.
    pub fn snapshot(&self) -> Vec<ListAnswer> {
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_the_most_recent_answers() {
        let log = ListLog::default();
        for items in 0..=KEPT {
            log.record(ListAnswer {
                group: String::new(),
                resource: "configmaps".into(),
                namespace: None,
                shard_selector: None,
                label_selector: None,
                field_selector: None,
                continued: None,
                next: None,
                resource_version: 0,
                items,
                bytes: 0,
            });
        }
        let kept = log.snapshot();
        assert_eq!(kept.len(), KEPT);
        assert_eq!(kept.first().map(|a| a.items), Some(1));
        assert_eq!(kept.last().map(|a| a.items), Some(KEPT));
    }
}
