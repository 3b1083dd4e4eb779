//! Kubernetes label and field selectors: parsed into typed values, printed back canonically, and
//! matched against objects.
//!
//! Both follow apimachinery exactly (`pkg/labels/selector.go`, `pkg/fields/selector.go`); the
//! few deliberate differences are documented on the parse functions.

mod error;
mod field;
mod label;

pub use error::{Detail, ParseError};
pub use field::{FieldOperator, FieldRequirement, FieldSelector};
pub use label::{
    LABEL_NAME_MAX_LENGTH, LABEL_PREFIX_MAX_LENGTH, LabelSelector, Operator, Requirement,
    RequirementError,
};
