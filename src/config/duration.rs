//! Go `time.ParseDuration` durations (`10h`, `30m`, `90s`, `1h30m`, `1.5s`), as Kubernetes
//! writes `metav1.Duration`, parsed without panicking.
//!
//! kube-core's `Duration` parses the same syntax but multiplies by an unchecked `f64`, which
//! panics on input such as `NaNh`, `1e400h` or `1h-3m`; a config file must never crash the
//! manager, so this module parses with integer arithmetic and range checks instead.

use std::fmt;
use std::time::Duration;

/// Go's largest duration: `math.MaxInt64` nanoseconds (about 292 years).
const MAX_NANOS: u128 = i64::MAX as u128;

/// Why a duration string was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The string is empty.
    #[error("empty duration")]
    Empty,
    /// A sign was given; configuration durations are never negative.
    #[error("negative or signed duration {0:?}")]
    Signed(String),
    /// A number is missing or malformed.
    #[error("invalid number in duration {0:?}")]
    Number(String),
    /// A number has no unit after it.
    #[error("missing unit in duration {0:?}")]
    MissingUnit(String),
    /// A unit is not one of ns, us, µs, ms, s, m, h.
    #[error("unknown unit {unit:?} in duration {input:?}")]
    UnknownUnit {
        /// The whole input.
        input: String,
        /// The unit found.
        unit: String,
    },
    /// The duration exceeds Go's limit of about 2562047h.
    #[error("duration {0:?} is too large")]
    Overflow(String),
}

/// Parses a Go duration: one or more `<number><unit>` terms, or `0` alone. Numbers may have a
/// fraction (`1.5h`); units are `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h`.
///
/// # Errors
///
/// [`DurationError`] when the string is not such a duration, is signed, or exceeds Go's range.
///
/// ```
/// use std::time::Duration;
/// use informant::config::parse_duration;
/// assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
/// assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
/// assert!(parse_duration("10").is_err());
/// ```
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    if input.is_empty() {
        return Err(DurationError::Empty);
    }
    if input.starts_with(['-', '+']) {
        return Err(DurationError::Signed(input.to_owned()));
    }
    if input == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = input;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(a) => {
                let n = a.find(|c: char| !c.is_ascii_digit()).unwrap_or(a.len());
                a.split_at(n)
            }
            None => ("", after),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(DurationError::Number(input.to_owned()));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit(input.to_owned()));
        }
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "\u{00b5}s" | "\u{03bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(DurationError::UnknownUnit {
                    input: input.to_owned(),
                    unit: unit.to_owned(),
                });
            }
        };
        let overflow = || DurationError::Overflow(input.to_owned());
        let mut whole: u128 = 0;
        for d in int_part.bytes() {
            whole = whole
                .checked_mul(10)
                .and_then(|w| w.checked_add(u128::from(d - b'0')))
                .filter(|w| *w <= MAX_NANOS)
                .ok_or_else(overflow)?;
        }
        // Go keeps at most about 19 significant fraction digits; 18 is plenty for nanoseconds.
        let (mut frac, mut scale): (u128, u128) = (0, 1);
        for d in frac_part.bytes().take(18) {
            frac = frac * 10 + u128::from(d - b'0');
            scale *= 10;
        }
        let term = whole
            .checked_mul(unit_nanos)
            .and_then(|t| t.checked_add(frac * unit_nanos / scale))
            .ok_or_else(overflow)?;
        total = total
            .checked_add(term)
            .filter(|t| *t <= MAX_NANOS)
            .ok_or_else(overflow)?;
        rest = next;
    }
    let secs = u64::try_from(total / 1_000_000_000)
        .map_err(|_| DurationError::Overflow(input.to_owned()))?;
    let nanos = u32::try_from(total % 1_000_000_000)
        .map_err(|_| DurationError::Overflow(input.to_owned()))?;
    Ok(Duration::new(secs, nanos))
}

/// Formats a duration the short way a user would write it: `10h`, `1h30m`, `90ms`, `0s`.
///
/// ```
/// use std::time::Duration;
/// use informant::config::format_duration;
/// assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
/// assert_eq!(format_duration(Duration::from_millis(1500)), "1s500ms");
/// ```
#[must_use]
pub fn format_duration(d: Duration) -> String {
    struct Short(Duration);
    impl fmt::Display for Short {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let mut nanos = self.0.as_nanos();
            if nanos == 0 {
                return f.write_str("0s");
            }
            for (unit, size) in [
                ("h", 3_600_000_000_000_u128),
                ("m", 60_000_000_000),
                ("s", 1_000_000_000),
                ("ms", 1_000_000),
                ("us", 1_000),
                ("ns", 1),
            ] {
                let n = nanos / size;
                if n > 0 {
                    write!(f, "{n}{unit}")?;
                    nanos %= size;
                }
            }
            Ok(())
        }
    }
    Short(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_go_duration_forms_used_in_configs() {
        let cases: &[(&str, Duration)] = &[
            ("0", Duration::ZERO),
            ("10h", Duration::from_hours(10)),
            ("30m", Duration::from_mins(30)),
            ("90s", Duration::from_secs(90)),
            ("1h30m", Duration::from_mins(90)),
            ("1.5h", Duration::from_mins(90)),
            (".5s", Duration::from_millis(500)),
            ("1.s", Duration::from_secs(1)),
            ("100ms", Duration::from_millis(100)),
            ("7us", Duration::from_micros(7)),
            ("7\u{00b5}s", Duration::from_micros(7)),
            ("3ns", Duration::from_nanos(3)),
            ("1h1m1s1ms", Duration::from_millis(3_661_001)),
            ("2562047h", Duration::from_hours(2_562_047)),
        ];
        for (input, want) in cases {
            assert_eq!(parse_duration(input).as_ref(), Ok(want), "{input}");
        }
    }

    #[test]
    fn rejects_what_go_rejects_and_signs() {
        for input in [
            "",
            "10",
            "h",
            "1x",
            "1d",
            "-1s",
            "+1s",
            "1h-3m",
            ".s",
            "1..5s",
            "NaNh",
            "1e3s",
            "2562048h",
            "99999999999999999999999h",
        ] {
            assert!(parse_duration(input).is_err(), "{input} should be rejected");
        }
    }

    #[test]
    fn formats_back_to_the_short_form() {
        assert_eq!(format_duration(Duration::from_hours(10)), "10h");
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
    }
}
