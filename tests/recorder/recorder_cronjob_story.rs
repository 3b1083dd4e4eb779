//! The `CronJob` story through `informant simulate --summary`: with client-go's spam key,
//! `SawCompletedJob` stops being delivered around minute 9–10; with the reason in the key it
//! is always delivered.

use std::path::PathBuf;

use informant::recorder::simulate::{self, Summary};
use informant::recorder::{CorrelatorOptions, SpamKeyField};

fn story(options: &CorrelatorOptions) -> Summary {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/scenarios/in/a_cronjob_default.in.jsonl");
    let input = std::fs::read(path).unwrap();
    simulate::run(&input[..], options, std::io::sink(), false).unwrap()
}

#[test]
fn with_defaults_saw_completed_job_is_never_delivered_after_minute_nine() {
    let s = story(&CorrelatorOptions::default());
    let saw = &s["SawCompletedJob"];
    let after = saw.never_delivered_after().unwrap();
    assert!((9.0 * 60.0..10.0 * 60.0).contains(&after), "{after}");
    assert!(saw.spam_filtered > 0);
    let totals: u64 = s.values().map(simulate::ReasonSummary::recorded).sum();
    assert_eq!(totals, 87);
    assert_eq!(s.values().map(|r| r.invalid).sum::<u64>(), 0);
    let created: u64 = s.values().map(|r| r.created).sum();
    let patched: u64 = s.values().map(|r| r.patched).sum();
    assert_eq!((created, patched), (26, 4));
}

#[test]
fn with_reason_in_the_spam_key_saw_completed_job_is_always_delivered() {
    let o = CorrelatorOptions {
        spam_key_fields: vec![
            SpamKeyField::Source,
            SpamKeyField::InvolvedObject,
            SpamKeyField::Type,
            SpamKeyField::Reason,
        ],
        ..CorrelatorOptions::default()
    };
    let s = story(&o);
    for (reason, r) in &s {
        assert_eq!(r.spam_filtered, 0, "{reason}");
        assert_eq!(r.never_delivered_after(), None, "{reason}");
    }
}
