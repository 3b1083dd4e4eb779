//! Kubernetes label and field selectors: parsed into typed values, printed back canonically, and
//! matched against objects.
