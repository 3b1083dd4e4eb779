//! controller-runtime's default retry after a failed reconcile: a per-object exponential
//! backoff, as an error policy for kube-runtime's scheduler.

use std::sync::Arc;
use std::time::Duration;

use kube::core::Resource;
use kube::runtime::controller::Action;

use super::context::Context;

/// The wait after an object's first failed reconcile.
///
/// client-go `util/workqueue/default_rate_limiters.go` `DefaultTypedControllerRateLimiter`:
/// `NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, 1000*time.Second)`.
pub const DEFAULT_ERROR_BACKOFF_BASE: Duration = Duration::from_millis(5);

/// The longest wait between retries of one object (same source).
pub const DEFAULT_ERROR_BACKOFF_MAX: Duration = Duration::from_secs(1000);

/// The wait before retrying an object whose last `failures` reconciles failed: 5 ms after the
/// first failure, doubling with each further one, at most 1000 s (client-go's
/// `ItemExponentialFailureRateLimiter.When`). 0 failures wait nothing.
///
/// ```
/// use std::time::Duration;
/// use informant::controller::error_backoff;
///
/// assert_eq!(error_backoff(1), Duration::from_millis(5));
/// assert_eq!(error_backoff(3), Duration::from_millis(20));
/// assert_eq!(error_backoff(40), Duration::from_secs(1000));
/// ```
#[must_use]
pub fn error_backoff(failures: u32) -> Duration {
    let Some(exponent) = failures.checked_sub(1) else {
        return Duration::ZERO;
    };
    // 2^18 * 5 ms already exceeds the maximum; larger exponents only risk overflow.
    let factor = 1_u32 << exponent.min(18);
    DEFAULT_ERROR_BACKOFF_BASE
        .saturating_mul(factor)
        .min(DEFAULT_ERROR_BACKOFF_MAX)
}

/// The error policy controller-runtime applies by default (`Queue.AddRateLimited` after a
/// reconcile error): retry the object after [`error_backoff`] of its consecutive failures, so
/// a persistently failing object backs off to one try every 1000 s while every other object
/// keeps flowing. A successful reconcile resets the count.
///
/// Not copied: client-go's overall token bucket (10 qps, burst 100) on top of the per-object
/// backoff; kube-runtime's concurrency limit bounds the load instead.
#[allow(
    clippy::needless_pass_by_value,
    reason = "kube-runtime calls error policies with owned arguments"
)]
pub fn default_error_policy<K, E, T>(object: Arc<K>, _error: &E, ctx: Arc<Context<T>>) -> Action
where
    K: Resource<DynamicType = ()>,
{
    Action::requeue(ctx.error_backoff(object.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_five_milliseconds_and_stops_at_a_thousand_seconds() {
        let waits: Vec<u128> = (0..=6).map(|n| error_backoff(n).as_millis()).collect();
        assert_eq!(waits, vec![0, 5, 10, 20, 40, 80, 160]);
        // 5 ms * 2^17 = 655 s; 2^18 would be 1310 s.
        assert_eq!(error_backoff(18), Duration::from_millis(5 << 17));
        assert_eq!(error_backoff(19), DEFAULT_ERROR_BACKOFF_MAX);
        assert_eq!(error_backoff(u32::MAX), DEFAULT_ERROR_BACKOFF_MAX);
    }
}
