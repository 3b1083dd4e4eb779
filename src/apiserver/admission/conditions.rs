//! `matchConditions`: CEL expressions a request must meet for a webhook to be called, as
//! kube-apiserver evaluates them (`admission/plugin/webhook/matchconditions`): every condition
//! is evaluated over `object`, `oldObject` and `request` (the `AdmissionRequest`); one that is
//! `false` skips the webhook; an error (no false) fails the request under `failurePolicy:
//! Fail` and skips the webhook under `Ignore`. The `authorizer` variable is not offered, and a
//! condition naming it is refused at registration.

use serde_json::Value;

/// One condition: its name and expression.
#[derive(Debug, Clone)]
pub(super) struct Condition {
    pub name: String,
    pub expression: String,
}

/// What the conditions decide.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// All are true: call the webhook.
    Call,
    /// One is false: skip it.
    Skip,
    /// None false, but one could not be evaluated: why.
    Error(String),
}

/// Why `expression` cannot be a match condition, if it cannot.
pub(super) fn check(expression: &str) -> Result<(), String> {
    let program =
        cel::Program::compile(expression).map_err(|e| format!("compilation failed: {e}"))?;
    let references = program.references();
    if references.has_variable("authorizer") {
        return Err("the embedded API server does not offer the authorizer variable".into());
    }
    for variable in references.variables() {
        if !matches!(variable, "object" | "oldObject" | "request") {
            return Err(format!("undeclared reference to {variable:?}"));
        }
    }
    Ok(())
}

fn evaluate_one(
    expression: &str,
    object: &Value,
    old: &Value,
    request: &Value,
) -> Result<bool, String> {
    let program = cel::Program::compile(expression).map_err(|e| e.to_string())?;
    let mut context = cel::Context::default();
    for (name, value) in [("object", object), ("oldObject", old), ("request", request)] {
        let value = cel::to_value(value).map_err(|e| e.to_string())?;
        context.add_variable_from_value(name, value);
    }
    match program.execute(&context).map_err(|e| e.to_string())? {
        cel::Value::Bool(b) => Ok(b),
        _ => Err("must evaluate to bool".into()),
    }
}

/// The verdict of `conditions` on a request whose review's `request` is `request`.
pub(super) fn evaluate(conditions: &[Condition], request: &Value) -> Verdict {
    let mut errors = Vec::new();
    for condition in conditions {
        match evaluate_one(
            &condition.expression,
            &request["object"],
            &request["oldObject"],
            request,
        ) {
            Ok(true) => {}
            Ok(false) => return Verdict::Skip,
            Err(e) => errors.push(format!(
                "failed to evaluate match condition {:?}: {e}",
                condition.name
            )),
        }
    }
    if errors.is_empty() {
        Verdict::Call
    } else {
        Verdict::Error(errors.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn condition(expression: &str) -> Condition {
        Condition {
            name: "c".into(),
            expression: expression.into(),
        }
    }

    #[test]
    fn conditions_read_the_object_the_old_object_and_the_request() {
        let request = json!({"operation": "UPDATE", "object": {"metadata": {"labels": {"a": "1"}}},
                             "oldObject": {"metadata": {"labels": {}}}});
        let call = |e: &str| evaluate(&[condition(e)], &request);
        assert_eq!(call("request.operation == 'UPDATE'"), Verdict::Call);
        assert_eq!(call("has(object.metadata.labels.a)"), Verdict::Call);
        assert_eq!(call("has(oldObject.metadata.labels.a)"), Verdict::Skip);
        assert!(matches!(
            call("object.metadata.nope == 1"),
            Verdict::Error(_)
        ));
        assert!(matches!(call("1"), Verdict::Error(e) if e.contains("must evaluate to bool")));
        // A false condition wins over an error, as upstream.
        assert_eq!(
            evaluate(
                &[condition("object.nope == 1"), condition("false")],
                &request
            ),
            Verdict::Skip
        );
    }

    #[test]
    fn a_condition_is_checked_when_registered() {
        assert!(check("object.metadata.name == 'x'").is_ok());
        assert!(
            check("object.metadata.name ==")
                .unwrap_err()
                .starts_with("compilation failed")
        );
        assert!(check("authorizer.group('').resource('pods').check('get').allowed()").is_err());
        assert!(check("params.x == 1").unwrap_err().contains("params"));
    }
}
