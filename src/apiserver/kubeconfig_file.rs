//! Writing a server's kubeconfig to disk readable by its owner only: with authorization on it
//! holds the administrator's bearer token, which must never be world-readable, not even for
//! the moment between creating the file and changing its mode.

use std::io::Write;
use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;

/// Why a kubeconfig could not be written.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigWriteError {
    /// The kubeconfig could not be rendered as YAML.
    #[error("cannot render the kubeconfig")]
    Render(#[source] crate::yaml::Error),
    /// The file could not be created, written or moved into place.
    #[error("cannot write kubeconfig {}", path.display())]
    Write {
        /// The kubeconfig's path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Writes `kubeconfig` to `path` with mode `0600` (owner read and write only), whatever the
/// process umask and whatever the mode of a file already at `path`: the YAML goes to a new file
/// beside it, created `0600`, which then replaces `path` (so a reader never sees half a file).
///
/// # Errors
///
/// [`KubeconfigWriteError::Render`] when the kubeconfig is not representable in YAML,
/// [`KubeconfigWriteError::Write`] when the directory is not writable.
pub fn write_kubeconfig(path: &Path, kubeconfig: &Kubeconfig) -> Result<(), KubeconfigWriteError> {
    let yaml = crate::yaml::to_string(kubeconfig).map_err(KubeconfigWriteError::Render)?;
    let failed = |source| KubeconfigWriteError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(
        ".{}.{:08x}.tmp",
        std::process::id(),
        rand::random::<u32>()
    ));
    let tmp = path.with_file_name(name);
    let written = owner_only(&tmp).and_then(|mut file| {
        file.write_all(yaml.as_bytes())?;
        file.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        // Reason: best effort; the error that matters is the one returned.
        let _ = std::fs::remove_file(&tmp);
        return Err(failed(e));
    }
    Ok(())
}

/// A new file at `path` that only its owner may read or write, from its creation on.
#[cfg(unix)]
fn owner_only(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// A new file at `path` (no Unix modes here: the directory's permissions apply).
#[cfg(not(unix))]
fn owner_only(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_kubeconfig_is_written_0600_even_over_a_world_readable_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        let config = crate::apiserver::kubeconfig("127.0.0.1:6443".parse().unwrap());
        write_kubeconfig(&path, &config).unwrap();
        assert_eq!(mode(&path), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_kubeconfig(&path, &config).unwrap();
        assert_eq!(mode(&path), 0o600, "an existing file's mode is not kept");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("http://127.0.0.1:6443"), "{text}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn an_unwritable_directory_names_the_kubeconfig() {
        let path = Path::new("/nonexistent/dir/kubeconfig");
        let config = crate::apiserver::kubeconfig("127.0.0.1:6443".parse().unwrap());
        let error = write_kubeconfig(path, &config).unwrap_err();
        assert_eq!(
            error.to_string(),
            "cannot write kubeconfig /nonexistent/dir/kubeconfig"
        );
    }
}
