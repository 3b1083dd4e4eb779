//! Calling a hook: an executable (the request on standard input, the answer on standard
//! output, killed at its timeout) or a webhook (the request posted, the answer in the body).
//!
//! An answer is read up to the policy's limit ([`Policy::response_limit`]) and no further:
//! an exec hook writing more is killed, a webhook's body is not read past it. What a failing
//! hook wrote (its standard error, an error body) reaches the `Controller`'s status and Events
//! only as a short excerpt ([`excerpt`]); the log keeps more at debug.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};

use serde_json::Value;

use super::contract::{Answer, AnswerError, Request, Response};
use super::persistent::Processes;
use super::policy::Policy;
use super::process::Started;
use super::resource::{ControllerSettings, Hook, WebhookTls};
use super::webhook::{self, Refused, WebClient};

/// How much of a hook's standard error is kept (its end) for the log.
const STDERR_TAIL: usize = 8 << 10;

/// The most characters of a hook's own text (standard error, an error body, a parse error)
/// that go into a `Controller`'s status and Events.
pub const EXCERPT_CHARS: usize = 256;

/// How often the Secret of a webhook's client certificate is read again.
const CLIENT_CERT_REFRESH: Duration = Duration::from_mins(5);

/// Why a hook call failed. Every one is retried with the object's backoff.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The program could not be started (missing, not executable).
    #[error("cannot start hook {program:?}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The program could not be waited for.
    #[error("hook {program:?} could not be waited for")]
    Wait {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The program exited non-zero (or was killed by a signal).
    #[error("hook {program:?} exited with {status}; stderr: {stderr}")]
    Exit {
        /// The program.
        program: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// An excerpt of the end of its standard error ([`excerpt_end`]).
        stderr: String,
    },
    /// A persistent exec hook's process exited (or was killed) while the call was in flight;
    /// the process is restarted with backoff.
    #[error(
        "persistent hook {program:?} exited with the call in flight ({status}); stderr: {stderr}"
    )]
    Exited {
        /// The program.
        program: String,
        /// How it ended, e.g. `exit status: 1` or `killed: no answer within 10s`.
        status: String,
        /// An excerpt of the end of its standard error ([`excerpt_end`]).
        stderr: String,
    },
    /// A line a persistent exec hook wrote is not `{"id": <integer>, "response": ...}`.
    #[error("persistent hook line is not an {{\"id\", \"response\"}} envelope: {reason}")]
    Envelope {
        /// What is wrong, with an [`excerpt`] of the line.
        reason: String,
    },
    /// The hook did not answer in time (an exec hook is killed).
    #[error("hook gave no answer within {}s", .0.as_secs_f64())]
    Timeout(Duration),
    /// The answer is larger than the policy's limit (`--hook-max-response-bytes`); an exec
    /// hook is killed, a webhook's body is not read further.
    #[error("hook response too large (over {limit} bytes)")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// The answer is not a v1 hook response (not JSON, a wrong type, an unknown field).
    #[error("hook answer is not a hooks.informant.dev/v1 response: {reason}")]
    Malformed {
        /// The parser's message, as an [`excerpt`].
        reason: String,
    },
    /// The answer parses but asks for something the manager cannot do.
    #[error("hook answer is invalid")]
    Invalid(#[source] AnswerError),
    /// The webhook could not be reached or its answer read.
    #[error("cannot call webhook {url}")]
    Http {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The hook policy refuses every address the webhook's host resolved to (link-local, or
    /// the API server's).
    #[error("cannot call webhook {url}: {reason}")]
    Refused {
        /// The URL.
        url: String,
        /// Which address, and the rule.
        reason: String,
    },
    /// The client certificate of an `https://` webhook could not be read or used.
    #[error("cannot use the client certificate of Secret {secret}: {reason}")]
    ClientCert {
        /// `namespace/name` of the Secret.
        secret: String,
        /// Why.
        reason: String,
    },
    /// The webhook answered with a non-2xx status.
    #[error("webhook {url} answered {status}: {body}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// An excerpt of the start of the body ([`excerpt`]).
        body: String,
    },
}

