//! `spec.hook.exec.env`: the variables a Controller gives its hook's processes, validated as
//! a Pod's `env` names are, without what makes the dynamic loader run other code.

use crate::config::{FieldError, FieldPath};

use super::types::EnvVarSpec;

/// Names glibc's loader removes from a set-user-ID program's environment, since each makes
/// it load or read code or data a program did not choose; from glibc's
/// `sysdeps/generic/unsecvars.h` (`UNSECURE_ENVVARS`), less the `LD_` ones, which
/// [`REFUSED_PREFIXES`] covers. Under `--hook-allow-exec` the manager runs only the programs
/// its operator named: these would let a Controller writer make such a program run theirs.
const REFUSED_NAMES: [&str; 11] = [
    "GCONV_PATH",
    "GETCONF_DIR",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "LOCPATH",
    "MALLOC_TRACE",
    "NIS_PATH",
    "NLSPATH",
    "RESOLV_HOST_CONF",
    "RES_OPTIONS",
];

/// The dynamic loaders' own variables: glibc's and musl's `LD_*` (`LD_PRELOAD`,
/// `LD_LIBRARY_PATH`, `LD_AUDIT`, ...) and macOS dyld's `DYLD_*`.
const REFUSED_PREFIXES: [&str; 2] = ["LD_", "DYLD_"];

/// Why `name` is not a valid environment variable name as Kubernetes validates a container's
/// `env[].name` (k8s.io/apimachinery `pkg/util/validation/validation.go`, `IsEnvVarName`:
/// letters, digits, `_`, `-` and `.`, not starting with a digit, and not `.`, `..` or
/// starting with `..`), if it is not.
fn invalid_name(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_'));
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if !first_ok || !rest_ok {
        return Some(
            "a valid environment variable name must consist of letters, digits, '_', '-' \
             or '.', and must not start with a digit",
        );
    }
    if name == "." || name == ".." || name.starts_with("..") {
        return Some("must not be '.' or '..' nor start with '..'");
    }
    None
}

/// Whether a name is refused for what the loader does with it (see [`REFUSED_NAMES`]).
fn refused(name: &str) -> bool {
    REFUSED_NAMES.contains(&name)
        || REFUSED_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

/// Validates `env` (at `path`, the `exec.env` list), adding every error; its variables as
/// the process gets them, when all are valid.
pub(super) fn exec_env(
    env: &[EnvVarSpec],
    path: &FieldPath,
    errors: &mut Vec<FieldError>,
) -> Option<Vec<(String, String)>> {
    let before = errors.len();
    for (i, var) in env.iter().enumerate() {
        let name_path = path.index(i).field("name");
        let name = var.name.as_str();
        if let Some(reason) = invalid_name(name) {
            errors.push(FieldError::new(&name_path, format!("{name:?}: {reason}")));
        } else if refused(name) {
            errors.push(FieldError::new(
                &name_path,
                format!(
                    "{name:?} is refused: the dynamic loader reads it (LD_*, DYLD_* and \
                     glibc's other unsafe variables such as GCONV_PATH) and would make a \
                     program load code it did not choose; remove it"
                ),
            ));
        } else if env[..i].iter().any(|earlier| earlier.name == var.name) {
            errors.push(FieldError::new(
                &name_path,
                format!("{name:?} is named twice; keep one"),
            ));
        }
        if var.value.contains('\0') {
            errors.push(FieldError::new(
                &path.index(i).field("value"),
                "must not hold a NUL character (a process's environment cannot)",
            ));
        }
    }
    (errors.len() == before).then(|| {
        env.iter()
            .map(|var| (var.name.clone(), var.value.clone()))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &str, value: &str) -> EnvVarSpec {
        EnvVarSpec {
            name: name.into(),
            value: value.into(),
        }
    }

    fn errors_of(env: &[EnvVarSpec]) -> Vec<String> {
        let mut errors = Vec::new();
        let path = FieldPath::root("spec").field("env");
        let got = exec_env(env, &path, &mut errors);
        assert_eq!(got.is_some(), errors.is_empty(), "{errors:?}");
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn names_kubernetes_takes_are_taken_with_their_values() {
        let env = [
            var("LOG_FORMAT", "json"),
            var("my.var-1", ""),
            var("_X", "a=b c"),
            var("-dash", "1"),
            var("PATH", "/opt/bin"),
        ];
        let mut errors = Vec::new();
        let got = exec_env(&env, &FieldPath::root("env"), &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            got.unwrap_or_default(),
            [
                ("LOG_FORMAT", "json"),
                ("my.var-1", ""),
                ("_X", "a=b c"),
                ("-dash", "1"),
                ("PATH", "/opt/bin"),
            ]
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
        );
    }

    #[test]
    fn every_bad_name_is_refused_at_its_field_path() {
        let errors = errors_of(&[
            var("OK", "1"),
            var("1ABC", "x"),
            var("", "x"),
            var("A=B", "x"),
            var("..", "x"),
            var("..x", "x"),
            var("LD_PRELOAD", "/tmp/evil.so"),
            var("LD_LIBRARY_PATH", "/tmp"),
            var("DYLD_INSERT_LIBRARIES", "x"),
            var("GCONV_PATH", "/tmp"),
            var("OK", "2"),
            var("NUL", "a\0b"),
        ]);
        let fields: Vec<&str> = errors.iter().filter_map(|e| e.split(':').next()).collect();
        assert_eq!(
            fields,
            [
                "spec.env[1].name",
                "spec.env[2].name",
                "spec.env[3].name",
                "spec.env[4].name",
                "spec.env[5].name",
                "spec.env[6].name",
                "spec.env[7].name",
                "spec.env[8].name",
                "spec.env[9].name",
                "spec.env[10].name",
                "spec.env[11].value",
            ],
            "{errors:#?}"
        );
        assert!(
            errors[5].contains("LD_PRELOAD") && errors[5].contains("refused"),
            "{errors:#?}"
        );
        assert!(errors[9].contains("named twice"), "{errors:#?}");
    }

    #[test]
    fn lower_case_ld_is_a_name_like_any_other() {
        // The loader reads LD_ in capitals only; Kubernetes takes the name.
        assert!(errors_of(&[var("ld_preload", "x")]).is_empty());
    }
}