impl CallError {
    /// A failed webhook request: [`CallError::Refused`] when the hook policy refused its
    /// addresses, else [`CallError::Http`].
    pub(super) fn from_http(url: &str, source: Box<dyn std::error::Error + Send + Sync>) -> Self {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
        while let Some(e) = cause {
            if let Some(refused) = e.downcast_ref::<Refused>() {
                return CallError::Refused {
                    url: url.to_owned(),
                    reason: refused.0.clone(),
                };
            }
            cause = e.source();
        }
        CallError::Http {
            url: url.to_owned(),
            source,
        }
    }
}

/// `text` as one short line fit for a status or an Event: control characters and runs of
/// white space become one space, and only the first [`EXCERPT_CHARS`] characters are kept
/// (`…` marks a cut).
#[must_use]
pub fn excerpt(text: &str) -> String {
    let line = one_line(text);
    if line.chars().count() <= EXCERPT_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(EXCERPT_CHARS).collect();
    cut.push('…');
    cut
}

/// [`excerpt`], keeping the end of `text` (where a traceback says what failed).
#[must_use]
pub fn excerpt_end(text: &str) -> String {
    let line = one_line(text);
    let count = line.chars().count();
    if count <= EXCERPT_CHARS {
        return line;
    }
    let mut cut = String::from("…");
    cut.extend(line.chars().skip(count - EXCERPT_CHARS));
    cut
}

fn one_line(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Calls `hook` with `request` under [`Policy::open`] and decodes its answer (a webhook's
/// client certificate cannot be read: there is no client to read its Secret with).
///
/// # Errors
/// See [`CallError`].
pub async fn call(hook: &Hook, request: &Request) -> Result<Response, CallError> {
    call_under(hook, request, Arc::new(Policy::open())).await
}

/// [`call`] under `policy` (a webhook on loopback is refused unless `policy` names it).
///
/// # Errors
/// See [`CallError`].
pub async fn call_under(
    hook: &Hook,
    request: &Request,
    policy: Arc<Policy>,
) -> Result<Response, CallError> {
    Caller::new(hook.clone(), policy, None).call(request).await
}

/// Decodes and checks an answer.
///
/// # Errors
/// [`CallError::Malformed`] or [`CallError::Invalid`].
pub fn decode(answer: &[u8]) -> Result<Response, CallError> {
    decode_as(answer)
}

/// Decodes and checks an answer of type `T`.
fn decode_as<T: Answer>(answer: &[u8]) -> Result<T, CallError> {
    checked(serde_json::from_slice(answer))
}

/// Decodes and checks an answer of type `T` a persistent hook wrote in its envelope.
pub(super) fn decode_value<T: Answer>(answer: Value) -> Result<T, CallError> {
    checked(serde_json::from_value(answer))
}

fn checked<T: Answer>(decoded: Result<T, serde_json::Error>) -> Result<T, CallError> {
    let answer = decoded.map_err(|e| CallError::Malformed {
        reason: excerpt(&e.to_string()),
    })?;
    answer.check().map_err(CallError::Invalid)?;
    Ok(answer)
}

/// The hook of one controller, ready to call: its policy and, for a webhook, its client
/// (built at the first call; with a client certificate, rebuilt when its Secret changes).
pub(super) struct Caller {
    hook: Hook,
    policy: Arc<Policy>,
    secrets: Option<Api<Secret>>,
    web: tokio::sync::Mutex<Option<Web>>,
    /// The processes of a persistent exec hook.
    processes: Option<Processes>,
}

/// A webhook client, and the version of the client certificate's Secret it was built from.
struct Web {
    client: WebClient,
    version: Option<String>,
    checked: Instant,
}

impl Caller {
    /// A caller of `hook` under `policy`, reading client certificates through `secrets` (the
    /// Secrets of the `Controller`'s namespace).
    pub(super) fn new(hook: Hook, policy: Arc<Policy>, secrets: Option<Api<Secret>>) -> Self {
        Self::with_processes(hook, policy, secrets, 1, String::new())
    }

    /// [`Caller::new`]; a persistent exec hook keeps `processes` processes, naming
    /// `controller` in its log.
    pub(super) fn with_processes(
        hook: Hook,
        policy: Arc<Policy>,
        secrets: Option<Api<Secret>>,
        processes: u16,
        controller: String,
    ) -> Self {
        let processes = match &hook {
            Hook::Persistent {
                command,
                env,
                timeout,
                calls_per_process,
            } => Some(
                Processes::new(
                    command.clone(),
                    *timeout,
                    processes,
                    *calls_per_process,
                    policy.response_limit(),
                    controller,
                )
                .with_env(env.clone()),
            ),
            Hook::Exec { .. } | Hook::Webhook { .. } => None,
        };
        Self {
            hook,
            policy,
            secrets,
            web: tokio::sync::Mutex::new(None),
            processes,
        }
    }

    /// Stops the processes of a persistent exec hook, if any, and waits until they are gone.
    pub(super) async fn stop(&self) {
        if let Some(processes) = &self.processes {
            processes.stop().await;
        }
    }

    /// The caller of the hook of `settings`, reading client certificates from the Secrets of
    /// its `Controller`'s namespace through `client`.
    pub(super) fn of(
        settings: &ControllerSettings,
        policy: Arc<Policy>,
        client: &kube::Client,
    ) -> Self {
        let secrets = Api::namespaced(client.clone(), &settings.key.namespace);
        Self::with_processes(
            settings.hook.clone(),
            policy,
            Some(secrets),
            settings.concurrency,
            settings.key.to_string(),
        )
    }

    /// Calls the hook with `request` and decodes its answer.
    pub(super) async fn call(
        &self,
        request: &(impl serde::Serialize + Sync),
    ) -> Result<Response, CallError> {
        self.call_as(request).await
    }

    /// Calls the hook with `request` and decodes its answer as a `T`.
    pub(super) async fn call_as<T: Answer>(
        &self,
        request: &(impl serde::Serialize + Sync),
    ) -> Result<T, CallError> {
        if let Some(processes) = &self.processes {
            return decode_value(processes.call(request).await?);
        }
        let body = serde_json::to_vec(request).map_err(|e| CallError::Malformed {
            reason: excerpt(&e.to_string()),
        })?;
        let limit = self.policy.response_limit();
        let (answer, timeout) = match &self.hook {
            // A persistent hook always has its processes: this arm is never taken for it.
            Hook::Exec {
                command,
                env,
                timeout,
            }
            | Hook::Persistent {
                command,
                env,
                timeout,
                ..
            } => (
                tokio::time::timeout(*timeout, exec(command, env, body, limit)).await,
                *timeout,
            ),
            Hook::Webhook { url, timeout, tls } => {
                let post = async {
                    let client = self.client(tls.as_ref()).await?;
                    webhook::post(&client, url, body, limit).await
                };
                (tokio::time::timeout(*timeout, post).await, *timeout)
            }
        };
        let answer = answer.map_err(|_| CallError::Timeout(timeout))??;
        decode_as(&answer)
    }

    /// The webhook's client: built once, or (with a client certificate) again when its
    /// Secret changed, looked at no more than every [`CLIENT_CERT_REFRESH`].
    async fn client(&self, tls: Option<&WebhookTls>) -> Result<WebClient, CallError> {
        let mut web = self.web.lock().await;
        let secret = tls.and_then(|t| t.client_cert_secret.as_deref());
        if let Some(current) = web.as_ref()
            && (secret.is_none() || current.checked.elapsed() < CLIENT_CERT_REFRESH)
        {
            return Ok(current.client.clone());
        }
        let Some(tls) = tls else {
            let client = WebClient::plain(Arc::clone(&self.policy));
            *web = Some(Web {
                client: client.clone(),
                version: None,
                checked: Instant::now(),
            });
            return Ok(client);
        };
        let identity = match secret {
            None => None,
            Some(name) => Some(self.read_identity(name).await?),
        };
        let version = identity.as_ref().and_then(|i| i.0.clone());
        if let Some(current) = web.as_mut()
            && current.version == version
        {
            current.checked = Instant::now();
            return Ok(current.client.clone());
        }
        let client = WebClient::secure(
            Arc::clone(&self.policy),
            &tls.ca_bundle,
            identity
                .as_ref()
                .map(|(_, crt, key)| (crt.as_slice(), key.as_slice())),
        )
        .map_err(|reason| self.cert_error(secret.unwrap_or_default(), reason))?;
        *web = Some(Web {
            client: client.clone(),
            version,
            checked: Instant::now(),
        });
        Ok(client)
    }

    /// The `tls.crt` and `tls.key` of the Secret `name`, with its resourceVersion.
    async fn read_identity(
        &self,
        name: &str,
    ) -> Result<(Option<String>, Vec<u8>, Vec<u8>), CallError> {
        let Some(secrets) = &self.secrets else {
            return Err(self.cert_error(name, "no client to read it with".to_owned()));
        };
        let secret = secrets
            .get(name)
            .await
            .map_err(|e| self.cert_error(name, excerpt(&e.to_string())))?;
        let data = secret.data.unwrap_or_default();
        let field = |key: &str| {
            data.get(key)
                .map(|b| b.0.clone())
                .ok_or_else(|| self.cert_error(name, format!("it has no {key}")))
        };
        Ok((
            secret.metadata.resource_version,
            field("tls.crt")?,
            field("tls.key")?,
        ))
    }

    fn cert_error(&self, name: &str, reason: String) -> CallError {
        let namespace = self
            .secrets
            .as_ref()
            .and_then(|a| a.namespace().map(str::to_owned))
            .unwrap_or_default();
        CallError::ClientCert {
            secret: format!("{namespace}/{name}"),
            reason,
        }
    }
}

/// Runs `command` (with `env`, see [`Started::spawn`]) with `input` on its standard input and returns its standard output, at
/// most `limit` bytes: past it the child is killed. The hook runs in a process group of its
/// own ([`Started`]), killed as a whole when this future ends or is dropped (at the
/// timeout): what the hook left running dies with the call.
async fn exec(
    command: &[String],
    env: &[(String, String)],
    input: Vec<u8>,
    limit: usize,
) -> Result<Vec<u8>, CallError> {
    let program = command.first().cloned().unwrap_or_default();
    let mut started = Started::spawn(command, env).map_err(|source| CallError::Spawn {
        program: program.clone(),
        source,
    })?;
    let wait_error = |source| CallError::Wait {
        program: program.clone(),
        source,
    };
    let child = &mut started.child;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its input closes the pipe: not an error by itself.
            let _ = stdin.write_all(&input).await;
        }
        Ok::<(), CallError>(())
    };
    let read = async {
        let mut out = Vec::new();
        if let Some(stdout) = stdout {
            let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
            stdout
                .take(cap)
                .read_to_end(&mut out)
                .await
                .map_err(wait_error)?;
        }
        if out.len() > limit {
            return Err(CallError::TooLarge { limit });
        }
        Ok(out)
    };
    let outputs = tokio::try_join!(feed, read, tail(stderr));
    let ((), stdout, stderr) = match outputs {
        Ok(outputs) => outputs,
        Err(e) => {
            // Over the limit: the hook may still be writing; it is not waited for.
            started.kill_group();
            let _ = started.child.wait().await;
            return Err(e);
        }
    };
    let status = started.child.wait().await.map_err(wait_error)?;
    // What the hook left behind (a child still running) is killed with its group.
    drop(started);
    let stderr = String::from_utf8_lossy(&stderr);
    if !status.success() {
        tracing::debug!(hook = %program, %status, stderr = %stderr, "hook failed");
        return Err(CallError::Exit {
            program,
            status,
            stderr: excerpt_end(&stderr),
        });
    }
    if !stderr.is_empty() {
        tracing::debug!(hook = %program, stderr = %stderr, "hook wrote to stderr");
    }
    Ok(stdout)
}

/// The last [`STDERR_TAIL`] bytes of `stream`, read to its end.
async fn tail(stream: Option<impl AsyncRead + Unpin>) -> Result<Vec<u8>, CallError> {
    let mut kept = Vec::new();
    let Some(mut stream) = stream else {
        return Ok(kept);
    };
    let mut buffer = vec![0u8; 4096];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return Ok(kept),
            Ok(n) => {
                kept.extend_from_slice(&buffer[..n]);
                if kept.len() > STDERR_TAIL {
                    kept.drain(..kept.len() - STDERR_TAIL);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
